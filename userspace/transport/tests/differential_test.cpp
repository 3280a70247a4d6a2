// The differential test of issue 15: the same seeded schedules run through the C transport core
// (kernel/core) and the C++ model (userspace/libsoftmetaroce, softmetaroce::v2), written apart
// from protocol-v2.md. One simulated network drives both in lock step: every packet, ACK and timer
// goes to both, and what each answers (verdicts, ACKs, the transmissions each calls acknowledged
// or lost, what each stream resends and delivers, windows, RTTs, path states) must be the same. A
// disagreement is a bug in one of them or in the spec; the test names the first one of each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "softmetaroce/v2/v2.h"

extern "C" {
#include "mrc_path.h"
#include "mrc_stream.h"
}

namespace {

namespace m = softmetaroce::v2;

struct Schedule {
    std::vector<u64> delay_us = {100, 600, 1100, 2100};
    double loss = 0, dup = 0, ack_loss = 0;
    int blackhole_path = -1;  // drops everything until its first new route
    int bad_route_path = -1;  // loses 40% until its first new route
    uint32_t segments = 3000, streams = 3;
    u64 service_us = 0;  // every path its own link: one packet per service_us; 0: unshaped
    u64 mark_at = 20, buffer = 200;
    double refuse = 0;  // the receiver refuses a segment (an RNR NAK, section 9.2)
};

struct Events {
    std::vector<uint64_t> acked, lost;
};

void c_acked(void *ctx, u64 cookie) { static_cast<Events *>(ctx)->acked.push_back(cookie); }
void c_lost(void *ctx, u64 cookie) { static_cast<Events *>(ctx)->lost.push_back(cookie); }
const mrc_path_ops kOps = {c_acked, c_lost, nullptr};

// The core hands one context to the refusal test and to the events: the events come first.
struct RefusalEvents : Events {
    std::function<bool(uint64_t)> refused;
    static bool call(void *ctx, u64 cookie) {
        return static_cast<RefusalEvents *>(static_cast<Events *>(ctx))->refused(cookie);
    }
};

std::string list(const std::vector<uint64_t> &v) {
    std::ostringstream o;
    for (u64 x : v) o << x << ' ';
    return o.str();
}

class Differential {
  public:
    Differential(const Schedule &s, uint32_t seed) : s_(s), rng_(seed) {
        for (size_t p = 0; p < s.delay_us.size(); p++) {
            uint32_t first = static_cast<uint32_t>(rng_());
            Path &path = paths_.emplace_back(first, static_cast<uint16_t>(p));
            mrc_path_tx_init(&path.ctx, first, static_cast<uint16_t>(p), 32 * MRC_CWND_ONE);
            mrc_path_rx_init(&path.crx, first);
        }
        for (uint32_t st = 0; st < s.streams; st++) {
            uint32_t first = static_cast<uint32_t>(rng_());
            Stream &str = streams_.emplace_back(first);
            mrc_stream_tx_init(&str.ctx, first);
            mrc_stream_map_init(&str.cmap, first);
            str.total = s.segments / s.streams + (st < s.segments % s.streams);
        }
    }

    // Runs to the end; returns the first disagreement, or "" when there was none.
    std::string run() {
        u64 now = 0;
        while (!done() && diverged_.empty()) {
            if (now > 60'000'000) return "no progress by 60 s";
            send_all(now);
            u64 next = next_event(now);
            if (next == ~0ULL) return "nothing to wait for";
            now = std::max(now, next);
            for (size_t p = 0; p < paths_.size() && diverged_.empty(); p++) step(p, now);
            for (size_t p = 0; p < paths_.size() && diverged_.empty(); p++) timers(p, now);
            refusals(now);
            compare_state(now);
        }
        end_us_ = now;
        return diverged_;
    }

    // What the run exercised, so a test can tell agreement from having done nothing.
    struct Totals {
        u64 lost = 0, spurious = 0, failures = 0, repaths = 0, marked = 0, refused = 0;
    };
    Totals totals() const {
        Totals t;
        for (const Path &p : paths_) {
            t.lost += p.ctx.lost;
            t.spurious += p.ctx.spurious;
            t.failures += p.ctx.failures;
            t.repaths += p.ctx.repaths;
            t.marked += p.ctx.marked;
            t.refused += p.ctx.refused;
        }
        return t;
    }

