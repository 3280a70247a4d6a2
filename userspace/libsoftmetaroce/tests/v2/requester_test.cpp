// Sections 8.1 and 9: a stream's requester.
#include "softmetaroce/v2/requester.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace softmetaroce::v2 {
namespace {

constexpr uint32_t kMtu = 1000;

// Everything next() has to give now.
std::vector<SegmentOut> drain(Requester& r, StreamSender& s) {
    std::vector<SegmentOut> out;
    while (auto seg = r.next(s)) out.push_back(*seg);
    return out;
}

// Delivers every segment out, as the stream would on its ACKs.
void deliver_all(Requester& r, StreamSender& s, const std::vector<SegmentOut>& segs) {
    for (const SegmentOut& seg : segs)
        if (!seg.local && s.on_acked(seg.ssn)) r.delivered(seg.ssn);
}

// The whole response to a READ or atomic request.
void answer(Requester& r, const SegmentOut& req) {
    const bool read = req.op == Op::ReadReq;
    const Op op = read ? Op::ReadResp : Op::AtomicResp;
    uint32_t off = 0;
    do {
        const uint32_t len = std::min(kMtu, req.msg_len - off);
        uint32_t wr = ~0u;
        ASSERT_EQ(r.response(op, req.ssn, off, req.msg_len, len, &wr), RespVerdict::Ok);
        ASSERT_EQ(wr, req.wr);
        r.answered(wr, len);
        off += len;
    } while (off < req.msg_len);
}

TEST(Requester, MessagesWithPayloadAreCutAtTheMtu) {
    Requester r(8, kMtu, 0, 4);
    StreamSender s(0xfffffffeu);  // across the wrap
    EXPECT_EQ(r.post(Op::Send, 2500, false), 0u);
    EXPECT_EQ(r.post(Op::Write, 2000, false), 1u);
    EXPECT_EQ(r.post(Op::SendImm, 0, false), 2u);
    const auto segs = drain(r, s);
    ASSERT_EQ(segs.size(), 6u);
    const uint32_t off[] = {0, 1000, 2000, 0, 1000, 0};
    const uint32_t pay[] = {1000, 1000, 500, 1000, 1000, 0};
    const uint32_t len[] = {2500, 2500, 2500, 2000, 2000, 0};
    const uint32_t wr[] = {0, 0, 0, 1, 1, 2};
    for (uint32_t i = 0; i < 6; ++i) {
        EXPECT_EQ(segs[i].ssn, 0xfffffffeu + i) << i;
        EXPECT_FALSE(segs[i].local);
        EXPECT_EQ(segs[i].wr, wr[i]) << i;
        EXPECT_EQ(segs[i].offset, off[i]) << i;
        EXPECT_EQ(segs[i].payload_len, pay[i]) << i;
        EXPECT_EQ(segs[i].msg_len, len[i]) << i;
    }
    EXPECT_EQ(segs[2].op, Op::Send);
    EXPECT_EQ(segs[4].op, Op::Write);
    EXPECT_EQ(segs[5].op, Op::SendImm);
}

TEST(Requester, ReadsAndAtomicsAreOneEmptySegment) {
    Requester r(8, kMtu, 0, 4);
    StreamSender s(5);
    r.post(Op::ReadReq, 100000, false);
    r.post(Op::CmpSwp, 3, false);  // an atomic's length is 8 whatever was asked
    r.post(Op::FetchAdd, 8, false);
    r.post(Op::ReadReq, 0, false);
    const auto segs = drain(r, s);
    ASSERT_EQ(segs.size(), 4u);
    const uint32_t len[] = {100000, 8, 8, 0};
    for (uint32_t i = 0; i < 4; ++i) {
        EXPECT_EQ(segs[i].ssn, 5 + i);
        EXPECT_EQ(segs[i].offset, 0u);
        EXPECT_EQ(segs[i].payload_len, 0u);
        EXPECT_EQ(segs[i].msg_len, len[i]);
    }
    EXPECT_EQ(r.unanswered(), 4u);
}

TEST(Requester, MsnNumbersReceiveConsumingMessages) {
    Requester r(16, kMtu, 0xffffffffu, 4);
    StreamSender s(0);
    r.post(Op::Write, 1500, false);    // not RECV: carries the next one's number
    r.post(Op::Send, 1500, false);     // 0xffffffff
    r.post(Op::ReadReq, 10, false);    // 0
    r.post(Op::WriteImm, 10, false);   // 0
    r.post(Op::SendInv, 10, false);    // 1
    r.post(Op::FetchAdd, 8, false);    // 2
    r.post(std::nullopt, 0, false);    // local: 2
    r.post(Op::SendImm, 2000, false);  // 2
    r.post(Op::Write, 10, false);      // 3
    const auto segs = drain(r, s);
    const uint32_t msn[] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0, 0,
                            1,           2,           2,           2,           2, 3};
    ASSERT_EQ(segs.size(), std::size(msn));
    for (size_t i = 0; i < segs.size(); ++i) EXPECT_EQ(segs[i].msn, msn[i]) << i;
}

