// A stream's requester: work requests cut into segments, MSNs for receive-consuming messages,
// fences and the limit on unanswered READs and atomics, responses checked against their requests,
// completions in posting order.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

extern "C" {
#include "mrc_req.h"
}

namespace {

class Req : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_TRUE(mrc_req_init(&r, wrs.data(), uint32_t(wrs.size()), 1000, 40, 2));
        mrc_stream_tx_init(&st, 500);
    }
    uint32_t post(uint8_t op, uint32_t len, uint8_t flags = 0) {
        uint32_t i;
        EXPECT_TRUE(mrc_req_post(&r, op, len, flags, &i));
        return i;
    }
    std::vector<mrc_seg_out> drain() {
        std::vector<mrc_seg_out> out;
        mrc_seg_out o;
        while (mrc_req_next(&r, &st, &o)) out.push_back(o);
        return out;
    }
    std::vector<uint32_t> completions() {
        std::vector<uint32_t> out;
        uint32_t i;
        while (mrc_req_next_completion(&r, &i)) out.push_back(i);
        return out;
    }
    void deliver(uint32_t ssn) {
        if (mrc_stream_tx_acked(&st, ssn)) mrc_req_delivered(&r, ssn);
    }
    mrc_hdr resp(uint8_t op, uint32_t req_ssn, uint32_t offset, uint32_t msg_len) {
        mrc_hdr h{};
        h.opcode = op;
        h.msn = req_ssn;
        h.offset = offset;
        h.msg_len = msg_len;
        return h;
    }
    std::vector<mrc_wr> wrs = std::vector<mrc_wr>(16);
    mrc_req r;
    mrc_stream_tx st;
};

TEST_F(Req, MessagesAreCutIntoSegmentsOfOneMtu) {
    post(MRC_OP_SEND, 2500);
    post(MRC_OP_WRITE, 0);
    post(MRC_OP_WRITE_IMM, 1000);
    std::vector<mrc_seg_out> s = drain();
    ASSERT_EQ(s.size(), 5u);
    EXPECT_EQ(s[0].ssn, 500u);
    EXPECT_EQ(s[2].offset, 2000u);
    EXPECT_EQ(s[2].payload_len, 500u);
    EXPECT_EQ(s[2].msg_len, 2500u);
    EXPECT_EQ(s[3].payload_len, 0u);  // an empty WRITE is one empty segment
    EXPECT_EQ(s[3].wr, 1u);
    // Receive-consuming messages number themselves; others carry the next number.
    EXPECT_EQ(s[0].msn, 40u);
    EXPECT_EQ(s[3].msn, 41u);
    EXPECT_EQ(s[4].msn, 41u);
    mrc_seg_out again;
    ASSERT_TRUE(mrc_req_resend(&r, 501, &again));
    EXPECT_EQ(again.offset, 1000u);
    EXPECT_EQ(again.wr, 0u);
    EXPECT_FALSE(mrc_req_resend(&r, 505, &again));  // not sent
}

TEST_F(Req, CompletionsComeInPostingOrder) {
    post(MRC_OP_SEND, 2000);
    post(MRC_OP_WRITE, 10);
    drain();
    deliver(502);  // the WRITE's
    EXPECT_TRUE(completions().empty());
    deliver(500);
    EXPECT_TRUE(completions().empty());
    deliver(501);
    EXPECT_EQ(completions(), (std::vector<uint32_t>{0, 1}));
    EXPECT_EQ(r.completed, 2u);
}