  private:
    struct Packet {
        u64 at;
        uint32_t seq, floor;
        u64 tx;
        bool ce;
    };
    struct Ack {
        u64 at;
        mrc_path_ack c;
        m::PathAck m;
    };
    struct Path {
        Path(uint32_t first, uint16_t entropy)
            : mtx(first, entropy, 32 * MRC_CWND_ONE), mrx(first) {}
        mrc_path_tx ctx;
        mrc_path_rx crx;
        m::PathSender mtx;
        m::PathReceiver mrx;
        std::deque<Packet> data;
        std::deque<Ack> acks;
        u64 last_data_at = 0, last_ack_at = 0, link_free = 0;
        uint32_t routes = 0;  // new routes taken: the black hole ends at the first
    };
    struct Stream {
        explicit Stream(uint32_t first) : mtx(first), mmap(first) {}
        mrc_stream_tx ctx;
        mrc_stream_map cmap;
        m::StreamSender mtx;
        m::StreamMap mmap;
        uint32_t opened = 0, total = 0;
    };
    struct Tx {
        uint32_t stream, ssn;
        size_t path;
    };
    // An RNR NAK on its way back: the sender hands back the stream's segments from ssn on.
    struct Refusal {
        u64 at;
        uint32_t stream, ssn;
    };

    void diverge(u64 now, const std::string &what) {
        if (!diverged_.empty()) return;
        std::ostringstream o;
        o << "at " << now << " us: " << what;
        diverged_ = o.str();
    }

    template <typename A, typename B>
    bool same(u64 now, const char *what, const A &c, const B &model, const std::string &ctx = "") {
        if (static_cast<uint64_t>(c) == static_cast<uint64_t>(model)) return true;
        std::ostringstream o;
        o << what << ": core " << uint64_t(c) << ", model " << uint64_t(model) << ctx;
        diverge(now, o.str());
        return false;
    }

    bool done() const {
        for (const Stream &s : streams_) {
            uint32_t end = s.ctx.una;
            (void)end;
            if (s.opened != s.total || s.ctx.una != s.ctx.next_ssn) return false;
            if (s.cmap.cum != s.ctx.next_ssn) return false;
        }
        return true;
    }

    bool dropped(size_t p, double rate) {
        if (int(p) == s_.blackhole_path && paths_[p].routes == 0) return true;
        if (int(p) == s_.bad_route_path && paths_[p].routes == 0) rate = std::max(rate, 0.4);
        return std::uniform_real_distribution<>(0, 1)(rng_) < rate;
    }

    u64 next_event(u64 now) {
        u64 next = ~0ULL;
        bool work = false;
        for (Stream &s : streams_) {
            u32 ssn;
            int lp;
            work |= mrc_stream_tx_next_resend(&s.ctx, &ssn, &lp);
            work |= s.opened < s.total && mrc_stream_tx_can_open(&s.ctx);
        }
        for (Path &p : paths_) {
            next = std::min(next, mrc_path_tx_deadline(&p.ctx));
            if (work) next = std::min(next, mrc_path_tx_retry_at(&p.ctx));
            if (p.crx.ack_due_us) next = std::min(next, p.crx.ack_due_us);
            if (!p.data.empty()) next = std::min(next, p.data.front().at);
            if (!p.acks.empty()) next = std::min(next, p.acks.front().at);
        }
        if (!refusals_.empty()) next = std::min(next, refusals_.front().at);
        (void)now;
        return next;
    }

    // Both implementations must agree on which paths may send; the harness picks among them.
    int pick(int preferred, u64 now) {
        for (size_t p = 0; p < paths_.size(); p++) {
            bool c = mrc_path_tx_can_send(&paths_[p].ctx, now);
            if (!same(now, "can_send", c, paths_[p].mtx.can_send(now),
                      " on path " + std::to_string(p)))
                return -1;
        }
        if (preferred >= 0 && mrc_path_tx_can_send(&paths_[preferred].ctx, now)) return preferred;
        for (size_t i = 0; i < paths_.size(); i++) {
            size_t p = (rr_path_ + i) % paths_.size();
            if (mrc_path_tx_can_send(&paths_[p].ctx, now)) {
                rr_path_ = (p + 1) % paths_.size();
                return int(p);
            }
        }
        return -1;
    }