TEST(Requester, EntriesAreFreedByCompletionAndRefusesResponseOpcodes) {
    Requester r(2, kMtu, 0, 4);
    StreamSender s(0);
    EXPECT_EQ(r.post(Op::ReadResp, 10, false), std::nullopt);
    EXPECT_EQ(r.post(Op::AtomicResp, 8, false), std::nullopt);
    EXPECT_EQ(r.post(Op::Nak, 0, false), std::nullopt);
    EXPECT_EQ(r.post(Op::Send, 10, false), 0u);
    EXPECT_EQ(r.post(Op::Send, 10, false), 1u);
    EXPECT_EQ(r.post(Op::Send, 10, false), std::nullopt);
    EXPECT_EQ(r.posted(), 2u);
    const auto segs = drain(r, s);
    ASSERT_EQ(segs.size(), 2u);
    deliver_all(r, s, segs);
    EXPECT_EQ(r.post(Op::Send, 10, false), std::nullopt);  // complete, but not yet completed
    EXPECT_EQ(r.next_completion(), 0u);
    EXPECT_EQ(r.post(Op::Send, 10, false), 2u);
    EXPECT_EQ(r.next_completion(), 1u);
    EXPECT_EQ(r.next_completion(), std::nullopt);
    EXPECT_EQ(r.completed(), 2u);

    Requester none(0, kMtu, 0, 4);
    EXPECT_EQ(none.post(Op::Send, 10, false), std::nullopt);
    EXPECT_EQ(none.next(s), std::nullopt);
}

TEST(Requester, SendsCompleteWhenEverySegmentIsDeliveredInPostingOrder) {
    Requester r(8, kMtu, 0, 4);
    StreamSender s(0);
    r.post(Op::Send, 2001, false);  // ssn 0-2
    r.post(Op::Write, 10, false);   // ssn 3
    drain(r, s);
    EXPECT_TRUE(s.on_acked(3));
    r.delivered(3);
    EXPECT_EQ(r.next_completion(), std::nullopt);  // the older one is not complete
    for (uint32_t ssn : {2u, 0u}) {
        EXPECT_TRUE(s.on_acked(ssn));
        r.delivered(ssn);
        EXPECT_EQ(r.next_completion(), std::nullopt);
    }
    EXPECT_TRUE(s.on_acked(1));
    r.delivered(1);
    EXPECT_EQ(r.next_completion(), 0u);
    EXPECT_EQ(r.next_completion(), 1u);
    EXPECT_EQ(r.next_completion(), std::nullopt);
}

TEST(Requester, LocalOperationRunsAtTheSendPointAndCompletesInOrder) {
    Requester r(8, kMtu, 0, 1);
    StreamSender s(0);
    r.post(Op::ReadReq, 10, false);
    r.post(Op::ReadReq, 10, false);  // waits for max_rd_atomic 1
    r.post(std::nullopt, 77, false);
    auto a = r.next(s);
    ASSERT_TRUE(a && !a->local);
    EXPECT_EQ(r.next(s), std::nullopt);  // the local operation is behind the waiting READ
    answer(r, *a);
    auto b = r.next(s);
    ASSERT_TRUE(b && !b->local);
    auto l = r.next(s);
    ASSERT_TRUE(l && l->local);
    EXPECT_EQ(l->wr, 2u);
    EXPECT_EQ(l->msg_len, 77u);
    EXPECT_EQ(l->ssn, s.next_ssn());  // it took no SSN
    EXPECT_EQ(r.next(s), std::nullopt);
    EXPECT_EQ(r.next_completion(), 0u);
    EXPECT_EQ(r.next_completion(), std::nullopt);  // the local one waits for the READ before it
    answer(r, *b);
    EXPECT_EQ(r.next_completion(), 1u);
    EXPECT_EQ(r.next_completion(), 2u);
}

