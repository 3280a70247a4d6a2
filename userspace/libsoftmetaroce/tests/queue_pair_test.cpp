// A connected QP pair end to end over the simulator, and the QP's handling of datagrams that
// are malformed, misaddressed or of another version.
#include "softmetaroce/queue_pair.h"

#include <gtest/gtest.h>
#include <rdma/metaroce_wire.h>

#include <algorithm>
#include <cstring>

#include "test_support.h"

namespace metaroce {
namespace {

using namespace test;

SimPairOptions clean_options() {
    SimPairOptions o;
    o.a_to_b.delay_us = 10;
    o.b_to_a.delay_us = 10;
    return o;
}

TEST(QueuePair, SendWriteReadOverACleanFabric) {
    SimPair pair(clean_options());
    pair.mem_b.register_region(1, 0x1000, 4096, access::kRemoteWrite | access::kRemoteRead);
    pair.mem_b.register_region(2, 0x9000, 4096, access::kLocalWrite);
    ASSERT_TRUE(pair.b->post_recv(ReceiveWqe{50, {{2, 0x9000, 4096}}}));
    const auto send_data = pattern_bytes(3000, 1);
    const auto write_data = pattern_bytes(2500, 2);
    pair.a->post_send(send_wr(1, send_data), pair.now());
    pair.a->post_send(write_wr(2, write_data, 0x1100, 1), pair.now());
    pair.a->post_send(read_wr(3, 0x1100, 1, 2500), pair.now());
    ASSERT_TRUE(pair.run_until([&] { return pair.send_cq_a.size() == 3; }, 1'000'000));
    EXPECT_EQ(pair.send_cq_a[0].wr_id, 1u);
    EXPECT_EQ(pair.send_cq_a[2].read_data, write_data);  // the READ saw the earlier WRITE
    ASSERT_EQ(pair.recv_cq_b.size(), 1u);
    EXPECT_EQ(pair.recv_cq_b[0].byte_len, 3000u);
    EXPECT_EQ(pair.mem_b.gather(ReceiveWqe{50, {{2, 0x9000, 4096}}}, 3000), send_data);
    EXPECT_EQ(pair.a->sender().counters().retransmissions, 0u);
    // A clean fabric: one RTT of a few tens of microseconds.
    EXPECT_LT(pair.now(), 200u);
}

WorkRequest atomic_wr(std::uint64_t wr_id, WrOpcode op, std::uint64_t addr, std::uint32_t rkey,
                      std::uint64_t swap_add, std::uint64_t compare = 0) {
    WorkRequest wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.remote_addr = addr;
    wr.rkey = rkey;
    wr.swap_add = swap_add;
    wr.compare = compare;
    return wr;
}

// Atomics end to end: the values returned, in the requester's byte order, the completion
// opcodes, and the words they leave in the responder's memory (native 64-bit integers).
TEST(QueuePair, AtomicsOverACleanFabric) {
    SimPair pair(clean_options());
    pair.mem_b.register_region(1, 0x1000, 64, access::kRemoteAtomic | access::kRemoteWrite);
    ASSERT_TRUE(pair.mem_b.store_word(1, 0x1008, 41));
    std::vector<std::uint8_t> seven(8);
    const std::uint64_t v7 = 7;
    std::memcpy(seven.data(), &v7, 8);
    pair.a->post_send(atomic_wr(1, WrOpcode::AtomicFetchAdd, 0x1000, 1, 5), pair.now());
    pair.a->post_send(atomic_wr(2, WrOpcode::AtomicFetchAdd, 0x1000, 1, ~0ull), pair.now());
    pair.a->post_send(atomic_wr(3, WrOpcode::AtomicCmpSwp, 0x1008, 1, 100, 41), pair.now());
    pair.a->post_send(atomic_wr(4, WrOpcode::AtomicCmpSwp, 0x1008, 1, 200, 41), pair.now());
    pair.a->post_send(write_wr(5, seven, 0x1010, 1), pair.now());
    pair.a->post_send(atomic_wr(6, WrOpcode::AtomicCmpSwp, 0x1010, 1, 8, 7), pair.now());
    ASSERT_TRUE(pair.run_until([&] { return pair.send_cq_a.size() == 6; }, 1'000'000));
    const auto& cq = pair.send_cq_a;
    for (const Completion& c : cq) EXPECT_EQ(c.status, WcStatus::Success) << c.wr_id;
    EXPECT_EQ(cq[0].opcode, WcOpcode::FetchAdd);
    EXPECT_EQ(cq[0].byte_len, 8u);
    EXPECT_EQ(cq[0].atomic_value, 0u);
    EXPECT_EQ(cq[1].atomic_value, 5u);
    EXPECT_EQ(cq[2].opcode, WcOpcode::CompSwap);
    EXPECT_EQ(cq[2].atomic_value, 41u);   // hit
    EXPECT_EQ(cq[3].atomic_value, 100u);  // miss: the word stays
    EXPECT_EQ(cq[5].atomic_value, 7u);    // saw the WRITE before it
    std::uint64_t in_buffer = 0;
    ASSERT_EQ(cq[2].read_data.size(), 8u);
    std::memcpy(&in_buffer, cq[2].read_data.data(), 8);
    EXPECT_EQ(in_buffer, 41u);
    EXPECT_EQ(pair.mem_b.load_word(1, 0x1000), 4u);  // 5 + (2^64 - 1)
    EXPECT_EQ(pair.mem_b.load_word(1, 0x1008), 100u);
    EXPECT_EQ(pair.mem_b.load_word(1, 0x1010), 8u);
    EXPECT_EQ(pair.b->receiver().counters().atomics_executed, 5u);
    EXPECT_EQ(pair.a->sender().counters().retransmissions, 0u);
}

TEST(QueuePair, CountsMalformedAndMisaddressedDatagrams) {
    MemoryModel memory;
    QueuePair qp(make_qp_config(kQpB, kQpA, 0, 0), memory);
    qp.on_datagram(std::vector<std::uint8_t>(10, 0), false, 0);
    EXPECT_EQ(qp.counters().malformed[static_cast<int>(ParseError::Truncated)], 1u);

    Packet p = data_packet(Opcode::Write, 0, flag::kFirst | flag::kLast, Deth{0, 1, 0, 0, 0}, {});
    p.bth.dqpn = 0x777;
    qp.on_datagram(encode(p), false, 0);
    EXPECT_EQ(qp.counters().wrong_qp, 1u);
    p.bth.dqpn = kQpB;
    p.bth.sqpn = 0x777;
    qp.on_datagram(encode(p), false, 0);
    EXPECT_EQ(qp.counters().wrong_peer, 1u);
    p.bth.sqpn = kQpA;
    p.bth.stream = 1;  // version 1: stream 0 only
    qp.on_datagram(encode(p), false, 0);
    EXPECT_EQ(qp.counters().malformed[static_cast<int>(ParseError::StreamNotZero)], 1u);
    EXPECT_EQ(qp.receiver().counters().packets, 0u);  // none reached the state machine
    EXPECT_TRUE(qp.take_outgoing().empty());
}

TEST(QueuePair, NewerVersionIsAnsweredWithVersionNakWhichFailsThePeer) {
    SimPair pair(clean_options());
    pair.a->post_send(send_wr(1, {1, 2}), pair.now());
    // A speaks "version 2": rewrite its packets on their way to B.
    std::vector<std::uint8_t> bytes = pair.a->take_outgoing().at(0).bytes;
    bytes[0] = 0x20;
    pair.b->on_datagram(bytes, false, 5);
    const auto out = pair.b->take_outgoing();
    ASSERT_EQ(out.size(), 1u);
    const auto nak = decode(out[0].bytes, {1024});
    ASSERT_TRUE(nak.ok());
    EXPECT_EQ(nak->ack().syndrome, Syndrome::Version);
    EXPECT_EQ(nak->ack().nak_arg, METAROCE_VERSION);
    EXPECT_FALSE(pair.b->in_error());
    pair.a->on_datagram(out[0].bytes, false, 30);
    EXPECT_TRUE(pair.a->in_error());
    const auto done = pair.a->poll_send_cq();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, WcStatus::RemInvReqErr);
    // A version 0 packet is only counted.
    bytes[0] = 0x00;
    pair.b->on_datagram(bytes, false, 40);
    EXPECT_TRUE(pair.b->take_outgoing().empty());
}

TEST(QueuePair, RemoteAccessErrorMovesBothQpsToError) {
    SimPair pair(clean_options());
    pair.mem_b.register_region(1, 0x1000, 100, access::kRemoteWrite);
    pair.mem_b.register_region(2, 0x9000, 100, access::kLocalWrite);
    ASSERT_TRUE(pair.b->post_recv(ReceiveWqe{50, {{2, 0x9000, 100}}}));
    ASSERT_TRUE(pair.a->post_recv(ReceiveWqe{60, {}}));
    pair.a->post_send(write_wr(1, pattern_bytes(200, 1), 0x1000, 1), pair.now());
    pair.a->post_send(send_wr(2, {1}), pair.now());
    ASSERT_TRUE(pair.run_until([&] { return pair.send_cq_a.size() == 2; }, 1'000'000));
    EXPECT_EQ(pair.send_cq_a[0].status, WcStatus::RemAccessErr);
    EXPECT_EQ(pair.send_cq_a[1].status, WcStatus::WrFlushErr);
    EXPECT_TRUE(pair.a->in_error());
    EXPECT_TRUE(pair.b->in_error());
    ASSERT_EQ(pair.recv_cq_b.size(), 1u);
    EXPECT_EQ(pair.recv_cq_b[0].status, WcStatus::WrFlushErr);
    ASSERT_EQ(pair.recv_cq_a.size(), 1u);  // A's own receive queue is flushed too
    EXPECT_EQ(pair.recv_cq_a[0].status, WcStatus::WrFlushErr);
}

// A WRITE to a fast-registration region, then a SEND with invalidate of its key (the way an
// NVMe-oF target hands back a buffer), end to end over the simulator.
TEST(QueuePair, SendWithInvalidateAfterAWriteToTheRegion) {
    SimPair pair(clean_options());
    const MemoryModel::FastRegId fr = pair.mem_b.alloc_fast_reg_region(4096);
    ASSERT_TRUE(pair.mem_b.fast_register(fr, 0x4401, 0x40000, 4096, access::kRemoteWrite));
    pair.mem_b.register_region(2, 0x9000, 4096, access::kLocalWrite);
    ASSERT_TRUE(pair.b->post_recv(ReceiveWqe{50, {{2, 0x9000, 4096}}}));
    const auto write_data = pattern_bytes(3000, 1);
    const auto send_data = pattern_bytes(2500, 2);
    pair.a->post_send(write_wr(1, write_data, 0x40000, 0x4401), pair.now());
    pair.a->post_send(send_with_inv_wr(2, send_data, 0x4401), pair.now());
    ASSERT_TRUE(pair.run_until([&] { return pair.send_cq_a.size() == 2; }, 1'000'000));
    EXPECT_EQ(pair.send_cq_a[0].status, WcStatus::Success);
    EXPECT_EQ(pair.send_cq_a[1].status, WcStatus::Success);
    EXPECT_EQ(pair.send_cq_a[1].opcode, WcOpcode::Send);
    ASSERT_EQ(pair.recv_cq_b.size(), 1u);
    EXPECT_EQ(pair.recv_cq_b[0].status, WcStatus::Success);
    EXPECT_EQ(pair.recv_cq_b[0].byte_len, 2500u);
    EXPECT_EQ(pair.recv_cq_b[0].invalidated_rkey, 0x4401u);
    EXPECT_FALSE(pair.mem_b.fast_reg_valid(0x4401));
    const auto bytes = pair.mem_b.fast_reg_bytes(fr);
    EXPECT_TRUE(std::equal(write_data.begin(), write_data.end(), bytes.begin()));
    EXPECT_EQ(pair.mem_b.gather(ReceiveWqe{50, {{2, 0x9000, 4096}}}, 2500), send_data);
    EXPECT_EQ(pair.b->receiver().counters().invalidations, 1u);
}

// The same through the wire, the SEND's packet delivered before the WRITE's (the WRITE was
// lost and is resent): the WRITE still lands, then the SEND completes and invalidates.
TEST(QueuePair, SendWithInvalidateOvertakingTheWriteBeforeIt) {
    MemoryModel mem_a, mem_b;
    QueuePair a(make_qp_config(kQpA, kQpB, 10, 20), mem_a);
    QueuePair b(make_qp_config(kQpB, kQpA, 20, 10), mem_b);
    const MemoryModel::FastRegId fr = mem_b.alloc_fast_reg_region(64);
    ASSERT_TRUE(mem_b.fast_register(fr, 0x4401, 0x40000, 64, access::kRemoteWrite));
    mem_b.register_region(2, 0x9000, 64, access::kLocalWrite);
    ASSERT_TRUE(b.post_recv(ReceiveWqe{50, {{2, 0x9000, 64}}}));
    const auto data = pattern_bytes(64, 3);
    a.post_send(write_wr(1, data, 0x40000, 0x4401), 0);
    a.post_send(send_with_inv_wr(2, {1, 2, 3}, 0x4401), 0);
    const std::vector<Datagram> out = a.take_outgoing();
    ASSERT_EQ(out.size(), 2u);
    b.on_datagram(out[1].bytes, false, 10);  // the SEND with invalidate
    EXPECT_FALSE(b.in_error());
    EXPECT_TRUE(mem_b.fast_reg_valid(0x4401));
    EXPECT_TRUE(b.poll_recv_cq().empty());
    b.on_datagram(out[0].bytes, false, 20);  // the WRITE, at last
    EXPECT_FALSE(b.in_error());
    const auto done = b.poll_recv_cq();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    EXPECT_EQ(done[0].invalidated_rkey, 0x4401u);
    EXPECT_FALSE(mem_b.fast_reg_valid(0x4401));
    const auto bytes = mem_b.fast_reg_bytes(fr);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), bytes.begin(), bytes.end()));
    for (const Datagram& d : b.take_outgoing()) a.on_datagram(d.bytes, false, 30);
    EXPECT_FALSE(a.in_error());
}

