// The responder: window classification, placement checks, in-order completion, READ
// execution, NAKs and the ACK generation policy (protocol.md sections 5, 6, 11).
#include "softmetaroce/receiver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "test_support.h"

namespace metaroce {
namespace {

using namespace test;
using flag::kAckReq;
using flag::kFirst;
using flag::kImm;
using flag::kInv;
using flag::kLast;
using flag::kRetx;
using flag::kSolicited;

constexpr std::uint32_t kMtu = 256;
constexpr std::uint32_t kWriteKey = 0x10;
constexpr std::uint64_t kWriteBase = 0x10000;
constexpr std::uint32_t kReadKey = 0x20;
constexpr std::uint64_t kReadBase = 0x20000;
constexpr std::uint32_t kRecvKey = 0x30;
constexpr std::uint64_t kRecvBase = 0x30000;
constexpr std::uint32_t kFastKey = 0x4401;  // a fast-registration region's
constexpr std::uint64_t kFastBase = 0x40000;
constexpr std::uint32_t kRegionSize = 0x10000;

class ReceiverTest : public ::testing::Test {
  protected:
    explicit ReceiverTest(Psn expected = 100) {
        memory.register_region(kWriteKey, kWriteBase, kRegionSize, access::kRemoteWrite);
        memory.register_region(kReadKey, kReadBase, kRegionSize, access::kRemoteRead);
        memory.register_region(kRecvKey, kRecvBase, kRegionSize, access::kLocalWrite);
        fast = memory.alloc_fast_reg_region(kRegionSize);
        memory.fast_register(fast, kFastKey, kFastBase, kRegionSize, access::kRemoteWrite);
        const std::vector<std::uint8_t> readable = pattern_bytes(kRegionSize, 99);
        std::copy(readable.begin(), readable.end(), memory.region_bytes(kReadKey).begin());
        config.qpn = kQpB;
        config.peer_qpn = kQpA;
        config.expected_psn = expected;
        config.mtu = kMtu;
        rx = std::make_unique<Receiver>(config, memory);
    }

    void deliver(const Packet& p, TimeUs now = 0, bool ce = false) {
        rx->on_packet(through_wire(p, kMtu), ce, now);
    }
    std::vector<Packet> sent() { return through_wire(rx->take_outbox(), kMtu); }
    std::vector<Packet> acks() { return of_opcode(sent(), Opcode::Ack); }

    // A WRITE of `data` at `addr`, split into MTU packets starting at `psn`.
    std::vector<Packet> write_message(Psn psn, std::uint64_t addr,
                                      const std::vector<std::uint8_t>& data, std::uint32_t msn,
                                      std::uint8_t extra = 0, std::uint32_t imm = 0) {
        std::vector<Packet> out;
        const auto n = std::max<std::size_t>(1, (data.size() + kMtu - 1) / kMtu);
        for (std::size_t k = 0; k < n; ++k) {
            const std::size_t begin = k * kMtu;
            const std::size_t end = std::min(data.size(), begin + kMtu);
            std::uint8_t flags = extra;
            if (k == 0) flags |= kFirst;
            if (k + 1 == n) flags |= kLast | kAckReq;
            if ((extra & kSolicited) && !(extra & kImm)) flags &= ~kSolicited;
            out.push_back(
                data_packet(Opcode::Write, psn_add(psn, k), flags,
                            Deth{addr + begin, kWriteKey, msn,
                                 static_cast<std::uint32_t>(data.size()), (extra & kImm) ? imm : 0},
                            {data.begin() + begin, data.begin() + end}));
        }
        return out;
    }

    // IMM with the immediate value (or INV with the key in it) and SOLICITED on the last
    // packet only, as a sender puts them.
    std::vector<Packet> send_message(Psn psn, const std::vector<std::uint8_t>& data,
                                     std::uint32_t msn, std::uint8_t extra = 0,
                                     std::uint32_t imm = 0) {
        std::vector<Packet> out;
        const auto n = std::max<std::size_t>(1, (data.size() + kMtu - 1) / kMtu);
        for (std::size_t k = 0; k < n; ++k) {
            const std::size_t begin = k * kMtu;
            const std::size_t end = std::min(data.size(), begin + kMtu);
            const bool last = k + 1 == n;
            std::uint8_t flags = last ? extra : 0;
            if (k == 0) flags |= kFirst;
            if (last) flags |= kLast | kAckReq;
            out.push_back(data_packet(Opcode::Send, psn_add(psn, k), flags,
                                      Deth{begin, 0, msn, static_cast<std::uint32_t>(data.size()),
                                           (last && (extra & (kImm | kInv))) ? imm : 0},
                                      {data.begin() + begin, data.begin() + end}));
        }
        return out;
    }

    ReceiveWqe wqe(std::uint64_t wr_id, std::uint64_t offset, std::uint32_t len) {
        return ReceiveWqe{wr_id, {{kRecvKey, kRecvBase + offset, len}}};
    }

    // A one-packet WRITE of `data` at `offset` in the fast-registration region, under `key`.
    Packet fast_write(Psn psn, std::uint64_t offset, std::vector<std::uint8_t> data,
                      std::uint32_t msn, std::uint32_t key = kFastKey) {
        const auto len = static_cast<std::uint32_t>(data.size());
        return data_packet(Opcode::Write, psn, kFirst | kLast | kAckReq,
                           Deth{kFastBase + offset, key, msn, len, 0}, std::move(data));
    }

    MemoryModel memory;
    MemoryModel::FastRegId fast = 0;  // registered under kFastKey
    ReceiverConfig config;
    std::unique_ptr<Receiver> rx;
};

TEST_F(ReceiverTest, InOrderWritePlacesAndAcksOnAckReq) {
    const auto data = pattern_bytes(600, 1);
    const auto packets = write_message(100, kWriteBase + 8, data, 0);
    ASSERT_EQ(packets.size(), 3u);
    deliver(packets[0]);
    deliver(packets[1]);
    EXPECT_TRUE(sent().empty());  // in order, no ACK_REQ: coalesced
    deliver(packets[2]);
    const auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().cum_psn, 103u);
    EXPECT_EQ(a[0].ack().sack, SackWords{});
    EXPECT_EQ(a[0].ack().syndrome, Syndrome::Ack);
    EXPECT_EQ(a[0].ack().msn, 0u);  // no message that consumed a receive WQE yet
    EXPECT_TRUE(std::equal(data.begin(), data.end(), memory.region_bytes(kWriteKey).begin() + 8));
    EXPECT_TRUE(rx->take_completions().empty());  // a plain WRITE consumes no WQE
}

TEST_F(ReceiverTest, OutOfOrderPlacementAndSackAckOnceFourWaitAheadOfAGap) {
    const auto data = pattern_bytes(6 * kMtu, 2);
    auto packets = write_message(100, kWriteBase, data, 0);
    for (auto& p : packets) p.bth.flags &= ~kAckReq;
    deliver(packets[2], 10);  // leaves a gap: placed, acknowledged once 4 wait
    // Placed on arrival, before the gap is filled.
    EXPECT_TRUE(std::equal(data.begin() + 2 * kMtu, data.begin() + 3 * kMtu,
                           memory.region_bytes(kWriteKey).begin() + 2 * kMtu));
    deliver(packets[3], 10);
    deliver(packets[5], 10);
    EXPECT_TRUE(sent().empty());
    deliver(packets[4], 10);  // the 4th unacknowledged packet ahead of the gap: ACK at once
    auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().cum_psn, 100u);
    EXPECT_EQ(a[0].ack().sack[0], 0x78000000u);  // PSNs 102..105 = cum + 1 + 1..4
    deliver(packets[0], 20);  // fills part of the gap: not ahead of it, no ACK yet
    EXPECT_TRUE(sent().empty());
    EXPECT_EQ(rx->window().cum_psn(), 101u);
    deliver(packets[1], 20);
    EXPECT_EQ(rx->window().cum_psn(), 106u);
    EXPECT_FALSE(rx->window().has_gap());
    // The rest is left to the delayed ACK.
    EXPECT_TRUE(sent().empty());
    rx->on_timer(*rx->next_timer());
    a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().cum_psn, 106u);
    EXPECT_EQ(a[0].ack().sack, SackWords{});
}

