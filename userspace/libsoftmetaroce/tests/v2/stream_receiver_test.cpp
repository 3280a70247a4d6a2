// Sections 8.1 and 9: a stream's receiving end, rule by rule.
#include "softmetaroce/v2/stream_receiver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "softmetaroce/sim/rng.h"

namespace softmetaroce::v2 {
namespace {

using Opt = std::optional<uint32_t>;

Segment send(uint32_t ssn, uint32_t msn, uint32_t offset, uint32_t len, uint32_t payload) {
    return Segment{Op::Send, ssn, msn, offset, len, payload};
}
Segment write(uint32_t ssn, uint32_t next_msn, uint32_t offset, uint32_t len, uint32_t payload) {
    return Segment{Op::Write, ssn, next_msn, offset, len, payload};
}
Segment read_req(uint32_t ssn, uint32_t next_msn) {
    return Segment{Op::ReadReq, ssn, next_msn, 0, 65536, 0};
}

// check() then accept(), as a caller with every resource would.
void take(StreamReceiver& rx, const Segment& s) {
    ASSERT_EQ(rx.check(s), SegVerdict::Take) << s.ssn;
    rx.accept(s);
}

TEST(StreamReceiver, ASendCompletesWhenCumPassesItsLastSegment) {
    StreamReceiver rx(100, 7, kMaxRequests);
    take(rx, send(100, 7, 0, 2500, 1024));
    take(rx, send(101, 7, 1024, 2500, 1024));
    EXPECT_EQ(rx.next_completion(), Opt{});
    EXPECT_EQ(rx.cum(), 102u);
    take(rx, send(102, 7, 2048, 2500, 452));  // offset + payload = length: the last
    EXPECT_EQ(rx.next_completion(), Opt{7});
    EXPECT_EQ(rx.next_completion(), Opt{});  // once
    EXPECT_EQ(rx.accepted(), 3u);
}

// Section 9.1: the peer answered our READ from RTR, so its stream starts at our own first SSN
// (100000), not at the 100 the connection gave; moved before anything is taken, never after.
TEST(StreamReceiver, AStreamBegunInRtrStartsWhereOursDid) {
    StreamReceiver rx(100, 0, kMaxRequests);
    EXPECT_EQ(rx.check(Segment{Op::ReadResp, 100001, 7, 1024, 2048, 1024}), SegVerdict::Beyond);
    EXPECT_TRUE(rx.rebase(100000));
    EXPECT_EQ(rx.cum(), 100000u);
    take(rx, Segment{Op::ReadResp, 100001, 7, 1024, 2048, 1024});
    take(rx, Segment{Op::ReadResp, 100000, 7, 0, 2048, 1024});
    EXPECT_EQ(rx.cum(), 100002u);
    EXPECT_FALSE(rx.rebase(100000));
    EXPECT_EQ(rx.cum(), 100002u);
}

TEST(StreamReceiver, ALastSegmentArrivingFirstWaitsForTheRest) {
    StreamReceiver rx(0, 0, kMaxRequests);
    take(rx, send(2, 0, 2048, 3000, 952));
    take(rx, send(0, 0, 0, 3000, 1024));
    EXPECT_EQ(rx.cum(), 1u);
    EXPECT_EQ(rx.next_completion(), Opt{});
    take(rx, send(1, 0, 1024, 3000, 1024));
    EXPECT_EQ(rx.cum(), 3u);
    EXPECT_EQ(rx.next_completion(), Opt{0});
}

TEST(StreamReceiver, AnEmptySendIsOneSegmentAndItsOwnLast) {
    StreamReceiver rx(0, 0, kMaxRequests);
    take(rx, send(0, 0, 0, 0, 0));
    EXPECT_EQ(rx.next_completion(), Opt{0});
}

TEST(StreamReceiver, CompletionsAreInMsnOrderBehindEarlierSegments) {
    StreamReceiver rx(0, 0, kMaxRequests);
    // A WRITE (0-1), SEND msn 0 (2), WRITE_IMM msn 1 (3), SEND msn 2 (4).
    take(rx, Segment{Op::SendImm, 4, 2, 0, 10, 10});
    take(rx, Segment{Op::WriteImm, 3, 1, 0, 10, 10});
    take(rx, send(2, 0, 0, 10, 10));
    EXPECT_EQ(rx.next_completion(), Opt{});  // the WRITE before them is not placed yet
    take(rx, write(1, 0, 1024, 2048, 1024));
    EXPECT_EQ(rx.next_completion(), Opt{});
    take(rx, write(0, 0, 0, 2048, 1024));
    EXPECT_EQ(rx.cum(), 5u);
    EXPECT_EQ(rx.next_completion(), Opt{0});
    EXPECT_EQ(rx.next_completion(), Opt{1});
    EXPECT_EQ(rx.next_completion(), Opt{2});
    EXPECT_EQ(rx.next_completion(), Opt{});
}

TEST(StreamReceiver, AWriteCompletesNothing) {
    StreamReceiver rx(0, 3, kMaxRequests);
    take(rx, write(0, 3, 0, 100, 100));
    EXPECT_EQ(rx.next_completion(), Opt{});
    EXPECT_EQ(rx.next_request(), Opt{});
    take(rx, Segment{Op::SendInv, 1, 3, 0, 0, 0});
    EXPECT_EQ(rx.next_completion(), Opt{3});
}

TEST(StreamReceiver, ASegmentAcceptedIsADuplicateBelowCumAndInTheMap) {
    StreamReceiver rx(0xfffffffeu, 0, kMaxRequests);  // across the wrap
    take(rx, write(0xfffffffeu, 0, 0, 10, 10));
    take(rx, write(1, 0, 0, 10, 10));
    EXPECT_EQ(rx.check(write(0xfffffffeu, 0, 0, 10, 10)), SegVerdict::Duplicate);  // below cum
    EXPECT_EQ(rx.check(write(1, 0, 0, 10, 10)), SegVerdict::Duplicate);            // in the map
    EXPECT_EQ(rx.check(write(0xffffffffu, 0, 0, 10, 10)), SegVerdict::Take);
    EXPECT_EQ(rx.duplicates(), 2u);
    // Accepting what check() would not take changes nothing.
    rx.accept(write(1, 0, 0, 10, 10));
    EXPECT_EQ(rx.accepted(), 2u);
    EXPECT_EQ(rx.cum(), 0xffffffffu);
}

TEST(StreamReceiver, TheMapNamesCumToCumPlus4095) {
    StreamReceiver rx(0xfffff000u, 0, kMaxRequests);
    EXPECT_EQ(rx.check(write(0xfffff000u + 4095, 0, 0, 1, 1)), SegVerdict::Take);
    EXPECT_EQ(rx.check(write(0xfffff000u + 4096, 0, 0, 1, 1)), SegVerdict::Beyond);
    EXPECT_EQ(rx.beyond(), 1u);
    take(rx, read_req(0xfffff000u + 4095, 0));
    take(rx, read_req(0xfffff000u, 0));
    EXPECT_EQ(rx.cum(), 0xfffff001u);
    EXPECT_EQ(rx.next_request(), Opt{0xfffff000u});
    EXPECT_EQ(rx.next_request(), Opt{});
    EXPECT_EQ(rx.check(write(0xfffff000u + 4096, 0, 0, 1, 1)), SegVerdict::Take);
}

TEST(StreamReceiver, ARecvSegmentsMsnMustNameAReceiveSlot) {
    StreamReceiver rx(0, 10, kMaxRequests);
    EXPECT_EQ(rx.check(send(0, 9, 0, 1, 1)), SegVerdict::Beyond);  // before the oldest
    EXPECT_EQ(rx.check(send(0, 10 + kRecvSlots - 1, 0, 1, 1)), SegVerdict::Take);
    EXPECT_EQ(rx.check(send(0, 10 + kRecvSlots, 0, 1, 1)), SegVerdict::Beyond);
    // Segments that consume no receive WQE do not use their MSN.
    EXPECT_EQ(rx.check(write(0, 10 + kRecvSlots, 0, 1, 1)), SegVerdict::Take);
    EXPECT_EQ(rx.check(Segment{Op::ReadResp, 0, 12345, 0, 1, 1}), SegVerdict::Take);
    EXPECT_EQ(rx.beyond(), 2u);
    // The window moves with completion.
    take(rx, send(0, 10, 0, 1, 1));
    EXPECT_EQ(rx.check(send(1, 10 + kRecvSlots, 0, 1, 1)), SegVerdict::Take);
    EXPECT_EQ(rx.check(send(1, 10, 0, 1, 1)), SegVerdict::Beyond);  // completed already
}

TEST(StreamReceiver, RequestsRunInSsnOrderOnceCumPassesThem) {
    StreamReceiver rx(0, 0, kMaxRequests);
    take(rx, Segment{Op::FetchAdd, 3, 0, 0, 8, 0});
    take(rx, read_req(1, 0));
    EXPECT_EQ(rx.next_request(), Opt{});  // 0 (a WRITE) is not placed yet
    take(rx, write(0, 0, 0, 5, 5));
    EXPECT_EQ(rx.next_request(), Opt{1});
    EXPECT_EQ(rx.next_request(), Opt{});  // 2 is missing
    take(rx, Segment{Op::CmpSwp, 2, 0, 0, 8, 0});
    EXPECT_EQ(rx.next_request(), Opt{2});
    EXPECT_EQ(rx.next_request(), Opt{3});
    EXPECT_EQ(rx.next_request(), Opt{});
    // A resent request is a duplicate, never run twice.
    EXPECT_EQ(rx.check(read_req(1, 0)), SegVerdict::Duplicate);
    EXPECT_EQ(rx.next_request(), Opt{});
}

TEST(StreamReceiver, RequestSlotsFillUntilRequestsAreHandedOut) {
    StreamReceiver rx(0, 0, 2);
    EXPECT_FALSE(rx.requests_full(5));
    take(rx, read_req(2, 0));
    take(rx, read_req(1, 0));
    EXPECT_TRUE(rx.requests_full(5));  // queued, waiting for 0
    take(rx, write(0, 0, 0, 1, 1));
    EXPECT_TRUE(rx.requests_full(5));  // their turn has come, not yet taken by the caller
    EXPECT_EQ(rx.next_request(), Opt{1});
    EXPECT_FALSE(rx.requests_full(5));
    EXPECT_EQ(rx.next_request(), Opt{2});
}

// A request that a later one overtook is taken whatever the limit: the later one runs only after
// it, so refusing it would hold the stream for good.
TEST(StreamReceiver, ARequestBeforeAQueuedOneIsAlwaysTaken) {
    StreamReceiver rx(0, 0, 1);
    take(rx, read_req(1, 0));
    EXPECT_TRUE(rx.requests_full(2));
    EXPECT_FALSE(rx.requests_full(0));
    take(rx, read_req(0, 0));
    EXPECT_EQ(rx.next_request(), Opt{0});
    EXPECT_EQ(rx.next_request(), Opt{1});
}

TEST(StreamReceiver, ARefusalRefusesEveryLaterSegmentUntilItIsTaken) {
    StreamReceiver rx(0, 0, kMaxRequests);
    take(rx, write(0, 0, 0, 1, 1));
    EXPECT_EQ(rx.check(send(3, 0, 0, 1, 1)), SegVerdict::Take);
    EXPECT_TRUE(rx.refuse(3));  // no receive WQE: one NAK
    EXPECT_TRUE(rx.refusing());
    EXPECT_EQ(rx.cum(), 1u);  // recorded nowhere
    EXPECT_EQ(rx.check(write(4, 1, 0, 1, 1)), SegVerdict::Refuse);
    EXPECT_EQ(rx.check(read_req(5, 1)), SegVerdict::Refuse);
    EXPECT_EQ(rx.check(Segment{Op::ReadResp, 6, 0, 0, 1, 1}), SegVerdict::Refuse);
    EXPECT_EQ(rx.check(Segment{Op::Nak, 6, 0, 0, 0, 0}), SegVerdict::Take);  // never refused
    EXPECT_EQ(rx.refused(), 4u);
    // Earlier segments are not behind the refusal point: still taken.
    take(rx, write(2, 0, 0, 1, 1));
    take(rx, write(1, 0, 0, 1, 1));
    EXPECT_EQ(rx.cum(), 3u);
    EXPECT_TRUE(rx.refusing());
    // Its resend is refused again: another NAK (the requester counts it against rnr_retry).
    ASSERT_EQ(rx.check(send(3, 0, 0, 1, 1)), SegVerdict::Take);
    EXPECT_TRUE(rx.refuse(3));
    // Then taken: the refusal ends.
    take(rx, send(3, 0, 0, 1, 1));
    EXPECT_FALSE(rx.refusing());
    EXPECT_EQ(rx.next_completion(), Opt{0});
    take(rx, write(4, 1, 0, 1, 1));
    EXPECT_EQ(rx.refused(), 5u);
}

TEST(StreamReceiver, OneNakPerRefusalPoint) {
    StreamReceiver rx(0, 0, kMaxRequests);
    ASSERT_EQ(rx.check(send(5, 1, 0, 1, 1)), SegVerdict::Take);
    EXPECT_TRUE(rx.refuse(5));
    // A later segment the caller refuses anyway is behind the same point: no NAK of its own.
    EXPECT_FALSE(rx.refuse(7));
    // An earlier one refused is a new point: it must be resent and taken first.
    ASSERT_EQ(rx.check(send(2, 0, 0, 1, 1)), SegVerdict::Take);
    EXPECT_TRUE(rx.refuse(2));
    EXPECT_EQ(rx.check(send(5, 1, 0, 1, 1)), SegVerdict::Refuse);
    take(rx, send(2, 0, 0, 1, 1));
    EXPECT_FALSE(rx.refusing());
    EXPECT_EQ(rx.check(send(5, 1, 0, 1, 1)), SegVerdict::Take);
    EXPECT_EQ(rx.refused(), 4u);
}

TEST(StreamReceiver, WhatWasAcceptedCannotBeRefused) {
    StreamReceiver rx(0, 0, kMaxRequests);
    take(rx, write(0, 0, 0, 1, 1));
    take(rx, write(2, 0, 0, 1, 1));
    EXPECT_FALSE(rx.refuse(0));
    EXPECT_FALSE(rx.refuse(2));
    EXPECT_FALSE(rx.refuse(5000));  // beyond the map
    EXPECT_FALSE(rx.refusing());
    EXPECT_EQ(rx.refused(), 0u);
}

TEST(StreamReceiver, DuplicatesAndBeyondComeBeforeRefusal) {
    StreamReceiver rx(0, 0, kMaxRequests);
    take(rx, write(4, 0, 0, 1, 1));
    ASSERT_EQ(rx.check(send(1, 0, 0, 1, 1)), SegVerdict::Take);
    EXPECT_TRUE(rx.refuse(1));
    EXPECT_EQ(rx.check(write(4, 0, 0, 1, 1)), SegVerdict::Duplicate);
    EXPECT_EQ(rx.check(write(4097, 0, 0, 1, 1)), SegVerdict::Beyond);
    EXPECT_EQ(rx.check(send(3, kRecvSlots, 0, 1, 1)), SegVerdict::Beyond);
    EXPECT_EQ(rx.check(write(3, 0, 0, 1, 1)), SegVerdict::Refuse);
}

// A seeded property test: a conforming peer's stream (SEND, SEND_IMM, WRITE, WRITE_IMM, READ and
// atomic requests, and its answers to our requests) of random lengths cut into segments, kept
// within its 4095-segment window and delivered in random order with copies. The caller posts
// receive WQEs at a random pace and refuses (RNR) a RECV segment with none; it takes completions
// and requests at random times. Whatever the schedule:
//  - every segment is taken exactly once, a copy of a taken one is a duplicate, nothing beyond;
//  - cum is the first SSN not taken;
//  - refusals are exactly those after the refusal point, until the refused segment is taken;
//  - receive-consuming messages complete each once, in MSN order, as soon as cum passes their
//    last segment and not before;
//  - requests come out each once, in SSN order, as soon as cum passes them and not before.
class StreamRxWorld {
  public:
    static constexpr uint32_t kFirstSsn = 0xffffe000u;  // across the wrap
    static constexpr uint32_t kFirstMsn = 0xfffffff0u;

