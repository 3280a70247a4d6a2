// A stream's receiver: segments taken once in any order, receive-consuming messages completed in
// MSN order once every earlier segment is in, requests run in stream order once, RNR refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

extern "C" {
#include "mrc_stream_rx.h"
}

namespace {

mrc_hdr seg(uint8_t op, uint32_t ssn, uint32_t msn, uint32_t offset, uint32_t msg_len) {
    mrc_hdr h{};
    h.opcode = op;
    h.ssn = ssn;
    h.msn = msn;
    h.offset = offset;
    h.msg_len = msg_len;
    return h;
}

// Takes @h as a caller would whose checks all pass; returns the verdict.
mrc_seg_verdict take(mrc_stream_rx &rx, const mrc_hdr &h, uint32_t payload) {
    mrc_seg_verdict v = mrc_stream_rx_check(&rx, &h);
    if (v == MRC_SEG_TAKE) mrc_stream_rx_accept(&rx, &h, payload);
    return v;
}

std::vector<uint32_t> completions(mrc_stream_rx &rx) {
    std::vector<uint32_t> out;
    uint32_t msn;
    while (mrc_stream_rx_next_completion(&rx, &msn)) out.push_back(msn);
    return out;
}

TEST(StreamRx, MessagesCompleteInOrderOnceEveryEarlierSegmentIsIn) {
    mrc_stream_rx rx;
    mrc_stream_rx_init(&rx, 100, 7, 16);
    // SEND 7 is SSNs 100-101 (2000 bytes), a WRITE is 102, SEND 8 is 103.
    EXPECT_EQ(take(rx, seg(MRC_OP_SEND, 103, 8, 0, 10), 10), MRC_SEG_TAKE);
    EXPECT_EQ(take(rx, seg(MRC_OP_SEND, 101, 7, 1000, 2000), 1000), MRC_SEG_TAKE);
    EXPECT_TRUE(completions(rx).empty());  // 100 is missing
    EXPECT_EQ(take(rx, seg(MRC_OP_SEND, 100, 7, 0, 2000), 1000), MRC_SEG_TAKE);
    EXPECT_EQ(completions(rx), std::vector<uint32_t>{7});
    // SEND 8 waits for the WRITE before it.
    EXPECT_TRUE(completions(rx).empty());
    EXPECT_EQ(take(rx, seg(MRC_OP_WRITE, 102, 8, 0, 5), 5), MRC_SEG_TAKE);
    EXPECT_EQ(completions(rx), std::vector<uint32_t>{8});
    EXPECT_EQ(rx.map.cum, 104u);
}

// protocol-v2.md 9.1: the peer answered our READ from RTR, so its stream starts at our own first
// SSN (100000), not at the 100 the connection gave; moved before anything is taken, never after.
TEST(StreamRx, AStreamBegunInRtrStartsWhereOursDid) {
    mrc_stream_rx rx;
    mrc_stream_rx_init(&rx, 100, 0, 16);
    const mrc_hdr second = seg(MRC_OP_READ_RESP, 100001, 7, 1024, 2048);
    EXPECT_EQ(mrc_stream_rx_check(&rx, &second), MRC_SEG_BEYOND);
    EXPECT_TRUE(mrc_stream_rx_rebase(&rx, 100000));
    EXPECT_EQ(rx.map.cum, 100000u);
    EXPECT_EQ(take(rx, second, 1024), MRC_SEG_TAKE);
    EXPECT_EQ(take(rx, seg(MRC_OP_READ_RESP, 100000, 7, 0, 2048), 1024), MRC_SEG_TAKE);
    EXPECT_EQ(rx.map.cum, 100002u);
    EXPECT_FALSE(mrc_stream_rx_rebase(&rx, 100000));
    EXPECT_EQ(rx.map.cum, 100002u);
}

TEST(StreamRx, AResendOfAnAcceptedSegmentIsNotTakenAgain) {
    mrc_stream_rx rx;
    mrc_stream_rx_init(&rx, 0, 0, 16);
    EXPECT_EQ(take(rx, seg(MRC_OP_WRITE, 1, 0, 1000, 2000), 1000), MRC_SEG_TAKE);
    EXPECT_EQ(take(rx, seg(MRC_OP_WRITE, 1, 0, 1000, 2000), 1000), MRC_SEG_DUPLICATE);
    EXPECT_EQ(take(rx, seg(MRC_OP_WRITE, 0, 0, 0, 2000), 1000), MRC_SEG_TAKE);
    EXPECT_EQ(take(rx, seg(MRC_OP_WRITE, 0, 0, 0, 2000), 1000), MRC_SEG_DUPLICATE);  // below cum
    EXPECT_EQ(rx.accepted, 2u);
    EXPECT_EQ(rx.duplicates, 2u);
}

TEST(StreamRx, RequestsRunInStreamOrderOnce) {
    mrc_stream_rx rx;
    mrc_stream_rx_init(&rx, 0, 0, 2);
    EXPECT_EQ(take(rx, seg(MRC_OP_FETCH_ADD, 2, 0, 0, 8), 0), MRC_SEG_TAKE);
    EXPECT_EQ(take(rx, seg(MRC_OP_READ_REQ, 1, 0, 0, 4096), 0), MRC_SEG_TAKE);
    EXPECT_TRUE(mrc_stream_rx_requests_full(&rx, 3));
    EXPECT_FALSE(mrc_stream_rx_requests_full(&rx, 0));  // before a queued one: always taken
    uint32_t ssn;
    EXPECT_FALSE(mrc_stream_rx_next_request(&rx, &ssn));  // a WRITE at 0 must land first
    EXPECT_EQ(take(rx, seg(MRC_OP_WRITE, 0, 0, 0, 8), 8), MRC_SEG_TAKE);
    ASSERT_TRUE(mrc_stream_rx_next_request(&rx, &ssn));
    EXPECT_EQ(ssn, 1u);
    ASSERT_TRUE(mrc_stream_rx_next_request(&rx, &ssn));
    EXPECT_EQ(ssn, 2u);
    EXPECT_FALSE(mrc_stream_rx_next_request(&rx, &ssn));
    EXPECT_EQ(take(rx, seg(MRC_OP_FETCH_ADD, 2, 0, 0, 8), 0), MRC_SEG_DUPLICATE);
    EXPECT_FALSE(mrc_stream_rx_next_request(&rx, &ssn));  // never run twice
}

TEST(StreamRx, RnrRefusesFromTheRefusedSegmentOnUntilTheSenderGoesBack) {
    mrc_stream_rx rx;
    mrc_stream_rx_init(&rx, 0, 0, 16);
    EXPECT_EQ(take(rx, seg(MRC_OP_SEND, 0, 0, 0, 1), 1), MRC_SEG_TAKE);
    mrc_hdr s1 = seg(MRC_OP_SEND, 1, 1, 0, 1);
    ASSERT_EQ(mrc_stream_rx_check(&rx, &s1), MRC_SEG_TAKE);
    EXPECT_TRUE(mrc_stream_rx_refuse(&rx, 1));  // no receive WQE: one NAK
    EXPECT_EQ(take(rx, seg(MRC_OP_WRITE, 2, 2, 0, 1), 1), MRC_SEG_REFUSE);
    EXPECT_EQ(take(rx, seg(MRC_OP_SEND, 3, 2, 0, 1), 1), MRC_SEG_REFUSE);
    // The go-back: still no WQE, another NAK (the sender counts its RNR retries).
    ASSERT_EQ(mrc_stream_rx_check(&rx, &s1), MRC_SEG_TAKE);
    EXPECT_TRUE(mrc_stream_rx_refuse(&rx, 1));
    EXPECT_EQ(take(rx, seg(MRC_OP_WRITE, 2, 2, 0, 1), 1), MRC_SEG_REFUSE);
    // Now a WQE is there: the refused segment is taken, and what follows it.
    EXPECT_EQ(take(rx, s1, 1), MRC_SEG_TAKE);
    EXPECT_FALSE(rx.refusing);
    EXPECT_EQ(take(rx, seg(MRC_OP_WRITE, 2, 2, 0, 1), 1), MRC_SEG_TAKE);
    EXPECT_EQ(take(rx, seg(MRC_OP_SEND, 3, 2, 0, 1), 1), MRC_SEG_TAKE);
    EXPECT_EQ(completions(rx), (std::vector<uint32_t>{0, 1, 2}));
}

// Found by the differential test: the spec says a NAK is never refused (section 9.2).
TEST(StreamRx, ANakIsTakenWhileRefusing) {
    mrc_stream_rx rx;
    mrc_stream_rx_init(&rx, 0, 0, 16);
    EXPECT_TRUE(mrc_stream_rx_refuse(&rx, 0));
    EXPECT_EQ(take(rx, seg(MRC_OP_READ_RESP, 1, 77, 0, 1), 1), MRC_SEG_REFUSE);
    EXPECT_EQ(take(rx, seg(MRC_OP_NAK, 2, 77, 0, 0), 0), MRC_SEG_TAKE);
}

TEST(StreamRx, OutsideTheMapOrItsMessageSlotsIsBeyond) {
    mrc_stream_rx rx;
    mrc_stream_rx_init(&rx, 0, 50, 16);
    EXPECT_EQ(take(rx, seg(MRC_OP_WRITE, MRC_STREAM_MAP_BITS, 0, 0, 1), 1), MRC_SEG_BEYOND);
    EXPECT_EQ(take(rx, seg(MRC_OP_WRITE, MRC_STREAM_MAP_BITS - 1, 0, 0, 1), 1), MRC_SEG_TAKE);
    EXPECT_EQ(take(rx, seg(MRC_OP_SEND, 5, 50 + MRC_RECV_SLOTS, 0, 1), 1), MRC_SEG_BEYOND);
    EXPECT_EQ(take(rx, seg(MRC_OP_SEND, 5, 49, 0, 1), 1), MRC_SEG_BEYOND);  // completed long ago
    EXPECT_EQ(take(rx, seg(MRC_OP_SEND, 5, 50, 0, 1), 1), MRC_SEG_TAKE);
    EXPECT_EQ(rx.beyond, 3u);
}

// Random streams of SENDs, WRITE_IMMs, WRITEs and READs, their segments delivered in random order
// with duplicates: each segment taken once, each receive-consuming message completed in MSN order
// only after every segment before its last, each request run once, in order, after every segment
// before it.
TEST(StreamRx, RandomMessagesInRandomOrder) {
    std::mt19937 rng(8);
    for (int round = 0; round < 200; round++) {
        struct Seg {
            mrc_hdr h;
            uint32_t payload;
        };
        std::vector<Seg> segs;
        std::map<uint32_t, uint32_t> last_of_msn;  // MSN: SSN of its last segment
        std::set<uint32_t> requests;
        uint32_t ssn0 = rng(), msn0 = rng(), ssn = ssn0, msn = msn0;
        const uint32_t mtu = 1000;
        int messages = 1 + rng() % 60;
        for (int m = 0; m < messages; m++) {
            static const uint8_t ops[] = {MRC_OP_SEND, MRC_OP_WRITE_IMM, MRC_OP_WRITE,
                                          MRC_OP_READ_REQ, MRC_OP_SEND_IMM};
            uint8_t op = ops[rng() % 5];
            uint32_t len = rng() % 5000;
            if (op == MRC_OP_READ_REQ) {
                requests.insert(ssn - ssn0);
                segs.push_back({seg(op, ssn++, msn, 0, len), 0});
                continue;
            }
            bool recv = mrc_opcode[op].mask & MRC_OPM_RECV;
            uint32_t n = std::max(1u, (len + mtu - 1) / mtu);
            for (uint32_t i = 0; i < n; i++) {
                uint32_t off = i * mtu, pay = std::min(mtu, len - off);
                segs.push_back({seg(op, ssn, msn, off, len), pay});
                if (recv && i == n - 1) last_of_msn[msn - msn0] = ssn - ssn0;
                ssn++;
            }
            if (recv) msn++;
        }
        std::vector<Seg> order = segs;
        for (size_t i = 0; i < segs.size() / 3; i++) order.push_back(segs[rng() % segs.size()]);
        std::shuffle(order.begin(), order.end(), rng);
        mrc_stream_rx rx;
        mrc_stream_rx_init(&rx, ssn0, msn0, MRC_MAX_REQUESTS);
        std::set<uint32_t> taken;
        uint32_t next_msn = 0;
        std::vector<uint32_t> ran;
        for (const Seg &s : order) {
            mrc_seg_verdict v = take(rx, s.h, s.payload);
            ASSERT_NE(v, MRC_SEG_BEYOND);
            ASSERT_EQ(v == MRC_SEG_TAKE, taken.insert(s.h.ssn - ssn0).second);
            uint32_t done;
            while (mrc_stream_rx_next_completion(&rx, &done)) {
                ASSERT_EQ(done - msn0, next_msn) << "in MSN order";
                for (uint32_t q = 0; q <= last_of_msn.at(next_msn); q++)
                    ASSERT_TRUE(taken.count(q)) << "completed before segment " << q;
                next_msn++;
            }
            uint32_t req;
            while (mrc_stream_rx_next_request(&rx, &req)) {
                ASSERT_TRUE(requests.count(req - ssn0));
                for (uint32_t q = 0; q <= req - ssn0; q++) ASSERT_TRUE(taken.count(q));
                ASSERT_TRUE(ran.empty() || req - ssn0 > ran.back());
                ran.push_back(req - ssn0);
            }
        }
        EXPECT_EQ(next_msn, msn - msn0);
        EXPECT_EQ(ran.size(), requests.size());
        EXPECT_EQ(rx.map.cum, ssn);
    }
}

// Found by review: a request a later one overtook, refused for want of a slot, held the stream for
// good (the later one runs only after it). It is taken whatever the limit.
TEST(StreamRx, ARequestBeforeAQueuedOneIsTakenPastTheLimit) {
    mrc_stream_rx rx;
    mrc_stream_rx_init(&rx, 0, 0, 1);
    mrc_hdr late = seg(MRC_OP_READ_REQ, 1, 0, 0, 100), early = seg(MRC_OP_READ_REQ, 0, 0, 0, 100);
    EXPECT_EQ(take(rx, late, 0), MRC_SEG_TAKE);
    ASSERT_EQ(mrc_stream_rx_check(&rx, &early), MRC_SEG_TAKE);
    EXPECT_FALSE(mrc_stream_rx_requests_full(&rx, early.ssn));
    mrc_stream_rx_accept(&rx, &early, 0);
    uint32_t ssn;
    ASSERT_TRUE(mrc_stream_rx_next_request(&rx, &ssn));
    EXPECT_EQ(ssn, 0u);
    ASSERT_TRUE(mrc_stream_rx_next_request(&rx, &ssn));
    EXPECT_EQ(ssn, 1u);
}

}  // namespace