TEST_F(ReceiverTest, DuplicateIsAckedAtOnceAndNotPlacedAgain) {
    const auto packets = write_message(100, kWriteBase, pattern_bytes(100, 3), 0);
    deliver(packets[0]);
    sent();
    memory.region_bytes(kWriteKey)[0] ^= 0xff;  // would be undone by a second placement
    const std::uint8_t marker = memory.region_bytes(kWriteKey)[0];
    deliver(packets[0]);
    const auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().cum_psn, 101u);
    EXPECT_EQ(rx->counters().duplicates, 1u);
    EXPECT_EQ(memory.region_bytes(kWriteKey)[0], marker);

    // A duplicate inside the window (bit already set) too.
    const auto more = write_message(105, kWriteBase, pattern_bytes(10, 4), 1);
    deliver(more[0]);
    sent();
    deliver(more[0]);
    EXPECT_EQ(acks().size(), 1u);
    EXPECT_EQ(rx->counters().duplicates, 2u);
}

TEST_F(ReceiverTest, BeyondWindowIsDroppedAndCounted) {
    const auto edge = write_message(100 + 256, kWriteBase, pattern_bytes(10, 5), 0);
    deliver(edge[0]);  // cum + 256: the last PSN the bitmap names
    EXPECT_TRUE(rx->window().received(356));
    const auto beyond = write_message(100 + 257, kWriteBase, pattern_bytes(10, 5), 0);
    sent();
    deliver(beyond[0]);
    EXPECT_TRUE(sent().empty());
    EXPECT_EQ(rx->counters().out_of_window, 1u);
    EXPECT_FALSE(rx->window().received(357));
}

// protocol.md section 6: a zero-length WRITE (UCX's flush) is accepted whatever its key and
// address; with immediate it completes a receive.
TEST_F(ReceiverTest, ZeroLengthWriteNeedsNoKey) {
    ASSERT_TRUE(rx->post_recv(wqe(7, 0, 100)));
    deliver(data_packet(Opcode::Write, 100, kFirst | kLast | kAckReq, Deth{0, 0, 0, 0, 0}, {}));
    deliver(data_packet(Opcode::Write, 101, kFirst | kLast | kAckReq | kImm,
                        Deth{0, 0, 0, 0, 0x1234}, {}));
    const auto a = acks();
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a.back().ack().syndrome, Syndrome::Ack);
    EXPECT_EQ(a.back().ack().cum_psn, 102u);
    EXPECT_FALSE(rx->in_error());
    const auto done = rx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].wr_id, 7u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    EXPECT_EQ(done[0].opcode, WcOpcode::RecvRdmaWithImm);
    EXPECT_EQ(done[0].byte_len, 0u);
}

TEST_F(ReceiverTest, WriteWithBadKeyBoundsOrRightsIsNakedAndErrorsTheQp) {
    struct Case {
        std::uint32_t key;
        std::uint64_t addr;
        std::uint32_t len;
    };
    const Case cases[] = {
        {0x99, kWriteBase, 10},                         // unknown rkey
        {kWriteKey, kWriteBase + kRegionSize - 5, 10},  // crosses the end
        {kWriteKey, kWriteBase - 1, 10},                // starts before
        {kReadKey, kReadBase, 10},                      // region without remote write
    };
    for (const Case& c : cases) {
        rx = std::make_unique<Receiver>(config, memory);
        ASSERT_TRUE(rx->post_recv(wqe(7, 0, 100)));
        Packet p = data_packet(Opcode::Write, 100, kFirst | kLast | kAckReq,
                               Deth{c.addr, c.key, 0, c.len, 0}, pattern_bytes(c.len, 6));
        deliver(p);
        const auto a = acks();
        ASSERT_EQ(a.size(), 1u);
        EXPECT_EQ(a[0].ack().syndrome, Syndrome::RemoteAccess);
        EXPECT_EQ(a[0].ack().nak_psn, 100u);
        EXPECT_TRUE(rx->in_error());
        EXPECT_FALSE(rx->window().received(100));  // not placed, not marked
        const auto flushed = rx->take_completions();
        ASSERT_EQ(flushed.size(), 1u);
        EXPECT_EQ(flushed[0].status, WcStatus::WrFlushErr);
        // No malformed or refused packet changes state afterwards either.
        deliver(write_message(101, kWriteBase, pattern_bytes(10, 7), 1)[0]);
        EXPECT_TRUE(sent().empty());
        EXPECT_EQ(rx->counters().dropped_in_error, 1u);
    }
}

TEST_F(ReceiverTest, SendSelectsWqeByMsnScattersByOffsetAndCompletesInOrder) {
    ASSERT_TRUE(rx->post_recv(
        ReceiveWqe{1, {{kRecvKey, kRecvBase, 100}, {kRecvKey, kRecvBase + 1000, 500}}}));
    ASSERT_TRUE(rx->post_recv(wqe(2, 2000, 1000)));
    const auto first = pattern_bytes(520, 10);   // 3 packets, msn 0 -> WQE 1
    const auto second = pattern_bytes(300, 11);  // 2 packets, msn 1 -> WQE 2
    const auto m0 = send_message(100, first, 0);
    const auto m1 = send_message(103, second, 1, kImm | kSolicited, 0xabcd);
    // The second message arrives completely before the first.
    deliver(m1[1]);
    deliver(m1[0]);
    deliver(m0[2]);
    deliver(m0[0]);
    EXPECT_TRUE(rx->take_completions().empty());  // cum_psn still at 101
    sent();
    deliver(m0[1]);
    const auto done = rx->take_completions();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[0].wr_id, 1u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    EXPECT_EQ(done[0].opcode, WcOpcode::Recv);
    EXPECT_EQ(done[0].byte_len, 520u);
    EXPECT_FALSE(done[0].imm.has_value());
    EXPECT_EQ(done[1].wr_id, 2u);
    EXPECT_EQ(done[1].byte_len, 300u);
    EXPECT_EQ(done[1].imm, 0xabcdu);
    EXPECT_TRUE(done[1].solicited);
    // Completing a message that consumed a WQE triggers an ACK.
    EXPECT_EQ(acks().size(), 1u);
    const ReceiveWqe w1{1, {{kRecvKey, kRecvBase, 100}, {kRecvKey, kRecvBase + 1000, 500}}};
    EXPECT_EQ(memory.gather(w1, 520), first);
    EXPECT_EQ(memory.gather(wqe(2, 2000, 1000), 300), second);
}

TEST_F(ReceiverTest, RnrNakWhenNoWqeThenAcceptedOnceposted) {
    config.min_rnr_timer = 14;
    rx = std::make_unique<Receiver>(config, memory);
    const auto m = send_message(100, pattern_bytes(50, 12), 0);
    deliver(m[0]);
    auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().syndrome, Syndrome::RnrNak);
    EXPECT_EQ(a[0].ack().nak_psn, 100u);
    EXPECT_EQ(a[0].ack().nak_arg, 14);
    EXPECT_EQ(a[0].ack().cum_psn, 100u);
    EXPECT_FALSE(rx->window().received(100));  // dropped: the requester resends it
    EXPECT_FALSE(rx->in_error());
    ASSERT_TRUE(rx->post_recv(wqe(9, 0, 64)));
    deliver(m[0]);
    EXPECT_EQ(rx->window().cum_psn(), 101u);
    const auto done = rx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].wr_id, 9u);
}

TEST_F(ReceiverTest, SendLongerThanWqeIsLengthErrorAndInvalidRequestNak) {
    ASSERT_TRUE(rx->post_recv(wqe(1, 0, 100)));
    ASSERT_TRUE(rx->post_recv(wqe(2, 100, 100)));
    ASSERT_TRUE(rx->post_recv(wqe(3, 200, 100)));
    deliver(send_message(100, pattern_bytes(10, 1), 0)[0]);  // fine, completes WQE 1
    const auto big = send_message(101, pattern_bytes(600, 13), 1);
    deliver(big[1]);  // offset 256 + 256 > 100
    const auto a = acks();
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a.back().ack().syndrome, Syndrome::InvalidRequest);
    EXPECT_EQ(a.back().ack().nak_psn, 102u);
    EXPECT_TRUE(rx->in_error());
    const auto done = rx->take_completions();
    ASSERT_EQ(done.size(), 3u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    EXPECT_EQ(done[1].status, WcStatus::LocLenErr);
    EXPECT_EQ(done[1].wr_id, 2u);
    EXPECT_EQ(done[2].status, WcStatus::WrFlushErr);
}