    struct Config {
        uint32_t window;        // the sender's segments out past cum, at most 4095
        uint32_t mtu;           // payload per segment
        uint32_t max_len;       // longest SEND or WRITE
        uint32_t max_requests;  // the responder's request slots
        unsigned dup_pm;        // deliveries that are copies of a taken segment, per mille
        unsigned post_pm;       // steps that post receive WQEs, per mille
    };

    StreamRxWorld(uint64_t seed, Config c)
        : rng_(seed), c_(c), rx_(kFirstSsn, kFirstMsn, c.max_requests) {}

    void run(uint32_t segments) {
        total_ = segments;
        for (uint64_t steps = 0; !done(); ++steps) {
            ASSERT_LT(steps, 50ull * total_) << "no progress";
            open();
            deliver();
            if (::testing::Test::HasFatalFailure()) return;
            if (rng_.below(1000) < c_.post_pm) posted_ += 1 + static_cast<uint32_t>(rng_.below(4));
            if (rng_.below(4) == 0) drain_completions();
            if (rng_.below(4) == 0) drain_requests(rng_.below(3) == 0);
            if (::testing::Test::HasFatalFailure()) return;
        }
        drain_completions();
        drain_requests(true);
        EXPECT_EQ(rx_.cum(), kFirstSsn + static_cast<uint32_t>(segs_.size()));
        EXPECT_EQ(rx_.accepted(), segs_.size());
        EXPECT_EQ(rx_.beyond(), 0u);
        EXPECT_EQ(rx_.duplicates(), dups_);
        EXPECT_EQ(rx_.refused(), refusals_);
        EXPECT_FALSE(rx_.refusing());
        EXPECT_EQ(next_recv_, recv_msgs_.size());
        EXPECT_EQ(next_req_, requests_.size());
    }

