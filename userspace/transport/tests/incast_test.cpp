// Incast over the transport core: several senders, each a connection of its own with a few paths,
// into one receiver whose inbound link is the bottleneck. The receiver grants each sender a share
// of that link in every ACK (mrc_fair.c) and each sender caps its packets in flight at the window
// the share makes (mrc_conn_tx_grant). Compared with the same run without grants: the queue at the
// receiver's link stays short, nothing is dropped after the first round trips, and the senders
// share the link evenly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <vector>

extern "C" {
#include "mrc_conn.h"
#include "mrc_stream.h"
}

namespace {

constexpr uint32_t kMtu = 1400;

struct Incast {
    uint32_t senders = 8, paths = 2, segments = 4000;  // segments per sender
    u64 delay_us = 100;                                // one way, each direction, before the link
    u64 service_us = 10;  // the receiver's link: one packet per 10 us (1,120 Mbit/s)
    u64 mark_at = 20, buffer = 128;
    bool grants = true;
};

struct Outcome {
    u64 end_us = 0, joined_us = 0, dropped = 0, dropped_late = 0, max_queue_late = 0;
    double jain = 0;  // fairness of what each sender delivered in the middle of the run
};

class IncastSim {
  public:
    explicit IncastSim(const Incast &c) : c_(c), s_(c.senders) {
        capacity_mbps_ = uint32_t(kMtu * 8 / c.service_us);
        mrc_fair_rx_init(&fair_, capacity_mbps_);
        for (uint32_t i = 0; i < c.senders; i++) {
            Sender &s = s_[i];
            s.tx.resize(c.paths);
            s.rx.resize(c.paths);
            for (uint32_t p = 0; p < c.paths; p++) {
                mrc_path_tx_init(&s.tx[p], 1000 * i, uint16_t(p), 32 * MRC_CWND_ONE);
                mrc_path_rx_init(&s.rx[p], 1000 * i);
            }
            mrc_conn_tx_init(&s.conn, s.tx.data(), c.paths, kMtu, i + 1);
            mrc_stream_tx_init(&s.stream, 0);
            mrc_stream_map_init(&s.map, 0);
        }
    }

    Outcome run() {
        const mrc_path_ops ops = {on_acked, on_lost, nullptr};
        u64 now = 0;
        // "Late" is from a millisecond after every sender has heard its first ACK: by then the
        // grants have taken hold. (Before it, a sender whose whole first window the incast
        // dropped waits for its probe timeout: no receiver can grant what it never saw.)
        u64 late = ~0ULL;
        std::vector<u64> mid_start(c_.senders), mid_end(c_.senders);
        const u64 total = u64(c_.segments) * c_.senders * c_.service_us;
        while (!done()) {
            if (now > 10'000'000) {
                ADD_FAILURE() << "no progress";
                break;
            }
            for (uint32_t i = 0; i < c_.senders; i++) send(i, now);
            u64 next = ~0ULL;
            for (auto &s : s_) {
                next = std::min(next, mrc_conn_tx_deadline(&s.conn));
                if (!s.acks.empty()) next = std::min(next, s.acks.front().at);
                for (auto &rx : s.rx)
                    if (rx.ack_due_us) next = std::min(next, rx.ack_due_us);
            }
            if (!link_.empty()) next = std::min(next, link_.front().at);
            if (!toward_.empty()) next = std::min(next, toward_.begin()->first);
            if (next == ~0ULL) {
                ADD_FAILURE() << "nothing to wait for";
                break;
            }
            now = std::max(now, next);
            enter_link(now);
            arrive(now);
            for (uint32_t i = 0; i < c_.senders; i++) {
                Sender &s = s_[i];
                for (uint32_t p = 0; p < c_.paths; p++) {
                    mrc_path_rx &rx = s.rx[p];
                    if (rx.ack_due_us && rx.ack_due_us <= now) {
                        if (rx.unacked) ack(i, p, now);
                        rx.ack_due_us = 0;
                    }
                }
                while (!s.acks.empty() && s.acks.front().at <= now) {
                    Ack a = s.acks.front();
                    s.acks.pop_front();
                    ctx_ = &s;
                    EXPECT_EQ(mrc_conn_tx_ack(&s.conn, a.path, &a.ack, now, &ops, this),
                              MRC_ACK_OK);
                    if (c_.grants) mrc_conn_tx_grant(&s.conn, a.share, capacity_mbps_);
                }
                ctx_ = &s;
                mrc_conn_tx_timer(&s.conn, now, &ops, this);
            }
            if (late == ~0ULL && all_heard()) {
                late = now + 1000;
                out_.joined_us = now;
            }
            late_ = late;
            if (now >= late) out_.max_queue_late = std::max(out_.max_queue_late, queued(now));
            for (uint32_t i = 0; i < c_.senders; i++) {
                if (now <= total / 4) mid_start[i] = s_[i].stream.delivered;
                if (now <= 3 * total / 4) mid_end[i] = s_[i].stream.delivered;
            }
        }
        out_.end_us = now;
        out_.dropped = dropped_;
        out_.dropped_late = dropped_late_;
        double sum = 0, sq = 0;
        for (uint32_t i = 0; i < c_.senders; i++) {
            double x = double(mid_end[i] - mid_start[i]);
            sum += x;
            sq += x * x;
        }
        out_.jain = sq ? sum * sum / (c_.senders * sq) : 0;
        if (getenv("MRCORE_SIM_VERBOSE"))
            fprintf(stderr,
                    "incast: grants %d, %llu us (ideal %llu), all heard at %llu us, dropped %llu "
                    "(late %llu), late max queue %llu, jain %.3f\n",
                    c_.grants, (unsigned long long)now, (unsigned long long)total,
                    (unsigned long long)out_.joined_us, (unsigned long long)out_.dropped,
                    (unsigned long long)out_.dropped_late, (unsigned long long)out_.max_queue_late,
                    out_.jain);
        return out_;
    }

