// The packet fuzzer's run (docs/fuzzing.md): opens QPs of its own on the device under test
// and connects them to fictitious peers it plays (their address is the one it sends from),
// finds the QPs of real transfers through the RDMA netlink, and sends packets from
// PacketGen at them, at neighbouring unconnected QPNs and at the GSI QP, while the transfers
// run. In a namespace where it may, it also watches the device's packets to learn the live
// windows. At the end a fresh QP of its own must still take a WRITE and a SEND.
#include <infiniband/verbs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include "fuzz.h"
#include "packet_gen.h"
#include "pattern.h"
#include "sniffer.h"
#include "softmetaroce/codec.h"
#include "udp.h"
#include "verbs_util.h"
#include "watchdog.h"

namespace metaroce::fuzz {
namespace {

using Clock = std::chrono::steady_clock;
using tools::IpAddress;
using tools::MemoryRegion;
using tools::RcQp;
using tools::UdpTransport;
using tools::VerbsDevice;

constexpr std::uint32_t kMrLen = 64 * 1024;
constexpr std::uint32_t kRecvLen = 8192;
constexpr std::uint32_t kRecvs = 16;

// A DUT QP of ours, connected to a fictitious peer QP at the fuzzer's sending address.
struct OwnQp {
    std::unique_ptr<RcQp> qp;
    std::unique_ptr<MemoryRegion> mr;     // remote read and write
    std::unique_ptr<MemoryRegion> local;  // receive buffers, send sources
    Target t;
    std::uint32_t posted = 0;  // receives outstanding
};

class PacketRun {
  public:
    explicit PacketRun(const Options& o);
    int run();

  private:
    std::unique_ptr<OwnQp> open_own(bool requester_work);
    void post_recvs(OwnQp& q);
    void tend(OwnQp& q, std::size_t slot);
    void refresh_transfers();
    void learn();
    Target& pick_target();
    void send(Shot& s);
    bool liveness();