// INV without LAST, INV with IMM, INV on a WRITE: malformed (protocol.md section 12), dropped
// and counted, no state changed: nothing placed, marked, NAKed, completed or invalidated.
TEST(QueuePair, MalformedSendsWithInvalidateAreDroppedAndCounted) {
    MemoryModel memory;
    QueuePair qp(make_qp_config(kQpB, kQpA, 0, 0), memory);
    const MemoryModel::FastRegId fr = memory.alloc_fast_reg_region(4096);
    ASSERT_TRUE(memory.fast_register(fr, 0x4401, 0x40000, 4096, access::kRemoteWrite));
    memory.register_region(2, 0x9000, 4096, access::kLocalWrite);
    ASSERT_TRUE(qp.post_recv(ReceiveWqe{50, {{2, 0x9000, 4096}}}));
    const auto data = pattern_bytes(1034, 4);  // two packets at 1024

    using namespace flag;
    // The first packet of a two-packet SEND, with INV.
    Packet first = data_packet(Opcode::Send, 0, kFirst | kInv, Deth{0, 0, 0, 1034, 0x4401},
                               {data.begin(), data.begin() + 1024});
    qp.on_datagram(encode(first), false, 0);
    EXPECT_EQ(qp.counters().malformed[static_cast<int>(ParseError::InconsistentFlags)], 1u);
    // A single-packet SEND with both INV and IMM.
    Packet both = data_packet(Opcode::Send, 0, kFirst | kLast | kAckReq | kInv | kImm,
                              Deth{0, 0, 0, 10, 0x4401}, pattern_bytes(10, 5));
    qp.on_datagram(encode(both), false, 0);
    EXPECT_EQ(qp.counters().malformed[static_cast<int>(ParseError::InconsistentFlags)], 2u);
    // A WRITE with INV, to the very region.
    Packet write = data_packet(Opcode::Write, 0, kFirst | kLast | kAckReq | kInv,
                               Deth{0x40000, 0x4401, 0, 10, 0x4401}, pattern_bytes(10, 6));
    qp.on_datagram(encode(write), false, 0);
    EXPECT_EQ(qp.counters().malformed[static_cast<int>(ParseError::FlagNotAllowed)], 1u);

    EXPECT_EQ(qp.receiver().counters().packets, 0u);  // none reached the state machine
    EXPECT_TRUE(qp.take_outgoing().empty());
    EXPECT_TRUE(qp.poll_recv_cq().empty());
    EXPECT_FALSE(qp.in_error());
    EXPECT_EQ(qp.receiver().window().cum_psn(), 0u);
    EXPECT_TRUE(memory.fast_reg_valid(0x4401));
    const auto region = memory.fast_reg_bytes(fr);
    EXPECT_TRUE(std::all_of(region.begin(), region.end(), [](std::uint8_t b) { return b == 0; }));
    EXPECT_TRUE(std::all_of(memory.region_bytes(2).begin(), memory.region_bytes(2).end(),
                            [](std::uint8_t b) { return b == 0; }));

    // The same SEND well formed, at the same PSN: accepted and completed.
    Packet last = data_packet(Opcode::Send, 1, kLast | kAckReq | kInv,
                              Deth{1024, 0, 0, 1034, 0x4401}, {data.begin() + 1024, data.end()});
    first.bth.flags = kFirst;
    first.deth().imm = 0;
    qp.on_datagram(encode(first), false, 0);
    qp.on_datagram(encode(last), false, 0);
    const auto done = qp.poll_recv_cq();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    EXPECT_EQ(done[0].invalidated_rkey, 0x4401u);
    EXPECT_FALSE(memory.fast_reg_valid(0x4401));
}