    bool any_room(u64 now) {
        for (Path &p : paths_)
            if (mrc_path_tx_can_send(&p.ctx, now)) return true;
        return false;
    }

    // Resends first (on the path that lost them when it has room), then new segments, streams in
    // turn, as the spec's section 8 and 10 say and the property tests do.
    void send_all(u64 now) {
        bool progress = true;
        while (progress && diverged_.empty()) {
            progress = false;
            for (uint32_t i = 0; i < streams_.size() && diverged_.empty(); i++) {
                uint32_t st = (rr_stream_ + i) % uint32_t(streams_.size());
                Stream &s = streams_[st];
                u32 ssn;
                int lost_path;
                bool c_resend = mrc_stream_tx_next_resend(&s.ctx, &ssn, &lost_path);
                if (!same(now, "resend pending", c_resend, s.mtx.resend_pending(),
                          " in stream " + std::to_string(st)))
                    return;
                if (!c_resend && !(s.opened < s.total && mrc_stream_tx_can_open(&s.ctx))) continue;
                if (!c_resend && !same(now, "can_open", true, s.mtx.can_open())) return;
                if (!any_room(now)) {
                    pick(-1, now);  // compares can_send on every path
                    return;
                }
                if (c_resend) {
                    auto mr = s.mtx.next_resend();
                    if (!mr) return diverge(now, "model has no resend");
                    if (!same(now, "resend ssn", ssn, mr->first) ||
                        !same(now, "resend path", lost_path + 1, mr->second + 1))
                        return;
                } else {
                    ssn = mrc_stream_tx_open(&s.ctx);
                    if (!same(now, "open", ssn, s.mtx.open())) return;
                    s.opened++;
                }
                int p = pick(c_resend ? lost_path : -1, now);
                if (p < 0) return;
                mrc_stream_tx_sent(&s.ctx, ssn);
                s.mtx.on_sent(ssn);
                transmit(size_t(p), st, ssn, now);
                progress = true;
            }
            rr_stream_ = (rr_stream_ + 1) % uint32_t(streams_.size());
        }
    }

    void transmit(size_t p, uint32_t st, uint32_t ssn, u64 now) {
        Path &path = paths_[p];
        u64 id = txs_.size();
        uint32_t floor = path.ctx.una;
        uint32_t seq = mrc_path_tx_sent(&path.ctx, id, now);
        if (!same(now, "sent seq", seq, path.mtx.on_sent(id, now)) ||
            !same(now, "floor sent", floor, path.mtx.floor()))
            return;
        txs_.push_back({st, ssn, p});
        if (dropped(p, s_.loss)) return;
        bool ce = false;
        u64 at = now;
        if (s_.service_us) {
            u64 start = std::max(now, path.link_free);
            u64 queued = (start - now) / s_.service_us;
            if (queued >= s_.buffer) return;
            ce = queued >= s_.mark_at;
            path.link_free = start + s_.service_us;
            at = path.link_free;
        }
        at = std::max(at + s_.delay_us[p] + 1, path.last_data_at);
        path.last_data_at = at;
        path.data.push_back({at, seq, floor, id, ce});
        if (!dropped(p, 1 - s_.dup)) path.data.push_back({at, seq, floor, id, ce});
    }

    void send_ack(size_t p, u64 now) {
        Path &path = paths_[p];
        Ack a{};
        mrc_path_rx_ack(&path.crx, &a.c, now);
        a.m = path.mrx.make_ack(now);
        if (!same(now, "ack cum", a.c.cum, a.m.cum) ||
            !same(now, "ack delay", a.c.ack_delay_us, a.m.ack_delay_us) ||
            !same(now, "ack ce", a.c.ce, a.m.ce))
            return;
        for (int w = 0; w < MRC_SACK_WORDS; w++)
            if (!same(now, "ack bits", a.c.bits[w], a.m.bits[w], " word " + std::to_string(w)))
                return;
        if (dropped(p, s_.ack_loss)) return;
        a.at = std::max(now + s_.delay_us[p] + 1, path.last_ack_at);
        path.last_ack_at = a.at;
        path.acks.push_back(a);
    }