TEST_F(Req, ReadsAreAnsweredByTheirResponsesAndLimited) {
    post(MRC_OP_READ_REQ, 1500);
    post(MRC_OP_FETCH_ADD, 8);
    post(MRC_OP_READ_REQ, 10);  // a third: over max_rd_atomic 2
    std::vector<mrc_seg_out> s = drain();
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].payload_len, 0u);
    EXPECT_EQ(s[0].msg_len, 1500u);
    uint32_t wr;
    // Responses name their request by its SSN, and must be what it asked for.
    const mrc_hdr unknown = resp(MRC_OP_READ_RESP, 999, 0, 1500),
                  wrong_op = resp(MRC_OP_ATOMIC_RESP, 500, 0, 8),
                  wrong_len = resp(MRC_OP_READ_RESP, 500, 1000, 1400),
                  past_end = resp(MRC_OP_READ_RESP, 500, 1000, 1500);
    EXPECT_EQ(mrc_req_response(&r, &unknown, 1000, &wr), MRC_RESP_UNKNOWN);
    EXPECT_EQ(mrc_req_response(&r, &wrong_op, 8, &wr), MRC_RESP_BAD);
    EXPECT_EQ(mrc_req_response(&r, &wrong_len, 400, &wr), MRC_RESP_BAD);
    EXPECT_EQ(mrc_req_response(&r, &past_end, 600, &wr), MRC_RESP_BAD);
    EXPECT_EQ(r.bad_responses, 4u);
    mrc_hdr a = resp(MRC_OP_ATOMIC_RESP, 501, 0, 8);
    ASSERT_EQ(mrc_req_response(&r, &a, 8, &wr), MRC_RESP_OK);
    EXPECT_EQ(wr, 1u);
    mrc_req_answered(&r, wr, 8);
    EXPECT_TRUE(completions().empty());  // the READ before it is not answered
    // The atomic's answer freed a slot: the third request goes.
    EXPECT_EQ(drain().size(), 1u);
    mrc_hdr r1 = resp(MRC_OP_READ_RESP, 500, 1000, 1500), r0 = resp(MRC_OP_READ_RESP, 500, 0, 1500);
    ASSERT_EQ(mrc_req_response(&r, &r1, 500, &wr), MRC_RESP_OK);
    mrc_req_answered(&r, wr, 500);
    EXPECT_TRUE(completions().empty());
    ASSERT_EQ(mrc_req_response(&r, &r0, 1000, &wr), MRC_RESP_OK);
    mrc_req_answered(&r, wr, 1000);
    EXPECT_EQ(completions(), (std::vector<uint32_t>{0, 1}));
    EXPECT_EQ(mrc_req_response(&r, &r0, 1000, &wr), MRC_RESP_UNKNOWN);  // answered already
}

TEST_F(Req, AFenceWaitsForEarlierReadsAndLocalOperationsRunInOrder) {
    post(MRC_OP_READ_REQ, 0);
    post(0, 0);  // a local operation: runs when the send point reaches it
    post(MRC_OP_SEND, 10, MRC_WR_FENCE);
    std::vector<mrc_seg_out> s = drain();
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[1].op, 0);  // the local one
    EXPECT_EQ(s[1].wr, 1u);
    uint32_t wr;
    mrc_hdr h = resp(MRC_OP_READ_RESP, 500, 0, 0);
    ASSERT_EQ(mrc_req_response(&r, &h, 0, &wr), MRC_RESP_OK);
    mrc_req_answered(&r, wr, 0);  // an empty READ: one empty response
    EXPECT_EQ(completions(), (std::vector<uint32_t>{0, 1}));
    s = drain();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].op, MRC_OP_SEND);
}

TEST_F(Req, PostingStopsWhenEveryEntryIsInUse) {
    uint32_t i;
    for (size_t n = 0; n < wrs.size(); n++) ASSERT_TRUE(mrc_req_post(&r, MRC_OP_SEND, 1, 0, &i));
    EXPECT_FALSE(mrc_req_post(&r, MRC_OP_SEND, 1, 0, &i));
    drain();
    deliver(500);
    completions();
    EXPECT_TRUE(mrc_req_post(&r, MRC_OP_SEND, 1, 0, &i));
}