TEST_F(ReceiverTest, WriteWithImmediateConsumesAWqe) {
    const auto data = pattern_bytes(300, 14);
    const auto m = write_message(100, kWriteBase + 4, data, 0, kImm | kSolicited, 0x5555);
    deliver(m[0]);  // data packets place without a WQE...
    EXPECT_TRUE(rx->window().received(100));
    deliver(m[1]);  // ...but the last one needs it
    auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().syndrome, Syndrome::RnrNak);
    EXPECT_EQ(a[0].ack().nak_psn, 101u);
    ASSERT_TRUE(rx->post_recv(wqe(77, 0, 0)));
    deliver(m[1]);
    const auto done = rx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].wr_id, 77u);
    EXPECT_EQ(done[0].opcode, WcOpcode::RecvRdmaWithImm);
    EXPECT_EQ(done[0].imm, 0x5555u);
    EXPECT_EQ(done[0].byte_len, 300u);
    EXPECT_TRUE(done[0].solicited);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), memory.region_bytes(kWriteKey).begin() + 4));
}

TEST_F(ReceiverTest, ZeroLengthSendCompletes) {
    ASSERT_TRUE(rx->post_recv(ReceiveWqe{5, {}}));
    deliver(send_message(100, {}, 0)[0]);
    const auto done = rx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].byte_len, 0u);
}

TEST_F(ReceiverTest, ImmAndSolicitedRepeatedOnEarlierPacketsAreAccepted) {
    ASSERT_TRUE(rx->post_recv(wqe(10, 0, 1000)));
    const auto data = pattern_bytes(600, 3);
    auto m = send_message(100, data, 0, kImm | kSolicited, 0x1234);
    for (Packet& p : m) {  // a sender that repeats them on every packet
        p.bth.flags |= kImm | kSolicited;
        p.deth().imm = 0x1234;
    }
    for (const Packet& p : m) deliver(p);
    const auto done = rx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].imm, 0x1234u);
    EXPECT_TRUE(done[0].solicited);
    EXPECT_EQ(rx->completed_messages(), 1u);
    EXPECT_EQ(memory.gather(wqe(10, 0, 1000), 600), data);
}

TEST_F(ReceiverTest, ReadRequestInOrderIsAnsweredAtOnce) {
    const std::uint32_t len = 600;  // 3 responses at MTU 256
    deliver(read_request(100, kReadBase + 10, kReadKey, len, 7));
    const auto out = sent();
    const auto responses = of_opcode(out, Opcode::ReadResponse);
    ASSERT_EQ(responses.size(), 3u);
    EXPECT_EQ(of_opcode(out, Opcode::Ack).size(), 1u);  // ACK_REQ
    EXPECT_EQ(rx->window().cum_psn(), 103u);            // the READ's 3 PSNs
    const auto region = memory.region_bytes(kReadKey);
    for (std::uint32_t k = 0; k < 3; ++k) {
        const Packet& r = responses[k];
        EXPECT_EQ(r.bth.psn, 100 + k);
        EXPECT_EQ(r.bth.dqpn, kQpA);
        EXPECT_EQ(r.deth().addr, k * kMtu);
        EXPECT_EQ(r.deth().msn, 7u);
        EXPECT_EQ(r.deth().msg_len, len);
        EXPECT_EQ(r.bth.has(kFirst), k == 0);
        EXPECT_EQ(r.bth.has(kLast), k == 2);
        EXPECT_FALSE(r.bth.has(kRetx));
        EXPECT_TRUE(std::equal(r.payload.begin(), r.payload.end(), region.begin() + 10 + k * kMtu));
    }
    EXPECT_EQ(responses[2].payload.size(), len - 2 * kMtu);
}

// protocol.md section 6: a zero-length READ names no memory, as a zero-length WRITE: answered
// with one empty response whatever its key and address.
TEST_F(ReceiverTest, ZeroLengthReadNeedsNoKey) {
    deliver(read_request(100, 0, 0, 0, 4));
    const auto out = sent();
    const auto responses = of_opcode(out, Opcode::ReadResponse);
    ASSERT_EQ(responses.size(), 1u);
    EXPECT_TRUE(responses[0].payload.empty());
    EXPECT_TRUE(responses[0].bth.has(kFirst) && responses[0].bth.has(kLast));
    EXPECT_EQ(responses[0].deth().msg_len, 0u);
    for (const Packet& a : of_opcode(out, Opcode::Ack)) EXPECT_EQ(a.ack().syndrome, Syndrome::Ack);
    EXPECT_EQ(rx->window().cum_psn(), 101u);
    EXPECT_FALSE(rx->in_error());
}

TEST_F(ReceiverTest, ReadIsDeferredUntilCumPassesAndObservesEarlierWrites) {
    memory.register_region(0x40, 0x40000, 1024, access::kRemoteWrite | access::kRemoteRead);
    // PSN 100: a WRITE into the region, lost for now. PSN 101: a READ of the same bytes.
    const auto write = data_packet(Opcode::Write, 100, kFirst | kLast | kAckReq,
                                   Deth{0x40000, 0x40, 0, 4, 0}, {9, 8, 7, 6});
    deliver(read_request(101, 0x40000, 0x40, 4, 1));
    auto out = sent();
    EXPECT_TRUE(of_opcode(out, Opcode::ReadResponse).empty());
    ASSERT_EQ(of_opcode(out, Opcode::Ack).size(), 1u);
    EXPECT_EQ(rx->pending_reads(), 1u);
    deliver(write);
    out = sent();
    const auto responses = of_opcode(out, Opcode::ReadResponse);
    ASSERT_EQ(responses.size(), 1u);
    EXPECT_EQ(responses[0].payload, (std::vector<std::uint8_t>{9, 8, 7, 6}));
    EXPECT_EQ(rx->pending_reads(), 0u);
}

TEST_F(ReceiverTest, ReReadAnswersExactlyTheRangeWithOriginalPsns) {
    const std::uint32_t len = 1000;  // 4 responses
    deliver(read_request(100, kReadBase, kReadKey, len, 3));
    sent();
    // Responses 2 and 3 were lost: re-read from offset 2 * MTU to the end.
    deliver(read_request(102, kReadBase + 2 * kMtu, kReadKey, len - 2 * kMtu, 3, 2 * kMtu,
                         kAckReq | kRetx));
    const auto out = sent();
    const auto responses = of_opcode(out, Opcode::ReadResponse);
    ASSERT_EQ(responses.size(), 2u);
    EXPECT_EQ(responses[0].bth.psn, 102u);
    EXPECT_EQ(responses[0].deth().addr, 2 * kMtu);
    EXPECT_EQ(responses[0].deth().msg_len, len);
    EXPECT_TRUE(responses[0].bth.has(kFirst));  // the first response of the re-read
    EXPECT_TRUE(responses[0].bth.has(kRetx));
    EXPECT_EQ(responses[1].bth.psn, 103u);
    EXPECT_TRUE(responses[1].bth.has(kLast));
    EXPECT_EQ(responses[1].payload.size(), len - 3 * kMtu);
    EXPECT_EQ(of_opcode(out, Opcode::Ack).size(), 1u);  // duplicates are acked
    EXPECT_EQ(rx->counters().duplicate_reads, 1u);
}

TEST_F(ReceiverTest, ReadPartsAndExactReReadsEndWhereTheRequestEnds) {
    const std::uint32_t len = 10 * kMtu + 7;  // 11 responses, requested in parts
    deliver(read_request(100, kReadBase, kReadKey, 4 * kMtu, 5));
    deliver(read_request(104, kReadBase + 4 * kMtu, kReadKey, len - 4 * kMtu, 5, 4 * kMtu));
    auto responses = of_opcode(sent(), Opcode::ReadResponse);
    ASSERT_EQ(responses.size(), 11u);
    EXPECT_EQ(responses[3].deth().msg_len, 4 * kMtu);  // the end of the first part
    EXPECT_TRUE(responses[3].bth.has(kLast));
    EXPECT_TRUE(responses[4].bth.has(kFirst));  // FIRST and LAST delimit each part
    EXPECT_FALSE(responses[5].bth.has(kFirst));
    EXPECT_EQ(responses[4].deth().addr, 4 * kMtu);
    EXPECT_EQ(responses[10].deth().msg_len, len);
    // A re-read of exactly responses 6 and 7.
    deliver(
        read_request(106, kReadBase + 6 * kMtu, kReadKey, 2 * kMtu, 5, 6 * kMtu, kAckReq | kRetx));
    responses = of_opcode(sent(), Opcode::ReadResponse);
    ASSERT_EQ(responses.size(), 2u);
    EXPECT_EQ(responses[0].bth.psn, 106u);
    EXPECT_EQ(responses[1].bth.psn, 107u);
    EXPECT_EQ(responses[1].deth().msg_len, 8 * kMtu);
    EXPECT_TRUE(responses[1].bth.has(kLast));
}