TEST(QueuePair, RnrThenPostedLaterCompletes) {
    SimPair pair(clean_options());
    pair.mem_b.register_region(2, 0x9000, 100, access::kLocalWrite);
    pair.a->post_send(send_wr(1, {1, 2, 3}), pair.now());
    pair.run_for(100);
    EXPECT_GE(pair.b->receiver().counters().rnr_naks, 2u);  // refused, resent, refused...
    EXPECT_TRUE(pair.send_cq_a.empty());
    EXPECT_FALSE(pair.a->in_error());  // rnr_retry 7: forever
    ASSERT_TRUE(pair.b->post_recv(ReceiveWqe{50, {{2, 0x9000, 100}}}));
    ASSERT_TRUE(pair.run_until([&] { return pair.send_cq_a.size() == 1; }, 1'000'000));
    EXPECT_EQ(pair.send_cq_a[0].status, WcStatus::Success);
    EXPECT_GE(pair.b->receiver().counters().rnr_naks, 1u);
}

TEST(QueuePair, DeadPathIsAvoidedAndRecoversWhenHealed) {
    SimPairOptions o = clean_options();
    SimPair pair(o);
    pair.mem_b.register_region(1, 0, 8 << 20, access::kRemoteWrite);
    const auto port =
        static_cast<std::uint16_t>(METAROCE_ENTROPY_BASE | PathSet::entropy_for(kQpA, 5));
    sim::SimLink& link = pair.net.link(pair.id_a, pair.id_b);
    link.set_blackhole(port, true);
    std::uint64_t posted = 0;
    const auto post_batch = [&](unsigned n) {
        for (unsigned i = 0; i < n; ++i, ++posted) {
            pair.a->post_send(write_wr(posted, pattern_bytes(8192, 1), (posted % 512) * 8192, 1),
                              pair.now());
        }
    };
    post_batch(200);
    ASSERT_TRUE(pair.run_until([&] { return pair.send_cq_a.size() == posted; }, 10'000'000));
    const Path& dead = pair.a->sender().paths()[5];
    EXPECT_EQ(dead.state, PathState::Failed);
    // Only the first window's share (the sender starts at the full window, 256 packets over 8
    // paths), the packets that revealed the failure and the odd probe went into the hole.
    EXPECT_LT(link.stats().blackholed, 256u / 8 + 8);
    EXPECT_GT(pair.a->sender().paths()[4].sent, 150u);

    link.set_blackhole(port, false);
    const std::uint64_t sent_before = dead.sent;
    for (int round = 0; round < 20; ++round) {
        post_batch(50);
        ASSERT_TRUE(pair.run_until([&] { return pair.send_cq_a.size() == posted; }, 10'000'000));
        pair.run_for(5000);  // let the probe backoff expire
    }
    EXPECT_EQ(dead.state, PathState::Active);
    EXPECT_GT(dead.sent - sent_before, 50u);  // carrying its share again
    for (const Completion& c : pair.send_cq_a) EXPECT_EQ(c.status, WcStatus::Success);
}