    void receive(size_t p, const Packet &pk, u64 now) {
        Path &path = paths_[p];
        if (std::uniform_real_distribution<>(0, 1)(rng_) < s_.refuse) {
            // Refused: recorded in neither map, and an RNR NAK goes back (section 8.1).
            const Tx &t = txs_[pk.tx];
            refusals_.push_back({now + s_.delay_us[p] + 1, t.stream, t.ssn});
            return;
        }
        auto c = mrc_path_rx_packet(&path.crx, pk.seq, pk.floor, pk.ce, false, now);
        auto mv = path.mrx.on_packet(pk.seq, pk.floor, pk.ce, false, now);
        int mi = mv == m::RxAck::Later ? MRC_RX_ACK_LATER
                 : mv == m::RxAck::Now ? MRC_RX_ACK_NOW
                                       : MRC_RX_DROP;
        if (!same(now, "rx verdict", int(c), mi, " seq " + std::to_string(pk.seq))) return;
        const Tx &t = txs_[pk.tx];
        Stream &s = streams_[t.stream];
        auto cs = mrc_stream_map_record(&s.cmap, t.ssn);
        auto ms = s.mmap.record(t.ssn);
        int msi = ms == m::MapVerdict::New         ? MRC_SACK_NEW
                  : ms == m::MapVerdict::Duplicate ? MRC_SACK_DUPLICATE
                                                   : MRC_SACK_BEYOND;
        if (!same(now, "stream map verdict", int(cs), msi) ||
            !same(now, "stream map cum", s.cmap.cum, s.mmap.cum()))
            return;
        if (c == MRC_RX_ACK_NOW) send_ack(p, now);
    }

    // What each implementation calls acknowledged and lost goes to its own streams; both lists
    // must be the same, in the same order (a stream resends in the order it heard of losses).
    void apply(u64 now, const Events &c, const m::PathEvents &me, const char *what) {
        if (c.acked != me.acked)
            return diverge(now, std::string(what) + " acked: core " + list(c.acked) + "; model " +
                                    list(me.acked));
        if (c.lost != me.lost)
            return diverge(now, std::string(what) + " lost: core " + list(c.lost) + "; model " +
                                    list(me.lost));
        for (u64 id : c.acked) {
            const Tx &t = txs_[id];
            Stream &s = streams_[t.stream];
            bool cd = mrc_stream_tx_acked(&s.ctx, t.ssn);
            if (!same(now, "delivered now", cd, s.mtx.on_acked(t.ssn))) return;
        }
        for (u64 id : c.lost) {
            const Tx &t = txs_[id];
            Stream &s = streams_[t.stream];
            mrc_stream_tx_lost(&s.ctx, t.ssn, int(t.path));
            s.mtx.on_lost(t.ssn, int(t.path));
        }
    }

    // The connection's part, the same for both: a path that asks for a new route for its losses
    // gets one; for its marks, only when another path is clearly less marked.
    void maybe_repath(size_t p, u64 now) {
        Path &path = paths_[p];
        bool c_move = path.ctx.repath_wanted == MRC_REPATH_LOSS;
        if (path.ctx.repath_wanted == MRC_REPATH_MARKS) {
            path.ctx.repath_wanted = MRC_REPATH_NONE;
            for (size_t j = 0; j < paths_.size(); j++)
                if (j != p && 2 * paths_[j].ctx.alpha < path.ctx.alpha) c_move = true;
        }
        bool m_move = path.mtx.repath_wanted() == m::Repath::Loss;
        if (path.mtx.repath_wanted() == m::Repath::Marks) {
            for (size_t j = 0; j < paths_.size(); j++)
                if (j != p && 2 * paths_[j].mtx.alpha() < path.mtx.alpha()) m_move = true;
            if (!m_move) path.mtx.clear_repath();
        }
        if (!same(now, "new route wanted", c_move, m_move, " on path " + std::to_string(p))) return;
        if (c_move) {
            uint16_t e = new_entropy(path);
            mrc_path_tx_new_route(&path.ctx, e);
            path.mtx.new_route(e);
            path.routes++;
        }
    }