TEST_F(ReceiverTest, DuplicateReadWhileOriginalPendingIsNotRunTwice) {
    deliver(read_request(101, kReadBase, kReadKey, 100, 1));
    deliver(read_request(101, kReadBase, kReadKey, 100, 1, 0, kAckReq | kRetx));
    EXPECT_TRUE(of_opcode(sent(), Opcode::ReadResponse).empty());
    deliver(write_message(100, kWriteBase, pattern_bytes(4, 1), 0)[0]);
    EXPECT_EQ(of_opcode(sent(), Opcode::ReadResponse).size(), 1u);
    EXPECT_EQ(rx->counters().reads_executed, 1u);
}

TEST_F(ReceiverTest, ReadWithBadKeyOrRangeIsNaked) {
    deliver(read_request(100, kReadBase + kRegionSize - 10, kReadKey, 20, 0));
    const auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().syndrome, Syndrome::RemoteAccess);
    EXPECT_EQ(a[0].ack().nak_psn, 100u);
    EXPECT_TRUE(rx->in_error());

    rx = std::make_unique<Receiver>(config, memory);
    deliver(read_request(100, kWriteBase, kWriteKey, 20, 0));  // write-only region
    EXPECT_EQ(acks().at(0).ack().syndrome, Syndrome::RemoteAccess);
}

TEST_F(ReceiverTest, ReadsBeyondMaxDestRdAtomicAreDropped) {
    config.max_dest_rd_atomic = 2;
    rx = std::make_unique<Receiver>(config, memory);
    // PSN 100 missing: every READ stays pending.
    deliver(read_request(101, kReadBase, kReadKey, 10, 1));
    deliver(read_request(102, kReadBase, kReadKey, 10, 2));
    deliver(read_request(103, kReadBase, kReadKey, 10, 3));
    EXPECT_EQ(rx->pending_reads(), 2u);
    EXPECT_EQ(rx->counters().read_overflow, 1u);
    EXPECT_FALSE(rx->window().received(103));
}

TEST_F(ReceiverTest, ReReadCoveringUnreceivedPsnsMarksThem) {
    // READ of 4 responses asked for in two parts; the second part's request was lost, and a
    // re-read covers response 1 (received) and responses 2 and 3 (never asked for).
    deliver(read_request(100, kReadBase, kReadKey, 2 * kMtu, 4));
    EXPECT_EQ(rx->window().cum_psn(), 102u);
    sent();
    deliver(read_request(101, kReadBase + kMtu, kReadKey, 3 * kMtu, 4, kMtu, kAckReq | kRetx));
    EXPECT_EQ(rx->window().cum_psn(), 104u);  // every PSN it asks for is marked
    const auto out = sent();
    const auto responses = of_opcode(out, Opcode::ReadResponse);
    ASSERT_EQ(responses.size(), 3u);
    EXPECT_EQ(responses[0].bth.psn, 101u);
    EXPECT_EQ(responses[2].bth.psn, 103u);
    EXPECT_EQ(responses[2].deth().msg_len, 4 * kMtu);
    ASSERT_FALSE(of_opcode(out, Opcode::Ack).empty());
    EXPECT_EQ(of_opcode(out, Opcode::Ack).back().ack().cum_psn, 104u);

    // The same ahead of a gap: a re-read at a PSN whose original is held, reaching past it.
    rx = std::make_unique<Receiver>(config, memory);
    deliver(read_request(101, kReadBase, kReadKey, 2 * kMtu, 1));  // 101, 102: held (100 missing)
    deliver(read_request(102, kReadBase + kMtu, kReadKey, 2 * kMtu, 1, kMtu, kAckReq | kRetx));
    EXPECT_TRUE(rx->window().received(103));
    sent();
    deliver(write_message(100, kWriteBase, pattern_bytes(4, 1), 0)[0]);
    EXPECT_EQ(rx->window().cum_psn(), 104u);
    const auto late = of_opcode(sent(), Opcode::ReadResponse);
    ASSERT_EQ(late.size(), 4u);  // 101, 102 by the original, 102, 103 by the re-read
    EXPECT_EQ(late.back().bth.psn, 103u);
}

// Behind cum_psn only a READ accepted before is answered again, and only for the PSNs it
// covered (section 5): a forged or different "duplicate" gets nothing, no NAK, no error.
TEST_F(ReceiverTest, DuplicateReadsOnlyOfReadsRemembered) {
    deliver(write_message(100, kWriteBase, pattern_bytes(4, 1), 0)[0]);
    deliver(read_request(101, kReadBase, kReadKey, 100, 1));  // 101
    deliver(write_message(102, kWriteBase, pattern_bytes(4, 2), 0)[0]);
    deliver(write_message(103, kWriteBase, pattern_bytes(4, 3), 0)[0]);
    ASSERT_EQ(rx->window().cum_psn(), 104u);
    sent();
    const auto expect_dropped = [&](const Packet& p, std::uint64_t count) {
        deliver(p);
        const auto out = sent();
        EXPECT_TRUE(of_opcode(out, Opcode::ReadResponse).empty()) << "READ_REQ at " << p.bth.psn;
        for (const Packet& a : of_opcode(out, Opcode::Ack)) EXPECT_FALSE(a.ack().is_nak());
        EXPECT_FALSE(rx->in_error());
        EXPECT_EQ(rx->counters().duplicate_reads_unknown, count);
    };
    const std::uint8_t retx = kAckReq | kRetx;
    // A WRITE's PSN; far behind; a bad rkey; more PSNs than the READ had; another address.
    expect_dropped(read_request(100, kReadBase, kReadKey, 100, 1, 0, retx), 1);
    expect_dropped(read_request(psn_add(100, -1000), kReadBase, kReadKey,
                                static_cast<std::uint32_t>(kRegionSize), 1),
                   2);
    expect_dropped(read_request(101, kReadBase, 0x99, 100, 1, 0, retx), 3);
    expect_dropped(read_request(101, kReadBase, kReadKey, 3 * kMtu, 1, 0, retx), 4);
    expect_dropped(read_request(101, kReadBase + 8, kReadKey, 100, 1, 0, retx), 5);
    expect_dropped(read_request(101, kReadBase, kReadKey, 100, 2, 0, retx), 6);
    // The READ as it was: answered again.
    deliver(read_request(101, kReadBase, kReadKey, 100, 1, 0, retx));
    const auto responses = of_opcode(sent(), Opcode::ReadResponse);
    ASSERT_EQ(responses.size(), 1u);
    EXPECT_EQ(responses[0].bth.psn, 101u);
    EXPECT_TRUE(responses[0].bth.has(kRetx));
    EXPECT_EQ(rx->counters().duplicate_reads_unknown, 6u);
    EXPECT_EQ(rx->window().cum_psn(), 104u);
}

// A READ asked for in parts is remembered as one run: a re-read across the parts is answered.
TEST_F(ReceiverTest, ReReadAcrossPartsOfOneReadIsAnswered) {
    deliver(read_request(100, kReadBase, kReadKey, 2 * kMtu, 3));
    deliver(read_request(102, kReadBase + 2 * kMtu, kReadKey, 2 * kMtu, 3, 2 * kMtu));
    ASSERT_EQ(rx->window().cum_psn(), 104u);
    sent();
    deliver(read_request(101, kReadBase + kMtu, kReadKey, 2 * kMtu, 3, kMtu, kAckReq | kRetx));
    const auto responses = of_opcode(sent(), Opcode::ReadResponse);
    ASSERT_EQ(responses.size(), 2u);
    EXPECT_EQ(responses[0].bth.psn, 101u);
    EXPECT_EQ(responses[1].bth.psn, 102u);
    EXPECT_EQ(rx->counters().duplicate_reads_unknown, 0u);
}