TEST(Requester, MaxRdAtomicHoldsTheRequestAndEverythingAfterIt) {
    Requester r(8, kMtu, 0, 2);
    StreamSender s(0);
    r.post(Op::ReadReq, 10, false);
    r.post(Op::FetchAdd, 8, false);
    r.post(Op::CmpSwp, 8, false);
    r.post(Op::Send, 10, false);
    auto segs = drain(r, s);
    ASSERT_EQ(segs.size(), 2u);
    EXPECT_EQ(r.unanswered(), 2u);
    // Delivery of the requests does not free a slot: only their answers do.
    deliver_all(r, s, segs);
    EXPECT_EQ(r.next(s), std::nullopt);
    // A partial answer does not either.
    uint32_t wr = 0;
    ASSERT_EQ(r.response(Op::ReadResp, segs[0].ssn, 0, 10, 4, &wr), RespVerdict::Ok);
    r.answered(wr, 4);
    EXPECT_EQ(r.next(s), std::nullopt);
    ASSERT_EQ(r.response(Op::ReadResp, segs[0].ssn, 4, 10, 6, &wr), RespVerdict::Ok);
    r.answered(wr, 6);
    auto more = drain(r, s);
    ASSERT_EQ(more.size(), 2u);
    EXPECT_EQ(more[0].op, Op::CmpSwp);
    EXPECT_EQ(more[1].op, Op::Send);

    Requester big(300, kMtu, 0, 1000);  // clamped to 128
    StreamSender t(0);
    for (int i = 0; i < 200; ++i) big.post(Op::ReadReq, 1, false);
    EXPECT_EQ(drain(big, t).size(), 128u);
}

TEST(Requester, FenceWaitsForEveryEarlierReadAndAtomicToBeAnswered) {
    Requester r(8, kMtu, 0, 8);
    StreamSender s(0);
    r.post(Op::ReadReq, 10, false);
    r.post(Op::Send, 10, false);  // unfenced: goes
    r.post(Op::FetchAdd, 8, false);
    r.post(Op::Write, 10, true);    // fenced: waits for both requests
    r.post(std::nullopt, 0, true);  // a fenced local operation too
    auto segs = drain(r, s);
    ASSERT_EQ(segs.size(), 3u);
    answer(r, segs[2]);  // the later one answered first: the READ still holds the fence
    EXPECT_EQ(r.next(s), std::nullopt);
    answer(r, segs[0]);
    auto w = r.next(s);
    ASSERT_TRUE(w);
    EXPECT_EQ(w->op, Op::Write);
    auto l = r.next(s);
    ASSERT_TRUE(l && l->local);

    // A fence after only SENDs and WRITEs does not wait for their delivery.
    Requester q(8, kMtu, 0, 8);
    StreamSender u(0);
    q.post(Op::Send, 10, false);
    q.post(Op::Write, 10, true);
    EXPECT_EQ(drain(q, u).size(), 2u);
    // Only a message's first segment waits for its fence.
    Requester f(8, kMtu, 0, 8);
    StreamSender t(0);
    f.post(Op::Write, 3000, true);
    EXPECT_EQ(drain(f, t).size(), 3u);
}

TEST(Requester, WaitsForTheStreamWindow) {
    Requester r(8, 1, 0, 8);
    StreamSender s(0);
    r.post(Op::Write, 5000, false);
    r.post(Op::ReadReq, 1, false);
    auto segs = drain(r, s);
    EXPECT_EQ(segs.size(), kStreamWindow);
    EXPECT_TRUE(s.on_acked(0));
    r.delivered(0);
    auto more = drain(r, s);
    ASSERT_EQ(more.size(), 1u);
    EXPECT_EQ(more[0].offset, kStreamWindow);
    deliver_all(r, s, segs);
    deliver_all(r, s, more);
    more = drain(r, s);
    ASSERT_EQ(more.size(), 5000u - 4096u + 1u);
    EXPECT_EQ(more.back().op, Op::ReadReq);
    EXPECT_EQ(more.back().ssn, 5000u);
}