TEST(QueuePair, EcnKeepsTheBottleneckQueueShort) {
    SimPairOptions o = clean_options();
    // 1.25 GB/s bottleneck marking above 30 kB queued; 20 us RTT.
    o.a_to_b.bytes_per_us = 1250;
    o.a_to_b.ecn_threshold_bytes = 30'000;
    SimPair pair(o);
    pair.mem_b.register_region(1, 0, 8 << 20, access::kRemoteWrite);
    // The sender starts at the full window (256 packets, some 280 kB: a 225 us queue), which
    // ECN brings down within a few round trips; measured after that start-up.
    constexpr TimeUs kStartup = 2000;
    TimeUs worst_queue_us = 0;
    std::uint64_t bytes = 0;
    pair.net.set_delivery_tap([&](sim::NodeId, sim::NodeId to, const Datagram& d, TimeUs now) {
        if (to == pair.id_b && now >= kStartup) bytes += d.bytes.size();
    });
    constexpr int kWrites = 1000;
    for (int i = 0; i < kWrites; ++i) {
        pair.a->post_send(write_wr(i, pattern_bytes(16384, 2), (i % 400) * 16384, 1), pair.now());
    }
    pair.net.set_after_event([&] {
        // Queueing delay = RTT above the base 20 us.
        const auto srtt = pair.a->sender().rtt().srtt();
        if (srtt && pair.now() >= kStartup) {
            worst_queue_us = std::max<TimeUs>(worst_queue_us, *srtt > 20 ? *srtt - 20 : 0);
        }
    });
    ASSERT_TRUE(pair.run_until([&] { return pair.send_cq_a.size() == kWrites; }, 100'000));
    const double throughput =
        static_cast<double>(bytes) / static_cast<double>(pair.now() - kStartup);
    EXPECT_GT(pair.net.link(pair.id_a, pair.id_b).stats().ce_marked, 0u);
    EXPECT_LT(pair.a->sender().congestion().cwnd(), 100.0);
    EXPECT_GT(pair.a->sender().congestion().alpha(), 0.0);
    EXPECT_GT(throughput, 0.8 * 1250);  // close to the link rate...
    EXPECT_LT(worst_queue_us, 100u);    // ...with a short queue (30 kB is 24 us)
    EXPECT_EQ(pair.a->sender().counters().retransmissions, 0u);
}

}  // namespace
}  // namespace metaroce