TEST_F(ReceiverTest, ReadAtCumPsnIsAcceptedWhenTheReadsHeldWaitForIt) {
    config.max_dest_rd_atomic = 2;
    rx = std::make_unique<Receiver>(config, memory);
    // The READs at 101 and 102 are held behind PSN 100, which is itself a READ_REQ: it must
    // not be dropped for want of a slot (they could never run).
    deliver(read_request(101, kReadBase, kReadKey, 10, 1));
    deliver(read_request(102, kReadBase, kReadKey, 10, 2));
    EXPECT_EQ(rx->pending_reads(), 2u);
    sent();
    deliver(read_request(100, kReadBase, kReadKey, 10, 0, 0, kAckReq | kRetx));
    EXPECT_EQ(rx->counters().read_overflow, 0u);
    EXPECT_EQ(rx->window().cum_psn(), 103u);
    EXPECT_EQ(rx->pending_reads(), 0u);
    const auto responses = of_opcode(sent(), Opcode::ReadResponse);
    ASSERT_EQ(responses.size(), 3u);
    EXPECT_EQ(responses[0].bth.psn, 100u);  // in PSN order
    EXPECT_EQ(responses[2].bth.psn, 102u);
}

TEST_F(ReceiverTest, AcksEvery32PacketsWithoutOtherTriggers) {
    // protocol.md section 11: a streaming sender draws an ACK per 32 packets.
    const auto data = pattern_bytes(64 * kMtu, 9);
    auto packets = write_message(100, kWriteBase, data, 0);
    for (auto& p : packets) p.bth.flags &= ~kAckReq;
    for (std::size_t k = 0; k < 31; ++k) deliver(packets[k]);
    EXPECT_TRUE(sent().empty());
    deliver(packets[31]);
    auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().cum_psn, 132u);
    for (std::size_t k = 32; k < 63; ++k) deliver(packets[k]);
    EXPECT_TRUE(sent().empty());
    deliver(packets[63]);
    a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().cum_psn, 164u);
}

TEST_F(ReceiverTest, DelayedAckTimer) {
    auto packets = write_message(100, kWriteBase, pattern_bytes(2 * kMtu, 16), 0);
    for (auto& p : packets) p.bth.flags &= ~kAckReq;
    packets[0].bth.path = 3;
    packets[0].bth.ts = 1234;
    deliver(packets[0], 1000);
    EXPECT_EQ(rx->next_timer(), 1200u);
    rx->on_timer(1199);
    EXPECT_TRUE(sent().empty());
    rx->on_timer(1200);
    const auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().echo_path, 3);
    EXPECT_EQ(a[0].ack().ts_echo, 1234u);
    EXPECT_EQ(rx->next_timer(), std::nullopt);
}

TEST_F(ReceiverTest, CeMarksAreCountedSinceThePreviousAck) {
    auto packets = write_message(100, kWriteBase, pattern_bytes(3 * kMtu, 17), 0);
    deliver(packets[0], 0, true);
    deliver(packets[1], 0, true);
    deliver(packets[2], 0, false);
    auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().ce_count, 2);
    deliver(packets[2], 0, true);  // a duplicate: acked at once, with its mark
    a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().ce_count, 1);
    EXPECT_EQ(rx->counters().ce_marked, 3u);
}

TEST_F(ReceiverTest, FairShareHint) {
    deliver(write_message(100, kWriteBase, pattern_bytes(4, 1), 0)[0]);
    EXPECT_EQ(acks().at(0).ack().fair_share, 512);

    FairShareTracker tracker(512);
    tracker.note_activity(0x999, 0);  // another connection sent data just now
    rx = std::make_unique<Receiver>(config, memory, &tracker);
    deliver(write_message(100, kWriteBase, pattern_bytes(4, 1), 0)[0], 500);
    EXPECT_EQ(acks().at(0).ack().fair_share, 256);
    deliver(write_message(101, kWriteBase, pattern_bytes(4, 1), 1)[0], 1500);
    EXPECT_EQ(acks().at(0).ack().fair_share, 512);  // the other one went quiet
}

TEST_F(ReceiverTest, VersionNak) {
    BthProbe probe;
    probe.version = 2;
    probe.psn = 123;
    probe.path = 4;
    probe.ts = 77;
    rx->on_version_mismatch(probe, 0);
    const auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().syndrome, Syndrome::Version);
    EXPECT_EQ(a[0].ack().nak_arg, METAROCE_VERSION);
    EXPECT_EQ(a[0].ack().nak_psn, 123u);
    EXPECT_EQ(a[0].ack().echo_path, 4);
    EXPECT_FALSE(rx->in_error());
}

// protocol.md section 6: a SEND with invalidate is checked when its INV packet arrives, and
// the key is invalidated when the message completes (cum_psn passes it), not before.
TEST_F(ReceiverTest, SendWithInvalidateEndsTheRegistrationWhenItCompletes) {
    ASSERT_TRUE(rx->post_recv(wqe(1, 0, 1000)));
    const auto data = pattern_bytes(600, 20);
    const auto m = send_message(100, data, 0, kInv, kFastKey);
    ASSERT_EQ(m.size(), 3u);
    EXPECT_TRUE(m[2].bth.has(kInv));
    EXPECT_EQ(m[2].deth().imm, kFastKey);
    deliver(m[2]);  // the INV packet first: accepted, but the message is not complete
    EXPECT_FALSE(rx->in_error());
    EXPECT_TRUE(rx->window().received(102));
    EXPECT_TRUE(memory.fast_reg_valid(kFastKey));
    deliver(m[0]);
    EXPECT_TRUE(memory.fast_reg_valid(kFastKey));
    EXPECT_TRUE(rx->take_completions().empty());
    deliver(m[1]);  // cum_psn passes the message: it completes and invalidates
    EXPECT_FALSE(memory.fast_reg_valid(kFastKey));
    EXPECT_FALSE(memory.fast_reg_key(fast));
    const auto done = rx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].wr_id, 1u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    EXPECT_EQ(done[0].opcode, WcOpcode::Recv);
    EXPECT_EQ(done[0].byte_len, 600u);
    EXPECT_EQ(done[0].invalidated_rkey, kFastKey);
    EXPECT_FALSE(done[0].imm.has_value());
    EXPECT_EQ(memory.gather(wqe(1, 0, 1000), 600), data);
    EXPECT_EQ(rx->counters().invalidations, 1u);
    EXPECT_EQ(rx->counters().invalidate_refused, 0u);
    // A plain SEND's completion names no key.
    ASSERT_TRUE(rx->post_recv(wqe(2, 1000, 100)));
    deliver(send_message(103, pattern_bytes(10, 21), 1)[0]);
    const auto plain = rx->take_completions();
    ASSERT_EQ(plain.size(), 1u);
    EXPECT_FALSE(plain[0].invalidated_rkey.has_value());
    // From then on the key names nothing: a WRITE with it is refused.
    sent();
    deliver(fast_write(104, 0, pattern_bytes(4, 22), 2));
    const auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().syndrome, Syndrome::RemoteAccess);
    EXPECT_EQ(a[0].ack().nak_psn, 104u);
}