    uint64_t refusals() const { return refusals_; }
    uint64_t naks() const { return naks_; }
    uint64_t dups() const { return dups_; }
    size_t requests() const { return requests_.size(); }
    size_t completions() const { return recv_msgs_.size(); }

  private:
    struct RecvMsg {
        uint32_t msn, last;  // last: the index of its last segment
    };

    // At least `total_` segments, the last message whole, all taken.
    bool done() const {
        return segs_.size() >= total_ && cut_.empty() && taken_count_ == segs_.size();
    }

    // The sender opens segments while it stays within its window past cum (its una here, since
    // the receiver takes exactly what it accepts) and, for requests, while it has a slot free.
    void open() {
        while (segs_.size() - cum_ < c_.window) {
            if (cut_.empty() && (segs_.size() >= total_ || !new_message())) return;
            const Segment s = cut_.front();
            cut_.erase(cut_.begin());
            pending_.push_back(static_cast<uint32_t>(segs_.size()));
            segs_.push_back(s);
            taken_.push_back(false);
        }
    }

    // Cuts the next message into cut_; false if a request must wait for a slot.
    bool new_message() {
        const uint32_t ssn = kFirstSsn + static_cast<uint32_t>(segs_.size());
        const uint32_t index = static_cast<uint32_t>(segs_.size());
        const uint64_t kind = rng_.below(10);
        if (kind >= 8) {
            // A conforming requester never has more requests out than the responder's slots.
            if (requests_.size() - handed_out_ >= c_.max_requests) return false;
            const Op op = kind == 8 ? Op::ReadReq : (rng_.below(2) ? Op::CmpSwp : Op::FetchAdd);
            const uint32_t len = op == Op::ReadReq ? static_cast<uint32_t>(rng_.below(1 << 20)) : 8;
            cut_.push_back(Segment{op, ssn, next_msn_, 0, len, 0});
            requests_.push_back(index);
            return true;
        }
        static constexpr Op kData[] = {Op::Send,     Op::SendImm,  Op::SendInv, Op::Write,
                                       Op::WriteImm, Op::ReadResp, Op::Nak,     Op::AtomicResp};
        const Op op = kData[rng_.below(std::size(kData))];
        uint32_t len = static_cast<uint32_t>(rng_.below(c_.max_len + 1));
        if (op == Op::Nak) len = 0;
        if (op == Op::AtomicResp) len = 8;
        const bool recv = consumes_recv(op);
        // RESP segments carry a request's SSN, the others the next receive-consuming MSN.
        const uint32_t msn = is_response(op) ? static_cast<uint32_t>(rng_.next()) : next_msn_;
        uint32_t offset = 0;
        do {
            const uint32_t payload = std::min(c_.mtu, len - offset);
            cut_.push_back(
                Segment{op, ssn + static_cast<uint32_t>(cut_.size()), msn, offset, len, payload});
            offset += payload;
        } while (offset < len);
        if (recv) {
            recv_msgs_.push_back({next_msn_, index + static_cast<uint32_t>(cut_.size()) - 1});
            ++next_msn_;
        }
        return true;
    }