TEST(Requester, ResponsesAreMatchedByTheRequestsSsn) {
    Requester r(8, kMtu, 0, 8);
    StreamSender s(100);
    r.post(Op::ReadReq, 2500, false);  // ssn 100
    r.post(Op::CmpSwp, 8, false);      // ssn 101
    r.post(Op::Send, 10, false);       // ssn 102
    r.post(Op::ReadReq, 0, false);     // ssn 103
    drain(r, s);
    uint32_t wr = 99;
    // Naming no request waiting: a SEND, an SSN never opened.
    EXPECT_EQ(r.response(Op::ReadResp, 102, 0, 10, 10, &wr), RespVerdict::Unknown);
    EXPECT_EQ(r.response(Op::ReadResp, 104, 0, 10, 10, &wr), RespVerdict::Unknown);
    // The wrong opcode, length or bytes.
    EXPECT_EQ(r.response(Op::AtomicResp, 100, 0, 2500, 8, &wr), RespVerdict::Bad);
    EXPECT_EQ(r.response(Op::ReadResp, 100, 0, 2400, 1000, &wr), RespVerdict::Bad);
    EXPECT_EQ(r.response(Op::ReadResp, 100, 2000, 2500, 501, &wr), RespVerdict::Bad);
    EXPECT_EQ(r.response(Op::ReadResp, 100, 0xffffffffu, 2500, 2, &wr), RespVerdict::Bad);
    EXPECT_EQ(r.response(Op::ReadResp, 100, 0, 2500, 0, &wr), RespVerdict::Bad);
    EXPECT_EQ(r.response(Op::ReadResp, 101, 0, 8, 8, &wr), RespVerdict::Bad);
    EXPECT_EQ(r.response(Op::AtomicResp, 101, 0, 16, 8, &wr), RespVerdict::Bad);
    EXPECT_EQ(r.response(Op::Send, 101, 0, 8, 8, &wr), RespVerdict::Bad);
    EXPECT_EQ(r.response(Op::ReadResp, 103, 1, 0, 0, &wr), RespVerdict::Bad);
    EXPECT_EQ(wr, 99u);
    EXPECT_EQ(r.bad_responses(), 11u);
    // A NAK is not this class's to match, and not a refusal.
    EXPECT_EQ(r.response(Op::Nak, 100, 0, 0, 0, &wr), RespVerdict::Unknown);
    EXPECT_EQ(r.bad_responses(), 11u);

    EXPECT_EQ(r.response(Op::AtomicResp, 101, 0, 8, 8, &wr), RespVerdict::Ok);
    EXPECT_EQ(wr, 1u);
    r.answered(1, 8);
    r.answered(1, 8);  // again: ignored
    EXPECT_EQ(r.unanswered(), 2u);
    // Answered: no longer waiting.
    EXPECT_EQ(r.response(Op::AtomicResp, 101, 0, 8, 8, &wr), RespVerdict::Unknown);
    EXPECT_EQ(r.response(Op::ReadResp, 103, 0, 0, 0, &wr), RespVerdict::Ok);
    EXPECT_EQ(wr, 3u);
    r.answered(3, 0);  // an empty READ: its one empty segment
    for (uint32_t off : {2000u, 0u, 1000u}) {
        EXPECT_EQ(r.response(Op::ReadResp, 100, off, 2500, std::min(1000u, 2500 - off), &wr),
                  RespVerdict::Ok);
        EXPECT_EQ(wr, 0u);
        EXPECT_EQ(r.unanswered(), 1u);
        r.answered(0, std::min(1000u, 2500 - off));
    }
    EXPECT_EQ(r.unanswered(), 0u);
    // READ and atomic complete on their answers, not on the delivery of their requests.
    EXPECT_EQ(r.next_completion(), 0u);
    EXPECT_EQ(r.next_completion(), 1u);
    EXPECT_EQ(r.next_completion(), std::nullopt);  // the SEND is not delivered
    r.answered(0, 100);                            // after completion: ignored
    r.answered(7, 100);                            // never posted: ignored
    EXPECT_TRUE(s.on_acked(102));
    r.delivered(102);
    EXPECT_EQ(r.next_completion(), 2u);
    EXPECT_EQ(r.next_completion(), 3u);
    EXPECT_EQ(r.bad_responses(), 12u);
}