// The key must name a fast-registration region of the PD valid with exactly that key; else
// REMOTE_INVALID_REQUEST (INVALID_REQUEST) NAK, REM_INV_REQ_ERR completion, QP to error, and
// nothing of the packet accepted or invalidated.
TEST_F(ReceiverTest, SendWithInvalidateOfABadKeyIsRefused) {
    const MemoryModel::FastRegId ended = memory.alloc_fast_reg_region(64);
    ASSERT_TRUE(memory.fast_register(ended, 0x5501, 0x50000, 64, access::kRemoteWrite));
    ASSERT_TRUE(memory.invalidate(0x5501));  // the consumer ended it (IB_WR_LOCAL_INV)
    const std::uint32_t keys[] = {
        0x99,          // no region
        0,             // no region either
        kWriteKey,     // an ordinary region's
        kRecvKey,      // an ordinary region's
        kFastKey + 1,  // not the key the fast-registration region is valid with
        0x5501,        // a fast-registration region's whose registration ended
    };
    for (const std::uint32_t key : keys) {
        SCOPED_TRACE(key);
        rx = std::make_unique<Receiver>(config, memory);
        ASSERT_TRUE(rx->post_recv(wqe(1, 0, 1000)));
        ASSERT_TRUE(rx->post_recv(wqe(2, 1000, 1000)));
        const auto m = send_message(100, pattern_bytes(300, 23), 0, kInv, key);
        ASSERT_EQ(m.size(), 2u);
        deliver(m[0]);
        deliver(m[1]);
        const auto a = acks();
        ASSERT_FALSE(a.empty());
        EXPECT_EQ(a.back().ack().syndrome, Syndrome::InvalidRequest);
        EXPECT_EQ(a.back().ack().nak_psn, 101u);
        EXPECT_TRUE(rx->in_error());
        EXPECT_FALSE(rx->window().received(101));
        const auto done = rx->take_completions();
        ASSERT_EQ(done.size(), 2u);
        EXPECT_EQ(done[0].wr_id, 1u);
        EXPECT_EQ(done[0].status, WcStatus::RemInvReqErr);
        EXPECT_EQ(done[1].status, WcStatus::WrFlushErr);
        EXPECT_EQ(rx->counters().invalidate_refused, 1u);
        EXPECT_EQ(rx->counters().invalid_naks, 1u);
        EXPECT_EQ(rx->counters().invalidations, 0u);
        EXPECT_TRUE(memory.fast_reg_valid(kFastKey));
        EXPECT_FALSE(memory.fast_reg_valid(0x5501));
    }
}

// A WRITE to the region posted before the SEND with invalidate, lost and resent after the
// SEND's INV packet arrived, still finds the region valid: the invalidation waits for the
// SEND to complete, which waits for cum_psn to pass every earlier PSN.
TEST_F(ReceiverTest, WriteResentAfterTheInvalidatingSendStillFindsTheRegion) {
    ASSERT_TRUE(rx->post_recv(wqe(1, 0, 100)));
    const auto data = pattern_bytes(64, 24);
    const Packet write = fast_write(100, 16, data, 0);
    const Packet send = send_message(101, pattern_bytes(10, 25), 0, kInv, kFastKey)[0];
    deliver(send);  // the WRITE at 100 was lost
    EXPECT_FALSE(rx->in_error());
    EXPECT_TRUE(memory.fast_reg_valid(kFastKey));
    EXPECT_TRUE(rx->take_completions().empty());
    sent();
    deliver(write);  // resent
    EXPECT_FALSE(rx->in_error());
    const auto a = acks();
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a.back().ack().syndrome, Syndrome::Ack);
    EXPECT_EQ(a.back().ack().cum_psn, 102u);
    const auto bytes = memory.fast_reg_bytes(fast);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), bytes.begin() + 16));
    const auto done = rx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    EXPECT_EQ(done[0].invalidated_rkey, kFastKey);
    EXPECT_FALSE(memory.fast_reg_valid(kFastKey));
    EXPECT_EQ(rx->counters().invalidations, 1u);
}

// A message completes once: a duplicate of a completed SEND with invalidate (its ACK was
// lost) invalidates nothing, not even the region registered again meanwhile, under a new
// key or under the very key the SEND named.
TEST_F(ReceiverTest, DuplicateOfACompletedInvalidatingSendInvalidatesNothing) {
    ASSERT_TRUE(rx->post_recv(wqe(1, 0, 100)));
    ASSERT_TRUE(rx->post_recv(wqe(2, 100, 100)));
    const Packet send = send_message(100, pattern_bytes(10, 26), 0, kInv, kFastKey)[0];
    deliver(send);
    ASSERT_EQ(rx->take_completions().size(), 1u);
    ASSERT_FALSE(memory.fast_reg_valid(kFastKey));

    ASSERT_TRUE(
        memory.fast_register(fast, kFastKey + 1, kFastBase, kRegionSize, access::kRemoteWrite));
    sent();
    deliver(send);
    auto a = acks();
    ASSERT_EQ(a.size(), 1u);  // a duplicate: ACKed at once
    EXPECT_EQ(a[0].ack().syndrome, Syndrome::Ack);
    EXPECT_EQ(a[0].ack().cum_psn, 101u);
    EXPECT_EQ(rx->counters().duplicates, 1u);
    EXPECT_TRUE(memory.fast_reg_valid(kFastKey + 1));

    ASSERT_TRUE(memory.invalidate(kFastKey + 1));
    ASSERT_TRUE(memory.fast_register(fast, kFastKey, kFastBase, kRegionSize, access::kRemoteWrite));
    Packet resent = send;
    resent.bth.flags |= kRetx;
    deliver(resent);
    EXPECT_TRUE(memory.fast_reg_valid(kFastKey));
    EXPECT_TRUE(rx->take_completions().empty());
    EXPECT_EQ(rx->counters().duplicates, 2u);
    EXPECT_EQ(rx->counters().invalidations, 1u);
    EXPECT_EQ(rx->counters().invalidations_ended_already, 0u);
    // The registration works: a WRITE with the key is placed.
    sent();
    deliver(fast_write(101, 0, pattern_bytes(4, 27), 1));
    a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().syndrome, Syndrome::Ack);
    EXPECT_FALSE(rx->in_error());
}

// The consumer ends the registration between the INV packet's arrival and the completion,
// and registers the region anew: at completion nothing more is done (section 6).
TEST_F(ReceiverTest, InvalidationOfARegistrationEndedMeanwhileDoesNothingMore) {
    ASSERT_TRUE(rx->post_recv(wqe(1, 0, 100)));
    deliver(send_message(101, pattern_bytes(10, 28), 0, kInv, kFastKey)[0]);  // ahead of a gap
    EXPECT_FALSE(rx->in_error());
    ASSERT_TRUE(memory.invalidate(kFastKey));
    ASSERT_TRUE(
        memory.fast_register(fast, kFastKey + 1, kFastBase, kRegionSize, access::kRemoteWrite));
    deliver(write_message(100, kWriteBase, pattern_bytes(8, 29), 0)[0]);
    const auto done = rx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    EXPECT_EQ(done[0].invalidated_rkey, kFastKey);  // it still names the key it carried
    EXPECT_TRUE(memory.fast_reg_valid(kFastKey + 1));
    EXPECT_EQ(rx->counters().invalidations, 0u);
    EXPECT_EQ(rx->counters().invalidations_ended_already, 1u);
    EXPECT_FALSE(rx->in_error());
}

// Atomics (protocol.md sections 3.4, 5, 6).
constexpr std::uint32_t kAtomicKey = 0x50;
constexpr std::uint64_t kAtomicBase = 0x50000;

class ReceiverAtomicTest : public ReceiverTest {
  protected:
    ReceiverAtomicTest() {
        memory.register_region(kAtomicKey, kAtomicBase, 64,
                               access::kRemoteAtomic | access::kRemoteWrite);
    }
    Packet fetch_add(Psn psn, std::uint64_t add, std::uint64_t va = kAtomicBase,
                     std::uint8_t flags = kAckReq, std::uint32_t key = kAtomicKey) {
        return atomic_request(Opcode::AtomicFetchAdd, psn, va, key, add, 0, 0, flags);
    }
    Packet cmp_swap(Psn psn, std::uint64_t compare, std::uint64_t swap,
                    std::uint64_t va = kAtomicBase, std::uint8_t flags = kAckReq) {
        return atomic_request(Opcode::AtomicCmpSwp, psn, va, kAtomicKey, swap, compare, 0, flags);
    }
    std::vector<Packet> responses() { return of_opcode(sent(), Opcode::AtomicResponse); }
    std::uint64_t word(std::uint64_t va = kAtomicBase) {
        return memory.load_word(kAtomicKey, va).value();
    }
};