  private:
    struct Packet {
        u64 at;  // leaves the link into the receiver
        uint32_t sender, path, seq, floor, ssn;
        bool ce, ack_req;
    };
    struct Ack {
        u64 at;
        uint32_t path;
        mrc_path_ack ack;
        u16 share;
    };
    struct Sender {
        std::vector<mrc_path_tx> tx;
        std::vector<mrc_path_rx> rx;  // the receiver's end of each path
        mrc_conn_tx conn;
        mrc_stream_tx stream;
        mrc_stream_map map;              // the receiver's map of the stream
        std::map<u64, uint32_t> ssn_of;  // cookie: the SSN a transmission carried
        std::deque<Ack> acks;
        uint32_t opened = 0;
        u64 up_free = 0;  // when the sender's own link has sent what it holds
        u64 next_cookie = 0;
    };

    static void on_acked(void *ctx, u64 cookie) {
        Sender *s = static_cast<IncastSim *>(ctx)->ctx_;
        mrc_stream_tx_acked(&s->stream, s->ssn_of.at(cookie));
    }
    static void on_lost(void *ctx, u64 cookie) {
        Sender *s = static_cast<IncastSim *>(ctx)->ctx_;
        mrc_stream_tx_lost(&s->stream, s->ssn_of.at(cookie), -1);
    }

    bool all_heard() const {
        for (const Sender &s : s_) {
            bool heard = false;
            for (const mrc_path_tx &t : s.tx) heard |= t.has_rtt;
            if (!heard) return false;
        }
        return true;
    }

    bool done() const {
        for (const Sender &s : s_)
            if (s.stream.una != c_.segments || s.map.cum != c_.segments) return false;
        return true;
    }

    u64 queued(u64 now) const { return link_free_ > now ? (link_free_ - now) / c_.service_us : 0; }

    void send(uint32_t i, u64 now) {
        Sender &s = s_[i];
        for (;;) {
            u32 ssn;
            int lost_path;
            bool resend = mrc_stream_tx_next_resend(&s.stream, &ssn, &lost_path);
            if (!resend && (s.opened == c_.segments || !mrc_stream_tx_can_open(&s.stream))) return;
            int p = mrc_conn_tx_pick(&s.conn, resend ? lost_path : MRC_NO_PATH, now);
            if (p == MRC_NO_PATH) return;
            if (!resend) {
                ssn = mrc_stream_tx_open(&s.stream);
                s.opened++;
            }
            mrc_stream_tx_sent(&s.stream, ssn);
            u64 cookie = s.next_cookie++;
            s.ssn_of[cookie] = ssn;
            uint32_t floor = s.tx[p].una;
            uint32_t seq = mrc_path_tx_sent(&s.tx[p], cookie, now);
            bool ack_req = mrc_conn_tx_ack_wanted(&s.conn, uint32_t(p), now);
            // Out of the sender's own link (as fast as the receiver's), then to the receiver's.
            u64 depart = std::max(now, s.up_free) + c_.service_us;
            s.up_free = depart;
            toward_.insert(
                {depart + c_.delay_us, Packet{0, i, uint32_t(p), seq, floor, ssn, false, ack_req}});
        }
    }