    uint16_t new_entropy(const Path &path) {
        uint16_t e;
        do {
            e = static_cast<uint16_t>(rng_() & 0x3fff);
        } while (e == path.ctx.entropy);
        return e;
    }

    void step(size_t p, u64 now) {
        Path &path = paths_[p];
        while (!path.data.empty() && path.data.front().at <= now && diverged_.empty()) {
            Packet pk = path.data.front();
            path.data.pop_front();
            receive(p, pk, now);
        }
        if (!diverged_.empty()) return;
        u64 cdue = path.crx.ack_due_us;
        auto mdue = path.mrx.ack_due();
        bool c_pending = cdue && path.crx.unacked;
        if (c_pending && !same(now, "ack due", cdue, mdue ? *mdue : 0)) return;
        if (c_pending && cdue <= now) send_ack(p, now);
        if (path.crx.ack_due_us && path.crx.ack_due_us <= now) path.crx.ack_due_us = 0;
        while (!path.acks.empty() && path.acks.front().at <= now && diverged_.empty()) {
            Ack a = path.acks.front();
            path.acks.pop_front();
            Events ce;
            m::PathEvents me;
            auto cv = mrc_path_tx_ack(&path.ctx, &a.c, now, &kOps, &ce);
            auto mv = path.mtx.on_ack(a.m, now, me);
            if (!same(now, "ack verdict", int(cv), mv == m::AckVerdict::Ok ? 0 : 1)) return;
            apply(now, ce, me, "on ack");
            if (diverged_.empty()) maybe_repath(p, now);
        }
    }

    void timers(size_t p, u64 now) {
        Path &path = paths_[p];
        u64 cd = mrc_path_tx_deadline(&path.ctx);
        if (!same(now, "deadline", cd, path.mtx.deadline(), " on path " + std::to_string(p)) ||
            !same(now, "retry at", mrc_path_tx_retry_at(&path.ctx), path.mtx.retry_at(),
                  " on path " + std::to_string(p)))
            return;
        if (cd > now) return;
        uint16_t e = new_entropy(path);
        Events ce;
        m::PathEvents me;
        uint32_t c_route = path.ctx.route;
        mrc_path_tx_timer(&path.ctx, now, e, &kOps, &ce);
        path.mtx.on_timer(now, e, me);
        if (path.ctx.route != c_route) path.routes++;
        apply(now, ce, me, "on timer");
    }

    // An RNR NAK arrives: every path hands back what it has in flight of the stream from the
    // refused segment on, in both implementations alike.
    void refusals(u64 now) {
        while (!refusals_.empty() && refusals_.front().at <= now && diverged_.empty()) {
            Refusal r = refusals_.front();
            refusals_.pop_front();
            auto refused = [&](u64 id) {
                const Tx &t = txs_[id];
                return t.stream == r.stream && mrc_seq_diff(t.ssn, r.ssn) >= 0;
            };
            for (Path &path : paths_) {
                RefusalEvents ce{{}, refused};
                m::PathEvents me;
                mrc_path_tx_refused(&path.ctx, RefusalEvents::call, &kOps,
                                    static_cast<Events *>(&ce));
                path.mtx.on_refused(refused, me);
                apply(now, ce, me, "on refusal");
            }
        }
    }