// Random work requests, segments delivered in random order: every request completes, once, in
// posting order, only after all its segments are delivered.
TEST_F(Req, RandomWorkCompletesInOrder) {
    std::mt19937 rng(3);
    uint32_t next_done = 0;
    std::vector<uint32_t> out;
    for (int round = 0; round < 300; round++) {
        uint32_t i;
        while (rng() % 3 &&
               mrc_req_post(&r, rng() % 2 ? MRC_OP_SEND : MRC_OP_WRITE, rng() % 5000, 0, &i)) {
        }
        for (const mrc_seg_out &s : drain()) out.push_back(s.ssn);
        std::shuffle(out.begin(), out.end(), rng);
        size_t n = out.size() / 2 + 1;
        for (size_t k = 0; k < n && !out.empty(); k++) {
            deliver(out.back());
            out.pop_back();
        }
        uint32_t done;
        while (mrc_req_next_completion(&r, &done)) {
            ASSERT_EQ(done, next_done++);
            const mrc_wr &w = wrs[done % wrs.size()];
            ASSERT_EQ(w.delivered, w.nsegs);
        }
    }
    EXPECT_GT(next_done, 100u);
}

// Found by review: slots are the index modulo the entries, which must then be a power of two, or
// two live requests share a slot across the index's wrap.
// A NAK refuses one work request: it completes (the caller reports the error)
// once those before it have, and nothing more of it goes out.
TEST_F(Req, ARefusedRequestCompletesInOrderAndSendsNoMore) {
    post(MRC_OP_SEND, 100);
    post(MRC_OP_WRITE, 3000);
    post(MRC_OP_READ_REQ, 10);
    mrc_seg_out o;
    ASSERT_TRUE(mrc_req_next(&r, &st, &o));  // the SEND
    ASSERT_TRUE(mrc_req_next(&r, &st, &o));  // the WRITE's first segment
    uint32_t wr;
    ASSERT_TRUE(mrc_req_wr_of(&r, 501, &wr));
    EXPECT_EQ(wr, 1u);
    EXPECT_FALSE(mrc_req_wr_of(&r, 502, &wr));  // not opened
    mrc_req_refused(&r, 1);
    EXPECT_TRUE(completions().empty());  // the SEND is not delivered yet
    ASSERT_TRUE(mrc_req_next(&r, &st, &o));
    EXPECT_EQ(o.wr, 2u);  // the WRITE's other segments are not sent
    deliver(500);
    EXPECT_EQ(completions(), (std::vector<uint32_t>{0, 1}));
    mrc_req_refused(&r, 2);  // a READ refused no longer waits for an answer
    EXPECT_EQ(r.nreqs, 0u);
    EXPECT_EQ(completions(), (std::vector<uint32_t>{2}));
    EXPECT_TRUE(r.wrs[1].refused);
}

TEST(ReqInit, EntriesArePowersOfTwo) {
    std::vector<mrc_wr> w(3);
    mrc_req r;
    EXPECT_FALSE(mrc_req_init(&r, w.data(), 3, 1000, 0, 1));
    EXPECT_FALSE(mrc_req_init(&r, w.data(), 0, 1000, 0, 1));
    EXPECT_TRUE(mrc_req_init(&r, w.data(), 2, 1000, 0, 1));
}

TEST_F(Req, OnlyARequestersOpcodesArePostedAndAnAtomicIsEightBytes) {
    uint32_t i;
    for (uint8_t op : {uint8_t(MRC_OP_READ_RESP), uint8_t(MRC_OP_ATOMIC_RESP), uint8_t(MRC_OP_NAK),
                       uint8_t(MRC_OP_ACK), uint8_t(MRC_OP_UD_SEND), uint8_t(0x0f), uint8_t(0xff)})
        EXPECT_FALSE(mrc_req_post(&r, op, 8, 0, &i)) << int(op);
    ASSERT_TRUE(mrc_req_post(&r, MRC_OP_CMP_SWP, 100, 0, &i));
    std::vector<mrc_seg_out> s = drain();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].msg_len, 8u);
}

}  // namespace