    // Into the receiver's link in the order packets reach it: queued, marked or dropped.
    void enter_link(u64 now) {
        while (!toward_.empty() && toward_.begin()->first <= now) {
            u64 reach = toward_.begin()->first;
            Packet pk = toward_.begin()->second;
            toward_.erase(toward_.begin());
            u64 start = std::max(reach, link_free_);
            u64 q = (start - reach) / c_.service_us;
            if (q >= c_.buffer) {
                dropped_++;
                if (reach >= late_) dropped_late_++;
                continue;
            }
            link_free_ = start + c_.service_us;
            pk.at = link_free_;
            pk.ce = q >= c_.mark_at;
            link_.push_back(pk);
        }
    }

    void arrive(u64 now) {
        while (!link_.empty() && link_.front().at <= now) {
            Packet pk = link_.front();
            link_.pop_front();
            Sender &s = s_[pk.sender];
            mrc_fair_rx_arrival(&fair_, pk.sender, kMtu, now);
            auto v = mrc_path_rx_packet(&s.rx[pk.path], pk.seq, pk.floor, pk.ce, pk.ack_req, now);
            ASSERT_NE(v, MRC_RX_DROP);
            mrc_stream_map_record(&s.map, pk.ssn);
            if (v == MRC_RX_ACK_NOW) ack(pk.sender, pk.path, now);
        }
    }

    void ack(uint32_t i, uint32_t p, u64 now) {
        Ack a{};
        a.at = now + c_.delay_us;
        a.path = p;
        mrc_path_rx_ack(&s_[i].rx[p], &a.ack, now);
        a.share = mrc_fair_rx_share(&fair_, i, now);
        s_[i].acks.push_back(a);
    }

    Incast c_;
    std::vector<Sender> s_;
    Sender *ctx_ = nullptr;
    mrc_fair_rx fair_;
    uint32_t capacity_mbps_;
    std::multimap<u64, Packet> toward_;  // on their way to the receiver's link, by arrival
    std::deque<Packet> link_;
    u64 late_ = ~0ULL;
    u64 link_free_ = 0, dropped_ = 0, dropped_late_ = 0;
    Outcome out_;
};

// Simulated time, so deterministic. Measured (8 senders): every sender hears its first ACK in 490
// us, about two round trips; from a millisecond later, with grants, the queue peaks at 53 packets,
// nothing is dropped and the senders' shares are even (Jain 1.000), in 321.8 ms against the link's
// 320; without grants the queue reaches the buffer (128), 31 more packets are dropped and Jain is
// 0.940. With 16 senders: 65 packets, no drop, 0.999, 323.0 ms; without: 128, 427 drops, 0.971.
// Sixteen senders at the minimum window (MRC_FAIR_MIN_WINDOW, 4) are 64 packets whatever the
// grants, so the bound is five eighths of the buffer, not half.
TEST(Incast, GrantsKeepTheQueueShortAndShareTheLinkEvenly) {
    for (uint32_t senders : {8u, 16u}) {
        Incast c;
        c.senders = senders;
        c.segments = 32000 / senders;
        Outcome with = IncastSim(c).run();
        c.grants = false;
        Outcome without = IncastSim(c).run();
        const u64 ideal = u64(c.segments) * c.senders * c.service_us;
        EXPECT_LE(with.joined_us, 1000u) << senders << " senders";
        EXPECT_EQ(with.dropped_late, 0u) << senders << " senders";
        EXPECT_LE(with.max_queue_late, c.buffer * 5 / 8) << senders << " senders";
        EXPECT_LT(with.max_queue_late, without.max_queue_late) << senders << " senders";
        EXPECT_GE(with.jain, 0.98) << senders << " senders";
        // Short queues must not cost the link.
        EXPECT_LE(with.end_us, ideal * 105 / 100) << senders << " senders, ideal " << ideal;
    }
}

}  // namespace