    void compare_state(u64 now) {
        for (size_t p = 0; p < paths_.size() && diverged_.empty(); p++) {
            const mrc_path_tx &c = paths_[p].ctx;
            const m::PathSender &ms = paths_[p].mtx;
            std::string on = " on path " + std::to_string(p);
            if (!same(now, "next seq", c.next_seq, ms.next_seq(), on) ||
                !same(now, "floor", c.una, ms.floor(), on) ||
                !same(now, "in flight", c.in_flight, ms.in_flight(), on) ||
                !same(now, "cwnd", c.cwnd, ms.cwnd(), on) ||
                !same(now, "alpha", c.alpha, ms.alpha(), on) ||
                !same(now, "srtt", c.srtt_us, ms.srtt_us(), on) ||
                !same(now, "rttvar", c.rttvar_us, ms.rttvar_us(), on) ||
                !same(now, "min rtt", c.min_rtt_us, ms.min_rtt_us(), on) ||
                !same(now, "state", c.state == MRC_PATH_FAILED, ms.state() == m::PathState::Failed,
                      on) ||
                !same(now, "entropy", c.entropy, ms.entropy(), on) ||
                !same(now, "lost", c.lost, ms.lost(), on) ||
                !same(now, "spurious", c.spurious, ms.spurious(), on) ||
                !same(now, "refused", c.refused, ms.refused(), on) ||
                !same(now, "failures", c.failures, ms.failures(), on))
                return;
        }
        for (size_t st = 0; st < streams_.size() && diverged_.empty(); st++) {
            const Stream &s = streams_[st];
            std::string on = " in stream " + std::to_string(st);
            if (!same(now, "stream una", s.ctx.una, s.mtx.una(), on) ||
                !same(now, "stream delivered", s.ctx.delivered, s.mtx.delivered(), on))
                return;
        }
    }

    Schedule s_;
    std::mt19937_64 rng_;
    std::deque<Path> paths_;  // deque: the model's objects stay put
    std::deque<Stream> streams_;
    std::vector<Tx> txs_;
    std::deque<Refusal> refusals_;
    size_t rr_path_ = 0;
    uint32_t rr_stream_ = 0;
    std::string diverged_;
    u64 end_us_ = 0;
};

Differential::Totals expect_agreement(const Schedule &s, uint32_t seeds, const char *name) {
    Differential::Totals sum;
    for (uint32_t seed = 1; seed <= seeds; seed++) {
        Differential d(s, seed);
        std::string why = d.run();
        EXPECT_EQ(why, "") << name << ", seed " << seed;
        Differential::Totals t = d.totals();
        sum.lost += t.lost;
        sum.spurious += t.spurious;
        sum.failures += t.failures;
        sum.repaths += t.repaths;
        sum.marked += t.marked;
        sum.refused += t.refused;
    }
    return sum;
}

TEST(Differential, UnequalDelaysNoLoss) {
    for (uint32_t streams : {1u, 3u, 16u}) {
        Schedule s;
        s.streams = streams;
        EXPECT_EQ(expect_agreement(s, 10, "unequal delays").lost, 0u);
    }
}

TEST(Differential, RandomLossDuplicationAndAckLoss) {
    for (double loss : {0.01, 0.05, 0.2, 0.4}) {
        Schedule s;
        s.loss = loss;
        s.dup = 0.02;
        s.ack_loss = loss;
        Differential::Totals t = expect_agreement(s, 20, "random loss");
        EXPECT_GT(t.lost, 0u);
        if (loss >= 0.2) {
            EXPECT_GT(t.failures + t.spurious, 0u) << "loss " << loss;
        }
    }
}

TEST(Differential, RefusalsHandBackWhatFollowsThem) {
    for (double refuse : {0.005, 0.05}) {
        Schedule s;
        s.refuse = refuse;
        s.loss = 0.01;
        EXPECT_GT(expect_agreement(s, 20, "refusals").refused, 0u) << "refuse " << refuse;
    }
}

TEST(Differential, ShapedLinksThatMarkCE) {
    for (u64 mark_at : {5u, 20u}) {
        Schedule s;
        s.delay_us = {50, 50, 50, 50, 50, 50, 50, 50};
        s.service_us = 10;
        s.mark_at = mark_at;
        s.segments = 8000;
        EXPECT_GT(expect_agreement(s, 5, "shaped links").marked, 0u);
    }
}

TEST(Differential, ALossyRouteAndABlackHoledPath) {
    Schedule s;
    s.bad_route_path = 1;
    s.segments = 10000;
    EXPECT_GE(expect_agreement(s, 10, "lossy route").repaths, 10u);
    s.bad_route_path = -1;
    s.blackhole_path = 2;
    s.loss = 0.02;
    EXPECT_GE(expect_agreement(s, 10, "black hole").failures, 10u);
}

}  // namespace