    Options o_;
    Watchdog dog_;
    PacketGen gen_;
    VerbsDevice dev_;
    int sgid_index_ = 1;
    IpAddress dut_;
    std::unique_ptr<UdpTransport> udp_;
    std::unique_ptr<UdpTransport> alt_;
    std::unique_ptr<Sniffer> sniff_;
    std::vector<std::unique_ptr<OwnQp>> own_;
    std::vector<Target> transfers_;
    std::vector<Target> unconnected_;
    std::uint32_t next_fake_ = 0xf00000;
    std::uint64_t step_ = 0;
    bool listed_once_ = false;
    std::map<KnownBug, std::uint64_t> known_sent_;
    std::uint64_t valid_sent_ = 0, sent_ = 0, recreated_ = 0, learned_ = 0;
};

PacketRun::PacketRun(const Options& o)
    : o_(o), dog_(o.seed, o.watchdog_s), gen_(o.seed, GenOptions{o.avoid_known}), dev_(o.device) {
    const auto idx = dev_.gid_index_for(o.dut_ip);
    if (!idx) throw std::runtime_error("device " + o.device + " has no GID for " + o.dut_ip);
    sgid_index_ = *idx;
    dut_ = *IpAddress::parse(o.dut_ip);
    udp_ = std::make_unique<UdpTransport>(*IpAddress::parse(o.local_ip), 0, o.netns);
    if (!o.alt_ip.empty())
        alt_ = std::make_unique<UdpTransport>(*IpAddress::parse(o.alt_ip), 0, o.netns);
    sniff_ = std::make_unique<Sniffer>(o.netns, o.dut_ip);
    if (!sniff_->ok()) sniff_.reset();
}

std::unique_ptr<OwnQp> PacketRun::open_own(bool requester_work) {
    auto q = std::make_unique<OwnQp>();
    Rng& r = gen_.rng();
    dog_.step("create an own QP", step_);
    q->qp = std::make_unique<RcQp>(dev_, 64, 2);
    const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    q->mr = std::make_unique<MemoryRegion>(dev_.pd(), kMrLen, rw);
    q->local = std::make_unique<MemoryRegion>(dev_.pd(), kRecvs * kRecvLen, IBV_ACCESS_LOCAL_WRITE);
    next_fake_ = (next_fake_ + 7) & 0xffffff;
    Target& t = q->t;
    t.kind = Target::Kind::Own;
    t.dqpn = q->qp->qpn();
    t.sqpn = next_fake_;
    // A third of the connections start just before the PSN wrap, so traffic crosses it.
    t.rq_psn = r.chance(33) ? kPsnMask - static_cast<Psn>(r.below(32)) : r.u32() & kPsnMask;
    t.sq_psn = r.chance(33) ? kPsnMask - static_cast<Psn>(r.below(32)) : r.u32() & kPsnMask;
    t.mr_addr = q->mr->addr();
    t.mr_rkey = q->mr->rkey();
    t.mr_len = kMrLen;
    t.recv_len = kRecvLen;
    t.seg = segment_size(o_.mtu);
    tools::RcConnectParams p;
    p.dest_qpn = t.sqpn;
    p.rq_psn = t.rq_psn;
    p.sq_psn = t.sq_psn;
    p.dgid = *tools::gid_of_ip(o_.local_ip);
    p.sgid_index = sgid_index_;
    p.mtu = o_.mtu;
    p.timeout = 16;  // 268 ms: requests to the peer we do not play fail in a few seconds
    p.retry_cnt = 7;
    p.rnr_retry = 3;
    p.min_rnr_timer = 1;
    dog_.step("connect an own QP", step_);
    q->qp->connect(p);
    post_recvs(*q);
    if (requester_work) {
        // Work for the requester side, so that ACKs, NAKs and READ responses meet state.
        dog_.step("post requester work", step_);
        const std::uint64_t a = q->local->addr();
        const std::uint32_t k = q->local->lkey();
        try {
            q->qp->post_send(IBV_WR_RDMA_WRITE, 1, a, 3000, k, 0x10000, 0x1234, 0,
                             IBV_SEND_SIGNALED);
            q->qp->post_send(IBV_WR_RDMA_READ, 2, a + 4096, 5000, k, 0x20000, 0x1234, 0,
                             IBV_SEND_SIGNALED);
            q->qp->post_send(IBV_WR_SEND, 3, a + 16384, 2000, k, 0, 0, 0, IBV_SEND_SIGNALED);
        } catch (const std::exception& e) {
            std::printf("# posting requester work: %s\n", e.what());
        }
    }
    return q;
}

void PacketRun::post_recvs(OwnQp& q) {
    dog_.step("post receives", step_);
    while (q.posted < kRecvs) {
        const std::uint32_t slot = q.posted % kRecvs;
        try {
            q.qp->post_recv(slot, q.local->addr() + std::uint64_t{slot} * kRecvLen, kRecvLen,
                            q.local->lkey());
        } catch (const std::exception&) {
            return;  // a QP in error takes none: it is renewed
        }
        q.posted++;
    }
}

// Completions drained, receives topped up; a QP that failed (the documented result of
// in-window garbage) is destroyed and replaced.
void PacketRun::tend(OwnQp& q, std::size_t slot) {
    dog_.step("poll own CQs", step_);
    for (const auto& wc : tools::poll_cq(q.qp->recv_cq(), 64, 0)) {
        (void)wc;
        if (q.posted) q.posted--;
    }
    (void)tools::poll_cq(q.qp->send_cq(), 64, 0);
    post_recvs(q);
    dog_.step("query an own QP", step_);
    const ibv_qp_state s = q.qp->state();
    if (s == IBV_QPS_RTS && gen_.rng().below(40) != 0) return;
    if (o_.verbose_from <= step_)
        trace("step %llu: renewing own QP 0x%x (state %d)", static_cast<unsigned long long>(step_),
              q.t.dqpn, s);
    dog_.step("destroy an own QP", step_);
    own_[slot].reset();
    own_[slot] = open_own(gen_.rng().chance(70));
    recreated_++;
}

void PacketRun::refresh_transfers() {
    dog_.step("rdma res show qp", step_);
    const auto qps = list_qps();
    if (!listed_once_) {
        std::printf("# rdma res show qp lists %zu QPs\n", qps.size());
        listed_once_ = true;
    }
    std::vector<Target> found;
    std::uint32_t highest = 0;
    for (const QpInfo& q : qps) {
        highest = std::max(highest, q.lqpn);
        if (q.dev != o_.device || q.type != "RC" || q.rqpn == 0) continue;
        const bool attack = std::count(o_.attack_pids.begin(), o_.attack_pids.end(), q.pid) > 0;
        const bool protect = std::count(o_.protect_pids.begin(), o_.protect_pids.end(), q.pid) > 0;
        if (!attack && !protect) continue;
        Target t;
        t.kind = attack ? Target::Kind::Transfer : Target::Kind::Protected;
        t.dqpn = q.lqpn;
        t.sqpn = q.rqpn;
        t.rq_psn = q.rq_psn;
        t.sq_psn = q.sq_psn;
        t.seg = segment_size(o_.mtu);
        // Keep what was learned about a QP already known.
        for (const Target& old : transfers_) {
            if (old.dqpn == t.dqpn && old.sqpn == t.sqpn) t = old;
        }
        found.push_back(t);
    }
    for (const TargetHint& h : o_.targets) {
        Target t;
        t.kind = Target::Kind::Transfer;
        t.dqpn = h.dqpn;
        t.sqpn = h.sqpn;
        t.rq_psn = h.rq_psn;
        t.sq_psn = h.sq_psn;
        t.seg = segment_size(o_.mtu);
        for (const Target& old : transfers_) {
            if (old.dqpn == t.dqpn && old.sqpn == t.sqpn) t = old;
        }
        found.push_back(t);
        highest = std::max(highest, h.dqpn);
    }
    if (found.size() != transfers_.size())
        std::printf(
            "# %.1f s: %zu transfer QPs on %s (%zu to attack)\n", uptime_s(), found.size(),
            o_.device.c_str(),
            static_cast<std::size_t>(std::count_if(found.begin(), found.end(), [](const Target& t) {
                return t.kind == Target::Kind::Transfer;
            })));
    transfers_ = found;
    // Unconnected: the GSI QP, QPN 0, the top QPN, and the numbers just past the highest in use.
    unconnected_.clear();
    for (std::uint32_t qpn :
         {0u, 1u, 0xffffffu, highest + 1, highest + 2, highest + 5, highest + 64}) {
        Target t;
        t.dqpn = qpn & 0xffffff;
        t.sqpn = gen_.rng().u32() & 0xffffff;
        t.rq_psn = gen_.rng().u32() & kPsnMask;
        t.seg = segment_size(o_.mtu);
        unconnected_.push_back(t);
    }
    // QPNs are handed out in sequence: the ones just below ours may be someone's, connected
    // to a neighbour (a guesser's targets; their PSNs are not known).
    for (const auto& q : own_) {
        for (std::uint32_t d = 1; d <= 4; ++d) {
            Target t;
            t.dqpn = (q->t.dqpn - d) & 0xffffff;
            const bool is_protected =
                std::any_of(transfers_.begin(), transfers_.end(), [&](const Target& x) {
                    return x.kind == Target::Kind::Protected && x.dqpn == t.dqpn;
                });
            if (is_protected) continue;
            t.sqpn = (t.dqpn + (gen_.rng().chance(50) ? 1 : 0xffffff)) & 0xffffff;
            t.rq_psn = gen_.rng().u32() & kPsnMask;
            t.seg = segment_size(o_.mtu);
            unconnected_.push_back(t);
        }
    }
}

void PacketRun::learn() {
    if (!sniff_) return;
    for (int i = 0; i < 256; ++i) {
        const auto s = sniff_->poll();
        if (!s) return;
        auto update = [&](Target& t) {
            if (t.dqpn != s->dut_qpn) return;
            if (s->ack) {
                t.rq_psn = s->psn;
            } else {
                t.sq_psn = s->psn;
            }
            learned_++;
        };
        for (Target& t : transfers_) update(t);
    }
}

Target& PacketRun::pick_target() {
    Rng& r = gen_.rng();
    const unsigned roll = static_cast<unsigned>(r.below(100));
    if (roll < 30 && !transfers_.empty()) {
        Target& t = transfers_[r.below(transfers_.size())];
        // Without a live view, guess: the transfer has moved on from its first PSN.
        if (!sniff_ && r.chance(50)) {
            static thread_local Target guess;
            guess = t;
            guess.rq_psn = psn_add(t.rq_psn, static_cast<std::int64_t>(r.below(1 << 17)));
            guess.sq_psn = psn_add(t.sq_psn, static_cast<std::int64_t>(r.below(1 << 17)));
            return guess;
        }
        return t;
    }
    if (roll < 45) return unconnected_[r.below(unconnected_.size())];
    return own_[r.below(own_.size())]->t;
}

void PacketRun::send(Shot& s) {
    UdpTransport* via = s.wrong_source && alt_ ? alt_.get() : udp_.get();
    const auto src_port = static_cast<std::uint16_t>(
        METAROCE_ENTROPY_BASE | ((0x1357u + s.path * 0x9e5u) & METAROCE_ENTROPY_MASK));
    try {
        via->send(dut_, METAROCE_UDP_PORT, src_port, s.bytes, 0);
    } catch (const std::exception& e) {
        // ENOBUFS and the like under load: not the device's fault.
        if (o_.verbose_from <= step_) std::printf("# send: %s\n", e.what());
    }
}

bool PacketRun::liveness() {
    dog_.step("liveness: open a QP", step_);
    auto q = open_own(false);
    Target& t = q->t;
    const auto data = tools::pattern(1024, o_.seed);
    Packet w;
    w.bth.opcode = Opcode::Write;
    w.bth.flags = flag::kFirst | flag::kLast | flag::kAckReq;
    w.bth.dqpn = t.dqpn;
    w.bth.sqpn = t.sqpn;
    w.bth.psn = t.rq_psn;
    w.ext = Deth{t.mr_addr + 512, t.mr_rkey, 0, 1024, 0};
    w.payload = data;
    Packet s = w;
    s.bth.opcode = Opcode::Send;
    s.bth.psn = psn_next(t.rq_psn);
    s.ext = Deth{0, 0, 0, 1024, 0};
    Shot shot{encode(w), 0, true, false, KnownBug::None, "liveness WRITE"};
    send(shot);
    shot.bytes = encode(s);
    send(shot);
    dog_.step("liveness: wait for the WRITE and the SEND", step_);
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    bool wrote = false;
    std::optional<ibv_wc> wc;
    while (Clock::now() < deadline && !(wrote && wc)) {
        wrote = wrote || std::memcmp(q->mr->data() + 512, data.data(), data.size()) == 0;
        if (!wc) wc = tools::poll_one(q->qp->recv_cq(), 50);
    }
    const bool recv_ok =
        wc && wc->status == IBV_WC_SUCCESS && wc->byte_len == 1024 &&
        std::memcmp(q->local->data() + wc->wr_id * kRecvLen, data.data(), 1024) == 0;
    std::printf("# liveness: WRITE %s, SEND %s\n", wrote ? "placed" : "NOT placed",
                recv_ok ? "received" : (wc ? tools::wc_status_name(wc->status) : "NOT received"));
    return wrote && recv_ok;
}

int PacketRun::run() {
    std::printf("# metaroce-fuzz packets: seed 0x%llx, device %s at %s, from %s%s%s%s, %s\n",
                static_cast<unsigned long long>(o_.seed), o_.device.c_str(), o_.dut_ip.c_str(),
                o_.local_ip.c_str(), alt_ ? (" and " + o_.alt_ip).c_str() : "",
                o_.netns.empty() ? "" : (" in netns " + o_.netns).c_str(),
                sniff_ ? ", watching the device's packets" : "",
                o_.avoid_known ? "avoiding the known bugs" : "known bugs reachable");
    std::fflush(stdout);
    for (int i = 0; i < o_.own_qps; ++i) own_.push_back(open_own(i % 2 == 0));
    refresh_transfers();
    const auto start = Clock::now();
    auto next_refresh = start + std::chrono::seconds(2);
    const double per_packet_s = 1.0 / std::max(1, o_.rate);
    for (step_ = 0;; ++step_) {
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        if (o_.count && step_ >= o_.count) break;
        if (o_.seconds > 0 && elapsed >= o_.seconds) break;
        if (!o_.count && o_.seconds <= 0) break;
        if (Clock::now() >= next_refresh) {
            refresh_transfers();
            next_refresh = Clock::now() + std::chrono::seconds(2);
        }
        learn();
        if (step_ % 64 == 0) {
            const std::size_t i = gen_.rng().below(own_.size());
            tend(*own_[i], i);
        }
        Target& target = pick_target();
        dog_.step("generate", step_);
        Shot s = gen_.next(target);
        if (s.known != KnownBug::None) known_sent_[s.known]++;
        if (o_.verbose_from <= step_)
            trace("step %llu -> qpn 0x%x (%s): %s%s%s", static_cast<unsigned long long>(step_),
                  target.dqpn,
                  target.kind == Target::Kind::Own         ? "own"
                  : target.kind == Target::Kind::Transfer  ? "transfer"
                  : target.kind == Target::Kind::Protected ? "protected"
                                                           : "unconnected",
                  s.what.c_str(), s.known != KnownBug::None ? " KNOWN " : "",
                  s.known != KnownBug::None ? to_string(s.known) : "");
        dog_.step("send", step_);
        send(s);
        sent_++;
        if (s.valid) valid_sent_++;
        if (o_.progress_every && step_ % o_.progress_every == 0) {
            std::printf("# %.1f s: step %llu\n", uptime_s(),
                        static_cast<unsigned long long>(step_));
            std::fflush(stdout);
        }
        const double ahead =
            step_ * per_packet_s - std::chrono::duration<double>(Clock::now() - start).count();
        if (ahead > 0.002) std::this_thread::sleep_for(std::chrono::duration<double>(ahead));
    }
    std::printf(
        "# sent %llu packets (%llu valid), renewed %llu own QPs, learned %llu windows",
        static_cast<unsigned long long>(sent_), static_cast<unsigned long long>(valid_sent_),
        static_cast<unsigned long long>(recreated_), static_cast<unsigned long long>(learned_));
    for (const auto& [bug, n] : known_sent_)
        std::printf(", %llu reaching %s", static_cast<unsigned long long>(n), to_string(bug));
    std::printf("\n");
    dog_.step("destroy own QPs", step_);
    own_.clear();
    const bool alive = liveness();
    std::printf("%s - metaroce-fuzz packets, seed 0x%llx\n", alive ? "ok" : "not ok",
                static_cast<unsigned long long>(o_.seed));
    return alive ? 0 : 1;
}

}  // namespace

int run_packets(const Options& o) {
    PacketRun run(o);
    return run.run();
}

}  // namespace metaroce::fuzz