    void deliver() {
        if (pending_.empty() && cum_ == 0) return;
        if (cum_ > 0 && (pending_.empty() || rng_.below(1000) < c_.dup_pm)) {
            // A copy of a taken segment: recently taken, or anywhere before cum.
            const uint32_t back = static_cast<uint32_t>(rng_.below(std::min<uint32_t>(cum_, 64)));
            const uint32_t i = rng_.below(2) ? cum_ - 1 - back : pick_taken();
            ASSERT_TRUE(taken_[i]);
            ASSERT_EQ(rx_.check(segs_[i]), SegVerdict::Duplicate) << i;
            ++dups_;
            return;
        }
        const size_t k = rng_.below(pending_.size());
        const uint32_t i = pending_[k];
        const Segment& s = segs_[i];
        const bool behind = refused_ && s.op != Op::Nak && i > refused_index_;
        const SegVerdict v = rx_.check(s);
        if (behind) {
            ASSERT_EQ(v, SegVerdict::Refuse) << i;
            ++refusals_;
            return;
        }
        ASSERT_EQ(v, SegVerdict::Take) << i;
        if (is_request(s.op)) {
            ASSERT_FALSE(rx_.requests_full(s.ssn)) << "a conforming requester";
        }
        if (consumes_recv(s.op) && s.msn - kFirstMsn >= posted_) {
            // No receive WQE for it: RNR. A NAK when it opens a point, or is the point again.
            const bool nak = rx_.refuse(s.ssn);
            ++refusals_;
            const bool new_point = !refused_ || i <= refused_index_;
            ASSERT_EQ(nak, new_point) << i;
            naks_ += nak;
            if (new_point) {
                refused_ = true;
                refused_index_ = i;
            }
            return;
        }
        rx_.accept(s);
        taken_[i] = true;
        ++taken_count_;
        pending_[k] = pending_.back();
        pending_.pop_back();
        if (refused_ && i == refused_index_) refused_ = false;
        ASSERT_EQ(rx_.refusing(), refused_);
        while (cum_ < segs_.size() && taken_[cum_]) ++cum_;
        ASSERT_EQ(rx_.cum(), kFirstSsn + cum_);
    }