TEST(Requester, ResendCarriesWhatTheSegmentCarried) {
    Requester r(8, kMtu, 7, 8);
    StreamSender s(0);
    r.post(Op::SendImm, 2500, false);
    r.post(std::nullopt, 0, false);
    r.post(Op::ReadReq, 50, false);
    const auto segs = drain(r, s);
    ASSERT_EQ(segs.size(), 5u);
    for (const SegmentOut& seg : segs) {
        if (seg.local) continue;
        auto again = r.resend(seg.ssn);
        ASSERT_TRUE(again);
        EXPECT_EQ(again->wr, seg.wr);
        EXPECT_EQ(again->op, seg.op);
        EXPECT_EQ(again->ssn, seg.ssn);
        EXPECT_EQ(again->msn, seg.msn);
        EXPECT_EQ(again->offset, seg.offset);
        EXPECT_EQ(again->payload_len, seg.payload_len);
        EXPECT_EQ(again->msg_len, seg.msg_len);
    }
    EXPECT_EQ(r.resend(4), std::nullopt);  // not opened
    // The READ answered and completed while its request is undelivered: still resendable.
    deliver_all(r, s, {segs[0], segs[1], segs[2]});
    answer(r, segs[4]);
    EXPECT_EQ(r.next_completion(), 0u);
    EXPECT_EQ(r.next_completion(), 1u);
    EXPECT_EQ(r.next_completion(), 2u);
    EXPECT_EQ(r.resend(0), std::nullopt);  // delivered and completed
    auto req = r.resend(3);
    ASSERT_TRUE(req);
    EXPECT_EQ(req->op, Op::ReadReq);
    EXPECT_EQ(req->wr, 2u);
    EXPECT_EQ(req->msg_len, 50u);
    EXPECT_TRUE(s.on_acked(3));
    r.delivered(3);
    EXPECT_EQ(r.resend(3), std::nullopt);
}

TEST(Requester, ResendSkipsOtherSegmentsOfTheStream) {
    // The stream also carries this end's responses: SSNs between messages are not ours.
    Requester r(8, kMtu, 0, 8);
    StreamSender s(0);
    r.post(Op::Send, 1500, false);
    drain(r, s);  // 0, 1
    s.open();     // 2: a response of ours to the peer
    r.post(std::nullopt, 0, false);
    r.post(Op::Write, 10, false);
    drain(r, s);  // local, 3
    EXPECT_TRUE(r.resend(1));
    EXPECT_EQ(r.resend(2), std::nullopt);
    ASSERT_TRUE(r.resend(3));
    EXPECT_EQ(r.resend(3)->wr, 2u);
    EXPECT_EQ(r.resend(0xffffffffu), std::nullopt);
}