TEST_F(ReceiverAtomicTest, FetchAddReturnsTheOldValueAndAddsModulo64) {
    ASSERT_TRUE(memory.store_word(kAtomicKey, kAtomicBase, ~0ull - 1));
    deliver(fetch_add(100, 3));
    const auto out = sent();
    const auto r = of_opcode(out, Opcode::AtomicResponse);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(atomic_value(r[0]), ~0ull - 1);
    EXPECT_EQ(r[0].bth.psn, 100u);
    EXPECT_EQ(r[0].bth.dqpn, kQpA);
    EXPECT_TRUE(r[0].bth.has(kFirst) && r[0].bth.has(kLast));
    EXPECT_FALSE(r[0].bth.has(kRetx));
    EXPECT_EQ(r[0].deth(), (Deth{0, 0, 0, 8, 0}));
    EXPECT_EQ(of_opcode(out, Opcode::Ack).size(), 1u);  // ACK_REQ
    EXPECT_EQ(word(), 1u);
    EXPECT_EQ(rx->window().cum_psn(), 101u);
    EXPECT_EQ(rx->counters().atomics_executed, 1u);
}

TEST_F(ReceiverAtomicTest, CompareSwapHitAndMiss) {
    ASSERT_TRUE(memory.store_word(kAtomicKey, kAtomicBase + 8, 5));
    deliver(cmp_swap(100, 5, 9, kAtomicBase + 8));  // hit
    deliver(cmp_swap(101, 5, 7, kAtomicBase + 8));  // miss: the word is 9 now
    const auto r = responses();
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(atomic_value(r[0]), 5u);
    EXPECT_EQ(atomic_value(r[1]), 9u);
    EXPECT_EQ(word(kAtomicBase + 8), 9u);
}

TEST_F(ReceiverAtomicTest, TheWordIsANativeIntegerNotBytes) {
    // The memory holds a host-order integer; the wire carries it big-endian.
    ASSERT_TRUE(memory.store_word(kAtomicKey, kAtomicBase, 0x0102030405060708ull));
    deliver(fetch_add(100, 0x10));
    const auto r = responses();
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].payload, (std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
    EXPECT_EQ(word(), 0x0102030405060718ull);
}

TEST_F(ReceiverAtomicTest, DeferredUntilCumPassesSoItSeesTheWriteItOvertook) {
    // PSN 100: a WRITE of the word, late. PSN 101: a fetch-add of it, first.
    const std::uint64_t v = 40;
    std::vector<std::uint8_t> bytes(8);
    std::memcpy(bytes.data(), &v, 8);
    const Packet write = data_packet(Opcode::Write, 100, kFirst | kLast | kAckReq,
                                     Deth{kAtomicBase, kAtomicKey, 0, 8, 0}, bytes);
    deliver(fetch_add(101, 2));
    auto out = sent();
    EXPECT_TRUE(of_opcode(out, Opcode::AtomicResponse).empty());
    EXPECT_EQ(of_opcode(out, Opcode::Ack).size(), 1u);
    EXPECT_EQ(rx->pending_reads(), 1u);
    EXPECT_EQ(word(), 0u);  // not executed at arrival
    deliver(write);
    const auto r = responses();
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(atomic_value(r[0]), 40u);
    EXPECT_EQ(word(), 42u);
}

TEST_F(ReceiverAtomicTest, AtomicsAndReadsRunInPsnOrder) {
    // A READ at 102 and atomics at 101 and 103 wait for 100; they run 101, 102, 103.
    memory.register_region(0x60, 0x60000, 64,
                           access::kRemoteAtomic | access::kRemoteRead | access::kRemoteWrite);
    deliver(atomic_request(Opcode::AtomicFetchAdd, 103, 0x60000, 0x60, 1, 0, 0));
    deliver(read_request(102, 0x60000, 0x60, 8, 0));
    deliver(atomic_request(Opcode::AtomicFetchAdd, 101, 0x60000, 0x60, 1, 0, 0));
    EXPECT_TRUE(sent().size() == 3);  // three ACKs
    deliver(write_message(100, kWriteBase, pattern_bytes(4, 1), 0)[0]);
    const auto out = sent();
    std::vector<Psn> order;
    for (const Packet& p : out) {
        if (p.bth.opcode != Opcode::Ack) order.push_back(p.bth.psn);
    }
    EXPECT_EQ(order, (std::vector<Psn>{101, 102, 103}));
    const auto read = of_opcode(out, Opcode::ReadResponse);
    ASSERT_EQ(read.size(), 1u);
    std::uint64_t seen = 0;
    std::memcpy(&seen, read[0].payload.data(), 8);
    EXPECT_EQ(seen, 1u);  // after the first fetch-add, before the second
    EXPECT_EQ(memory.load_word(0x60, 0x60000), 2u);
}

TEST_F(ReceiverAtomicTest, RepeatIsAnsweredFromTheRecordWithRetxAndMemoryUntouched) {
    deliver(fetch_add(100, 5));
    ASSERT_EQ(responses().size(), 1u);
    ASSERT_EQ(word(), 5u);
    // Someone else changes the word meanwhile: the repeat still returns the first value.
    ASSERT_TRUE(memory.store_word(kAtomicKey, kAtomicBase, 1000));
    deliver(fetch_add(100, 5, kAtomicBase, kAckReq | kRetx));
    const auto out = sent();
    const auto r = of_opcode(out, Opcode::AtomicResponse);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(atomic_value(r[0]), 0u);
    EXPECT_TRUE(r[0].bth.has(kRetx));
    EXPECT_EQ(r[0].bth.psn, 100u);
    EXPECT_EQ(word(), 1000u);
    EXPECT_EQ(rx->counters().atomics_executed, 1u);
    EXPECT_EQ(rx->counters().duplicate_atomics, 1u);
    EXPECT_EQ(rx->counters().duplicates, 1u);
    EXPECT_FALSE(rx->in_error());
    // A fabric duplicate (no RETX) is a repeat too.
    deliver(fetch_add(100, 5));
    EXPECT_EQ(responses().size(), 1u);
    EXPECT_EQ(word(), 1000u);
}

TEST_F(ReceiverAtomicTest, RepeatWithOtherFieldsIsDroppedAndCountedNeverNaked) {
    deliver(cmp_swap(100, 0, 7));
    ASSERT_EQ(responses().size(), 1u);
    const Packet variants[] = {
        cmp_swap(100, 0, 8, kAtomicBase, kAckReq | kRetx),      // other swap
        cmp_swap(100, 1, 7, kAtomicBase, kAckReq | kRetx),      // other compare
        cmp_swap(100, 0, 7, kAtomicBase + 8, kAckReq | kRetx),  // other address
        fetch_add(100, 7, kAtomicBase, kAckReq | kRetx),        // other opcode
        atomic_request(Opcode::AtomicCmpSwp, 100, kAtomicBase, kAtomicKey, 7, 0, 3,
                       kAckReq | kRetx),  // other MSN
        atomic_request(Opcode::AtomicCmpSwp, 100, kAtomicBase, kReadKey, 7, 0, 0,
                       kAckReq | kRetx),                   // other key
        cmp_swap(99, 0, 7, kAtomicBase, kAckReq | kRetx),  // never seen
    };
    for (const Packet& p : variants) deliver(p);
    EXPECT_TRUE(sent().empty());  // no response, no ACK, no NAK
    EXPECT_EQ(rx->counters().duplicate_atomics_unknown, std::size(variants));
    EXPECT_EQ(rx->counters().duplicates, std::size(variants));
    EXPECT_FALSE(rx->in_error());
    EXPECT_EQ(word(), 7u);
    // The QP is unharmed, and the real repeat is still answered.
    deliver(cmp_swap(100, 0, 7, kAtomicBase, kAckReq | kRetx));
    const auto r = responses();
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(atomic_value(r[0]), 0u);
    deliver(fetch_add(101, 1, kAtomicBase + 8));
    EXPECT_EQ(responses().size(), 1u);
}

TEST_F(ReceiverAtomicTest, RepeatWhileTheOriginalWaitsIsDropped) {
    deliver(fetch_add(101, 1));
    sent();
    deliver(fetch_add(101, 1, kAtomicBase, kAckReq | kRetx));
    EXPECT_TRUE(sent().empty());
    EXPECT_EQ(rx->counters().duplicate_atomics, 1u);
    EXPECT_EQ(rx->counters().duplicate_atomics_unknown, 0u);
    // Another request at that PSN is no repeat of it.
    deliver(fetch_add(101, 2, kAtomicBase, kAckReq | kRetx));
    EXPECT_EQ(rx->counters().duplicate_atomics_unknown, 1u);
    deliver(write_message(100, kWriteBase, pattern_bytes(4, 1), 0)[0]);
    const auto r = responses();
    ASSERT_EQ(r.size(), 1u);  // executed once
    EXPECT_EQ(word(), 1u);
}