    uint32_t pick_taken() {
        for (;;) {
            const uint32_t i = static_cast<uint32_t>(rng_.below(segs_.size()));
            if (taken_[i]) return i;
        }
    }

    // Exactly the messages whose last segment cum passed, in MSN order, and no more.
    void drain_completions() {
        while (next_recv_ < recv_msgs_.size() && recv_msgs_[next_recv_].last < cum_) {
            ASSERT_EQ(rx_.next_completion(), std::optional<uint32_t>{recv_msgs_[next_recv_].msn});
            ++next_recv_;
        }
        ASSERT_EQ(rx_.next_completion(), std::nullopt) << "cum " << cum_;
    }

    // Requests in SSN order once cum passed them; all of those, or one.
    void drain_requests(bool all) {
        do {
            if (next_req_ < requests_.size() && requests_[next_req_] < cum_) {
                ASSERT_EQ(rx_.next_request(),
                          std::optional<uint32_t>{kFirstSsn + requests_[next_req_]});
                ++next_req_;
                ++handed_out_;
            } else {
                ASSERT_EQ(rx_.next_request(), std::nullopt) << "cum " << cum_;
                return;
            }
        } while (all);
    }

    metaroce::sim::SimRng rng_;
    Config c_;
    StreamReceiver rx_;
    uint32_t total_ = 0;
    std::vector<Segment> segs_;  // by index: SSN kFirstSsn + index
    std::vector<bool> taken_;
    std::vector<Segment> cut_;       // the current message's segments not yet opened
    std::vector<uint32_t> pending_;  // opened, not taken
    uint32_t cum_ = 0, taken_count_ = 0;
    uint32_t next_msn_ = kFirstMsn, posted_ = 0;
    std::vector<RecvMsg> recv_msgs_;
    std::vector<uint32_t> requests_;  // indices, in SSN order
    size_t next_recv_ = 0, next_req_ = 0, handed_out_ = 0;
    bool refused_ = false;
    uint32_t refused_index_ = 0;
    uint64_t dups_ = 0, refusals_ = 0, naks_ = 0;
};

struct RxCase {
    StreamRxWorld::Config config;
    uint32_t segments;
};

class StreamRxProperty : public ::testing::TestWithParam<RxCase> {};

TEST_P(StreamRxProperty, TakesOnceCompletesAndRunsInOrder) {
    uint64_t refusals = 0, naks = 0, dups = 0, requests = 0, completions = 0;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
        StreamRxWorld w(seed * 7919 + GetParam().segments, GetParam().config);
        w.run(GetParam().segments);
        if (HasFailure()) {
            ADD_FAILURE() << "seed " << seed;
            return;
        }
        refusals += w.refusals();
        naks += w.naks();
        dups += w.dups();
        requests += w.requests();
        completions += w.completions();
    }
    // The schedules did exercise what they are meant to.
    EXPECT_GT(dups, 0u);
    EXPECT_GT(requests, 0u);
    EXPECT_GT(completions, 0u);
    if (GetParam().config.post_pm < 1000) {
        EXPECT_GT(naks, 0u);
        EXPECT_GT(refusals, naks);
    }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, StreamRxProperty,
    ::testing::Values(
        // Every WQE there in time (posted each step, four at most): few refusals.
        RxCase{{.window = 16,
                .mtu = 1024,
                .max_len = 5000,
                .max_requests = 1,
                .dup_pm = 100,
                .post_pm = 1000},
               20000},
        // A wide window, small segments, WQEs scarce: refusal points come and go.
        RxCase{{.window = 4095,
                .mtu = 256,
                .max_len = 3000,
                .max_requests = 16,
                .dup_pm = 50,
                .post_pm = 150},
               30000},
        RxCase{{.window = 300,
                .mtu = 4096,
                .max_len = 20000,
                .max_requests = 4,
                .dup_pm = 300,
                .post_pm = 80},
               20000},
        // Mostly one-segment messages, many copies.
        RxCase{{.window = 1000,
                .mtu = 4096,
                .max_len = 4096,
                .max_requests = kMaxRequests,
                .dup_pm = 500,
                .post_pm = 300},
               20000}));

}  // namespace
}  // namespace softmetaroce::v2