// Random work, losses, resends and responses (with strays and bad ones): every work request
// completes exactly once, in posting order, only when it is complete; fences and max_rd_atomic
// hold; next() waits only when a rule makes it.
TEST(RequesterProperty, RandomWorkCompletesInOrder) {
    for (uint32_t seed = 1; seed <= 40; ++seed) {
        SCOPED_TRACE(seed);
        std::mt19937 rng(seed);
        auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
        const uint32_t mtu = 1 + pick(600);
        const uint32_t max_reqs = 1 + pick(6);
        const uint32_t num_wrs = 1 + pick(40);
        const uint32_t first_ssn = rng(), first_msn = rng();
        Requester r(num_wrs, mtu, first_msn, max_reqs);
        StreamSender s(first_ssn);

        struct Model {
            std::optional<Op> op;
            uint32_t length = 0;
            bool fence = false;
            uint32_t segments = 0, opened = 0, delivered = 0;
            uint32_t req_ssn = 0;
            uint64_t answered_bytes = 0;
            bool answered = false, ran = false, completed = false;
        };
        std::vector<Model> wrs;
        uint32_t next_completion = 0, send_point = 0, unanswered = 0;
        uint32_t expect_msn = first_msn, expect_ssn = first_ssn;
        std::map<uint32_t, SegmentOut> out;  // by SSN: what each segment carried when new
        std::vector<uint32_t> in_flight;     // SSNs sent, not yet acked or lost
        // Response segments yet to arrive: (wr, request ssn, offset, length).
        struct Resp {
            uint32_t wr, ssn, offset, len;
        };
        std::vector<Resp> responses;
        std::set<uint32_t> answered_reqs;  // request SSNs whose responses were generated
        const Op ops[] = {Op::Send,     Op::SendImm, Op::SendInv, Op::Write,
                          Op::WriteImm, Op::ReadReq, Op::CmpSwp,  Op::FetchAdd};
        const int steps = 10000;
        for (int step = 0; step < steps + 200000; ++step) {
            const bool draining = step >= steps;
            if (draining && r.completed() == r.posted()) break;
            const uint32_t what = pick(10);
            if (what == 0 && !draining) {
                std::optional<Op> op;
                if (pick(10) != 0) op = ops[pick(8)];
                const uint32_t length = pick(4) == 0 ? 0 : pick(3 * mtu + 2);
                const bool fence = pick(5) == 0;
                const auto wr = r.post(op, length, fence);
                const uint32_t in_use = static_cast<uint32_t>(wrs.size()) - next_completion;
                if (in_use == num_wrs) {
                    ASSERT_EQ(wr, std::nullopt);
                    continue;
                }
                ASSERT_EQ(wr, wrs.size());
                Model m{.op = op, .length = length, .fence = fence};
                if (op && !is_request(*op))
                    m.segments = std::max(1u, (length + mtu - 1) / mtu);
                else if (op)
                    m.segments = 1;
                if (op && *op != Op::ReadReq && is_request(*op)) m.length = 8;
                wrs.push_back(m);
            } else if (what <= 2) {
                // next(): check what it gives against the rules, and that it waits only by one.
                const auto seg = r.next(s);
                if (!seg) {
                    if (send_point == wrs.size()) continue;
                    const Model& m = wrs[send_point];
                    const bool fenced = m.opened == 0 && m.fence && unanswered > 0;
                    const bool limited =
                        m.opened == 0 && m.op && is_request(*m.op) && unanswered >= max_reqs;
                    const bool window = m.op && !s.can_open();
                    ASSERT_TRUE(fenced || limited || window) << "next() waited for nothing";
                    continue;
                }
                ASSERT_EQ(seg->wr, send_point);
                Model& m = wrs[send_point];
                if (m.opened == 0 && m.fence) {
                    ASSERT_EQ(unanswered, 0u);
                }
                ASSERT_EQ(seg->local, !m.op);
                if (seg->local) {
                    m.ran = true;
                    ++send_point;
                    continue;
                }
                ASSERT_EQ(seg->op, *m.op);
                ASSERT_EQ(seg->ssn, expect_ssn++);
                ASSERT_EQ(seg->msg_len, m.length);
                ASSERT_EQ(seg->msn, expect_msn);
                if (is_request(*m.op)) {
                    ASSERT_LT(unanswered, max_reqs);
                    ++unanswered;
                    m.req_ssn = seg->ssn;
                    ASSERT_EQ(seg->payload_len, 0u);
                } else {
                    ASSERT_EQ(seg->offset, uint64_t{m.opened} * mtu);
                    ASSERT_EQ(seg->payload_len, std::min(mtu, m.length - seg->offset));
                }
                if (++m.opened == m.segments) {
                    ++send_point;
                    if (consumes_recv(*m.op)) ++expect_msn;
                }
                out[seg->ssn] = *seg;
                in_flight.push_back(seg->ssn);
                s.on_sent(seg->ssn);
            } else if (what <= 4 && !in_flight.empty()) {
                // A transmission arrives (acked) or is lost.
                const uint32_t k = pick(static_cast<uint32_t>(in_flight.size()));
                const uint32_t ssn = in_flight[k];
                in_flight.erase(in_flight.begin() + k);
                const SegmentOut& seg = out.at(ssn);
                if (seg.op == Op::ReadReq || seg.op == Op::CmpSwp || seg.op == Op::FetchAdd) {
                    // The responder took it: it answers even if the ACK is then lost.
                    if (answered_reqs.insert(ssn).second) {
                        uint32_t off = 0;
                        do {
                            const uint32_t len = std::min(mtu, seg.msg_len - off);
                            responses.push_back({seg.wr, ssn, off, len});
                            off += len;
                        } while (off < seg.msg_len);
                    }
                }
                if (pick(4) == 0 && !draining) {
                    s.on_lost(ssn, 0);
                } else if (s.on_acked(ssn)) {
                    r.delivered(ssn);
                    ++wrs[seg.wr].delivered;
                }
            } else if (what == 5) {
                // A resend: it carries what the first transmission did.
                const auto again = s.next_resend();
                if (!again) continue;
                const auto seg = r.resend(again->first);
                ASSERT_TRUE(seg) << again->first;
                const SegmentOut& was = out.at(again->first);
                ASSERT_EQ(seg->wr, was.wr);
                ASSERT_EQ(seg->op, was.op);
                ASSERT_EQ(seg->msn, was.msn);
                ASSERT_EQ(seg->offset, was.offset);
                ASSERT_EQ(seg->payload_len, was.payload_len);
                ASSERT_EQ(seg->msg_len, was.msg_len);
                in_flight.push_back(again->first);
                s.on_sent(again->first);
            } else if (what <= 7 && !responses.empty()) {
                // A response segment arrives, in any order.
                const uint32_t k = pick(static_cast<uint32_t>(responses.size()));
                const Resp resp = responses[k];
                responses.erase(responses.begin() + k);
                Model& m = wrs[resp.wr];
                const Op op = *m.op == Op::ReadReq ? Op::ReadResp : Op::AtomicResp;
                uint32_t wr = ~0u;
                ASSERT_EQ(r.response(op, resp.ssn, resp.offset, m.length, resp.len, &wr),
                          RespVerdict::Ok)
                    << resp.wr << " ssn " << resp.ssn << " off " << resp.offset << " len "
                    << resp.len << " of " << m.length << " answered " << m.answered << " bytes "
                    << m.answered_bytes << " unanswered " << r.unanswered();
                ASSERT_EQ(wr, resp.wr);
                r.answered(wr, resp.len);
                m.answered_bytes += resp.len;
                if (!m.answered && m.answered_bytes >= m.length) {
                    m.answered = true;
                    --unanswered;
                }
                if (m.answered && pick(4) == 0) r.answered(wr, 1 + pick(mtu));  // late: ignored
            } else if (what == 8 && !draining) {
                // A stray or malformed response is refused and changes nothing.
                const uint64_t bad = r.bad_responses();
                uint32_t wr = 12345;
                const uint32_t ssn = pick(2) ? rng() : expect_ssn - 1 - pick(8);
                bool waiting = false;
                for (const Model& m : wrs)
                    if (m.op && is_request(*m.op) && m.opened && !m.answered && m.req_ssn == ssn)
                        waiting = true;
                const auto v = r.response(pick(2) ? Op::ReadResp : Op::AtomicResp, ssn, 0,
                                          0xfffffff0u, 1 + pick(mtu), &wr);
                ASSERT_EQ(v, waiting ? RespVerdict::Bad : RespVerdict::Unknown);
                ASSERT_EQ(wr, 12345u);
                ASSERT_EQ(r.bad_responses(), bad + 1);
            } else {
                const auto c = r.next_completion();
                if (next_completion == wrs.size()) {
                    ASSERT_EQ(c, std::nullopt);
                    continue;
                }
                const Model& m = wrs[next_completion];
                const bool done = !m.op               ? m.ran
                                  : is_request(*m.op) ? m.answered
                                                      : m.delivered == m.segments;
                ASSERT_EQ(c.has_value(), done) << next_completion;
                if (c) {
                    ASSERT_EQ(*c, next_completion);
                    wrs[next_completion++].completed = true;
                }
            }
        }
        ASSERT_EQ(r.completed(), r.posted());
        ASSERT_EQ(r.posted(), wrs.size());
        ASSERT_EQ(next_completion, wrs.size());
        ASSERT_EQ(r.unanswered(), 0u);
        ASSERT_EQ(r.next_completion(), std::nullopt);
    }
}

}  // namespace
}  // namespace softmetaroce::v2