TEST_F(ReceiverAtomicTest, AnAtomicAtAPsnOfAnotherMessageIsUnknown) {
    deliver(write_message(100, kWriteBase, pattern_bytes(4, 1), 0)[0]);
    sent();
    deliver(fetch_add(100, 1, kAtomicBase, kAckReq | kRetx));
    EXPECT_TRUE(sent().empty());
    EXPECT_EQ(rx->counters().duplicate_atomics_unknown, 1u);
    EXPECT_EQ(word(), 0u);
}

TEST_F(ReceiverAtomicTest, RecordKeepsTheLastAtomicsOldestReplacedFirst) {
    config.max_dest_rd_atomic = 4;
    config.atomic_records = 2;  // raised to max_dest_rd_atomic
    rx = std::make_unique<Receiver>(config, memory);
    for (Psn p = 100; p < 106; ++p) deliver(fetch_add(p, 1));
    EXPECT_EQ(responses().size(), 6u);
    EXPECT_EQ(rx->atomic_records(), 4u);
    deliver(fetch_add(101, 1, kAtomicBase, kAckReq | kRetx));  // replaced
    EXPECT_TRUE(responses().empty());
    EXPECT_EQ(rx->counters().duplicate_atomics_unknown, 1u);
    deliver(fetch_add(102, 1, kAtomicBase, kAckReq | kRetx));  // kept
    const auto r = responses();
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(atomic_value(r[0]), 2u);
    EXPECT_EQ(word(), 6u);
}

TEST_F(ReceiverAtomicTest, NoRecordIsMatchedMoreThan512Behind) {
    deliver(fetch_add(100, 1));
    EXPECT_EQ(responses().size(), 1u);
    // 512 PSNs later (zero-length WRITEs) the record is still matched; one more, not.
    for (Psn p = 101; p <= 612; ++p) {
        deliver(data_packet(Opcode::Write, p, kFirst | kLast, Deth{0, 0, 0, 0, 0}, {}));
    }
    sent();
    ASSERT_EQ(rx->window().cum_psn(), 613u);  // 100 is 513 behind
    deliver(fetch_add(100, 1, kAtomicBase, kAckReq | kRetx));
    EXPECT_TRUE(responses().empty());
    EXPECT_EQ(rx->counters().duplicate_atomics_unknown, 1u);
    deliver(data_packet(Opcode::Write, 613, kFirst | kLast, Deth{0, 0, 0, 0, 0}, {}));
    sent();
    rx = std::make_unique<Receiver>(config, memory);
    deliver(fetch_add(100, 1));
    for (Psn p = 101; p <= 611; ++p) {
        deliver(data_packet(Opcode::Write, p, kFirst | kLast, Deth{0, 0, 0, 0, 0}, {}));
    }
    sent();
    deliver(fetch_add(100, 1, kAtomicBase, kAckReq | kRetx));  // 512 behind
    EXPECT_EQ(responses().size(), 1u);
}

TEST_F(ReceiverAtomicTest, MisalignedAddressIsAnInvalidRequest) {
    for (const std::uint64_t off : {1u, 4u, 7u, 12u}) {
        rx = std::make_unique<Receiver>(config, memory);
        deliver(fetch_add(100, 1, kAtomicBase + off));
        const auto a = acks();
        ASSERT_EQ(a.size(), 1u) << off;
        EXPECT_EQ(a[0].ack().syndrome, Syndrome::InvalidRequest);
        EXPECT_EQ(a[0].ack().nak_psn, 100u);
        EXPECT_TRUE(rx->in_error());
    }
    EXPECT_EQ(word(), 0u);
    EXPECT_EQ(word(kAtomicBase + 8), 0u);
}

TEST_F(ReceiverAtomicTest, MissingRightsOrRangeIsARemoteAccessError) {
    memory.register_region(0x61, 0x61000, 64, access::kRemoteWrite | access::kRemoteRead);
    struct Case {
        const char* what;
        Packet packet;
    };
    const Case cases[] = {
        {"region without remote atomic",
         atomic_request(Opcode::AtomicFetchAdd, 100, 0x61000, 0x61, 1, 0, 0)},
        {"unknown key", fetch_add(100, 1, kAtomicBase, kAckReq, 0x999)},
        {"past the region's end", fetch_add(100, 1, kAtomicBase + 64)},
        {"before the region", fetch_add(100, 1, kAtomicBase - 8)},
        {"address wraps", fetch_add(100, 1, ~0ull - 7)},
    };
    for (const Case& c : cases) {
        rx = std::make_unique<Receiver>(config, memory);
        deliver(c.packet);
        const auto a = acks();
        ASSERT_EQ(a.size(), 1u) << c.what;
        EXPECT_EQ(a[0].ack().syndrome, Syndrome::RemoteAccess) << c.what;
        EXPECT_TRUE(rx->in_error()) << c.what;
    }
    // The last word of the region is inside it.
    rx = std::make_unique<Receiver>(config, memory);
    deliver(fetch_add(100, 1, kAtomicBase + 56));
    EXPECT_EQ(responses().size(), 1u);
    // A QP without remote atomics refuses even a region that allows them.
    config.remote_atomic = false;
    rx = std::make_unique<Receiver>(config, memory);
    deliver(fetch_add(100, 1));
    const auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().syndrome, Syndrome::RemoteAccess);
    EXPECT_TRUE(rx->in_error());
}

TEST_F(ReceiverAtomicTest, ValidatedAtArrivalNotWhenCumPasses) {
    // Waiting behind a gap does not delay the refusal.
    deliver(fetch_add(101, 1, kAtomicBase + 4));
    const auto a = acks();
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].ack().syndrome, Syndrome::InvalidRequest);
    EXPECT_EQ(a[0].ack().nak_psn, 101u);
}

// Refused as a READ part is, and as the soft-NIC does (protocol.md section 6).
TEST_F(ReceiverAtomicTest, RegionGoneBeforeExecutionIsARemoteAccessError) {
    deliver(fetch_add(101, 1));
    sent();
    ASSERT_TRUE(memory.deregister_region(kAtomicKey));
    deliver(write_message(100, kWriteBase, pattern_bytes(4, 1), 0)[0]);
    const auto out = sent();
    EXPECT_TRUE(of_opcode(out, Opcode::AtomicResponse).empty());
    const auto a = of_opcode(out, Opcode::Ack);
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a.back().ack().syndrome, Syndrome::RemoteAccess);
    EXPECT_EQ(a.back().ack().nak_psn, 101u);
    EXPECT_TRUE(rx->in_error());
}

TEST_F(ReceiverAtomicTest, AtomicsShareTheMaxDestRdAtomicSlotsWithReads) {
    config.max_dest_rd_atomic = 2;
    rx = std::make_unique<Receiver>(config, memory);
    deliver(read_request(101, kReadBase, kReadKey, 10, 0));
    deliver(fetch_add(102, 1));
    deliver(fetch_add(103, 1));  // a third part: dropped, unmarked
    EXPECT_EQ(rx->pending_reads(), 2u);
    EXPECT_EQ(rx->counters().read_overflow, 1u);
    EXPECT_FALSE(rx->window().received(103));
}

class ReceiverWrapTest : public ReceiverTest {
  protected:
    ReceiverWrapTest() : ReceiverTest(0xfffffe) {}
};

TEST_F(ReceiverWrapTest, WindowAndReadAcrossPsnWrap) {
    deliver(read_request(0xffffff, kReadBase, kReadKey, 3 * kMtu, 0));  // PSNs ffffff, 0, 1
    EXPECT_TRUE(of_opcode(sent(), Opcode::ReadResponse).empty());
    deliver(write_message(0xfffffe, kWriteBase, pattern_bytes(4, 1), 0)[0]);
    const auto responses = of_opcode(sent(), Opcode::ReadResponse);
    ASSERT_EQ(responses.size(), 3u);
    EXPECT_EQ(responses[0].bth.psn, 0xffffffu);
    EXPECT_EQ(responses[1].bth.psn, 0u);
    EXPECT_EQ(responses[2].bth.psn, 1u);
    EXPECT_EQ(rx->window().cum_psn(), 2u);
}

}  // namespace
}  // namespace metaroce
