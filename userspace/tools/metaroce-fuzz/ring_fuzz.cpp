// The hostile-process fuzzer (docs/fuzzing.md): as whatever user runs it, it opens the
// device through libibverbs and our provider, connects two RC QPs to each other over the
// device's loopback path and keeps a UD QP with an address handle, posts and polls normally,
// and in between rewrites the rings it shares with the kernel: producer jumps and rewinds
// followed by doorbells, WQEs changed after the doorbell, bad opcodes, SGE counts, inline
// lengths and AH handles, a CQ consumer ahead of the producer, garbage in CQ, SQ and RQ
// memory and in the indices the kernel owns. The ring layout (queue header page, then
// slots; include/uapi/rdma/metaroce_abi.h) is found without the provider's private
// structures: each queue is a mapping of the uverbs file that appears when the object is
// created, and work requests with marker wr_ids show which mapping is which and the stride.
// Every call and wait is bounded by the watchdog. At the end a fresh pair must still move
// verified data.
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/metaroce_abi.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "fuzz.h"
#include "pattern.h"
#include "rng.h"
#include "verbs_util.h"
#include "watchdog.h"

namespace metaroce::fuzz {
namespace {

using Clock = std::chrono::steady_clock;
using tools::MemoryRegion;
using tools::VerbsDevice;

constexpr std::uint32_t kBuf = 64 * 1024;
constexpr std::uint64_t kMarker = 0x52494e47465a0000ull;  // "RINGFZ"

// A mapping of /dev/infiniband/uverbs* in this process.
struct Mapping {
    std::uint8_t* base = nullptr;
    std::size_t len = 0;
    bool operator<(const Mapping& o) const { return base < o.base; }
};

std::set<Mapping> uverbs_maps() {
    std::set<Mapping> out;
    std::ifstream f("/proc/self/maps");
    std::string line;
    while (std::getline(f, line)) {
        if (line.find("/dev/infiniband/uverbs") == std::string::npos) continue;
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2) continue;
        out.insert({reinterpret_cast<std::uint8_t*>(lo), hi - lo});
    }
    return out;
}

std::vector<Mapping> new_maps(const std::set<Mapping>& before) {
    std::vector<Mapping> out;
    for (const Mapping& m : uverbs_maps())
        if (!before.count(m)) out.push_back(m);
    return out;
}

// A ring as the fuzzer sees it.
struct Ring {
    Mapping map;
    std::uint32_t stride = 0;
    std::uint32_t entries = 0;
    metaroce_queue_hdr* hdr() const { return reinterpret_cast<metaroce_queue_hdr*>(map.base); }
    std::uint8_t* slot(std::uint32_t i) const {
        return map.base + METAROCE_QUEUE_HDR_SIZE + std::size_t{i & (entries - 1)} * stride;
    }
    bool ok() const { return map.base && stride && entries; }
};

// Where `marker` lies in the slots of `m` (offset from the slots' start), or -1.
long find_marker(const Mapping& m, std::uint64_t marker) {
    for (std::size_t off = METAROCE_QUEUE_HDR_SIZE; off + 8 <= m.len; off += 8) {
        std::uint64_t v;
        std::memcpy(&v, m.base + off, 8);
        if (v == marker) return static_cast<long>(off - METAROCE_QUEUE_HDR_SIZE);
    }
    return -1;
}

void size_ring(Ring& r, std::uint32_t stride) {
    r.stride = stride;
    std::uint32_t n = 1;
    while (METAROCE_QUEUE_HDR_SIZE + std::size_t{n} * 2 * stride <= r.map.len) n *= 2;
    r.entries = n;
}

struct Cq {
    ibv_cq* cq = nullptr;
    Ring ring;
};

struct Qp {
    ibv_qp* qp = nullptr;
    Ring sq, rq;
    ibv_qp_type type = IBV_QPT_RC;
};

class RingRun {
  public:
    explicit RingRun(const Options& o);
    ~RingRun();
    int run();

  private:
    Cq make_cq();
    Qp make_qp(ibv_cq* cq, ibv_qp_type type);
    void learn_rq(Qp& q);
    void learn_sq(Qp& q);
    void connect_pair();
    void connect_ud();
    void open_all();
    void close_all();
    bool post_recv(Qp& q, std::uint64_t wr_id, std::uint32_t off, std::uint32_t len);
    bool post_send(Qp& q, ibv_wr_opcode op, std::uint64_t wr_id, std::uint32_t off,
                   std::uint32_t len, unsigned flags);
    void doorbell_send(Qp& q);
    void doorbell_recv(Qp& q);
    void poll_all();
    void scribble_wqe(Qp& q, std::uint8_t* slot);
    void step_once();
    void race_rq_flush();
    bool liveness();
    void log(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

    Options o_;
    Watchdog dog_;
    Rng rng_;
    VerbsDevice dev_;
    int gid_index_ = 1;
    ibv_gid gid_{};
    std::unique_ptr<MemoryRegion> buf_a_, buf_b_;
    Cq cq_a_, cq_b_, cq_u_;
    Qp a_, b_, u_;
    ibv_ah* ah_ = nullptr;
    std::uint64_t step_ = 0;
    std::uint64_t errors_ = 0, renewed_ = 0, wcs_ = 0, bad_wcs_ = 0, races_ = 0;
    std::atomic<std::uint64_t> flushed_{0};
};

RingRun::RingRun(const Options& o)
    : o_(o), dog_(o.seed, o.watchdog_s), rng_(o.seed), dev_(o.device) {
    const auto idx = dev_.gid_index_for(o.dut_ip);
    if (!idx) throw std::runtime_error("device " + o.device + " has no GID for " + o.dut_ip);
    gid_index_ = *idx;
    gid_ = dev_.gid(gid_index_);
    const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    buf_a_ = std::make_unique<MemoryRegion>(dev_.pd(), kBuf, rw);
    buf_b_ = std::make_unique<MemoryRegion>(dev_.pd(), kBuf, rw);
}

RingRun::~RingRun() { close_all(); }

void RingRun::log(const char* fmt, ...) {
    if (o_.verbose_from > step_) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    trace("step %llu: %s", static_cast<unsigned long long>(step_), buf);
}

Cq RingRun::make_cq() {
    Cq c;
    dog_.step("ibv_create_cq", step_);
    const auto before = uverbs_maps();
    c.cq = ibv_create_cq(dev_.ctx(), 64, nullptr, nullptr, 0);
    if (!c.cq) throw std::runtime_error("ibv_create_cq failed");
    const auto added = new_maps(before);
    if (added.size() == 1) {
        c.ring.map = added[0];
        size_ring(c.ring, sizeof(metaroce_cqe));
    }
    return c;
}

Qp RingRun::make_qp(ibv_cq* cq, ibv_qp_type type) {
    Qp q;
    q.type = type;
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = type;
    init.cap.max_send_wr = 32;
    init.cap.max_recv_wr = 32;
    init.cap.max_send_sge = 2;
    init.cap.max_recv_sge = 2;
    init.cap.max_inline_data = 64;
    dog_.step("ibv_create_qp", step_);
    const auto before = uverbs_maps();
    q.qp = ibv_create_qp(dev_.pd(), &init);
    if (!q.qp) throw std::runtime_error(std::string("ibv_create_qp: ") + std::strerror(errno));
    const auto added = new_maps(before);
    // Until the markers say otherwise: the provider maps the SQ first.
    if (added.size() == 2) {
        q.sq.map = added[0];
        q.rq.map = added[1];
    }
    return q;
}

bool RingRun::post_recv(Qp& q, std::uint64_t wr_id, std::uint32_t off, std::uint32_t len) {
    MemoryRegion& m = &q == &a_ ? *buf_a_ : *buf_b_;
    ibv_sge sge{m.addr() + off % kBuf, std::min(len, kBuf - off % kBuf), m.lkey()};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    dog_.step("ibv_post_recv", step_);
    const int rc = ibv_post_recv(q.qp, &wr, &bad);
    if (rc) errors_++;
    return rc == 0;
}

bool RingRun::post_send(Qp& q, ibv_wr_opcode op, std::uint64_t wr_id, std::uint32_t off,
                        std::uint32_t len, unsigned flags) {
    MemoryRegion& m = &q == &b_ ? *buf_b_ : *buf_a_;
    MemoryRegion& peer = &q == &b_ ? *buf_a_ : *buf_b_;
    off %= kBuf;
    len = std::min(len, kBuf - off);
    ibv_sge sge{m.addr() + off, len, m.lkey()};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = flags;
    if (q.type == IBV_QPT_UD) {
        wr.wr.ud.ah = ah_;
        wr.wr.ud.remote_qpn = q.qp->qp_num;
        wr.wr.ud.remote_qkey = 0x1234;
    } else {
        wr.wr.rdma.remote_addr = peer.addr() + off;
        wr.wr.rdma.rkey = peer.rkey();
    }
    ibv_send_wr* bad = nullptr;
    dog_.step("ibv_post_send", step_);
    const int rc = ibv_post_send(q.qp, &wr, &bad);
    if (rc) errors_++;
    return rc == 0;
}

// A doorbell of our own (a POST_SEND / POST_RECV command without work requests), so that
// the kernel looks at a producer index the provider did not write.
void RingRun::doorbell_send(Qp& q) {
    struct {
        ib_uverbs_cmd_hdr hdr;
        ib_uverbs_post_send cmd;
    } req{};
    ib_uverbs_post_send_resp resp{};
    req.hdr.command = IB_USER_VERBS_CMD_POST_SEND;
    req.hdr.in_words = sizeof req / 4;
    req.hdr.out_words = sizeof resp / 4;
    req.cmd.response = reinterpret_cast<std::uintptr_t>(&resp);
    req.cmd.qp_handle = q.qp->handle;
    req.cmd.wqe_size = sizeof(ib_uverbs_send_wr);
    dog_.step("send doorbell", step_);
    if (write(dev_.ctx()->cmd_fd, &req, sizeof req) < 0) errors_++;
}

void RingRun::doorbell_recv(Qp& q) {
    struct {
        ib_uverbs_cmd_hdr hdr;
        ib_uverbs_post_recv cmd;
    } req{};
    ib_uverbs_post_recv_resp resp{};
    req.hdr.command = IB_USER_VERBS_CMD_POST_RECV;
    req.hdr.in_words = sizeof req / 4;
    req.hdr.out_words = sizeof resp / 4;
    req.cmd.response = reinterpret_cast<std::uintptr_t>(&resp);
    req.cmd.qp_handle = q.qp->handle;
    req.cmd.wqe_size = sizeof(ib_uverbs_recv_wr);
    dog_.step("recv doorbell", step_);
    if (write(dev_.ctx()->cmd_fd, &req, sizeof req) < 0) errors_++;
}

// Finds which of a QP's two mappings is its SQ and which its RQ, and their strides, from
// work requests with marker wr_ids (the QP must be able to post: INIT or later).
void RingRun::learn_rq(Qp& q) {
    if (!q.sq.map.base || !q.rq.map.base) return;
    const std::uint64_t m1 = kMarker | (rng_.u32() & 0x7fff), m2 = m1 | 0x8000;
    post_recv(q, m1, 0, 64);
    post_recv(q, m2, 0, 64);
    long p1 = find_marker(q.rq.map, m1), p2 = find_marker(q.rq.map, m2);
    if (p1 < 0) {
        std::swap(q.sq.map, q.rq.map);
        p1 = find_marker(q.rq.map, m1);
        p2 = find_marker(q.rq.map, m2);
    }
    if (p1 >= 0 && p2 > p1) size_ring(q.rq, static_cast<std::uint32_t>(p2 - p1));
}

// After learn_rq() and after the peer has receives posted (a SEND into an empty RQ is
// answered with RNR NAKs).
void RingRun::learn_sq(Qp& q) {
    if (!q.sq.map.base || !q.rq.map.base) return;
    const std::uint64_t m1 = kMarker | 0x10000 | (rng_.u32() & 0x7fff), m2 = m1 | 0x8000;
    post_send(q, IBV_WR_SEND, m1, 0, 8, 0);
    post_send(q, IBV_WR_SEND, m2, 0, 8, 0);
    const long s1 = find_marker(q.sq.map, m1), s2 = find_marker(q.sq.map, m2);
    if (s1 >= 0 && s2 > s1) size_ring(q.sq, static_cast<std::uint32_t>(s2 - s1));
}

void RingRun::connect_pair() {
    for (Qp* q : {&a_, &b_}) {
        Qp* other = q == &a_ ? &b_ : &a_;
        ibv_qp_attr at{};
        at.qp_state = IBV_QPS_INIT;
        at.port_num = dev_.port();
        at.qp_access_flags =
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        dog_.step("modify INIT", step_);
        if (ibv_modify_qp(q->qp, &at,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            errors_++;
        ibv_qp_attr r{};
        r.qp_state = IBV_QPS_RTR;
        r.path_mtu = IBV_MTU_1024;
        r.dest_qp_num = other->qp->qp_num;
        r.rq_psn = 0xfffff0 + (q == &a_);  // across the wrap soon
        r.max_dest_rd_atomic = 4;
        r.min_rnr_timer = 1;
        r.ah_attr.is_global = 1;
        r.ah_attr.grh.dgid = gid_;
        r.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index_);
        r.ah_attr.grh.hop_limit = 64;
        r.ah_attr.port_num = dev_.port();
        dog_.step("modify RTR", step_);
        if (ibv_modify_qp(q->qp, &r,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
            errors_++;
    }
    for (Qp* q : {&a_, &b_}) {
        ibv_qp_attr s{};
        s.qp_state = IBV_QPS_RTS;
        s.sq_psn = 0xfffff0 + (q == &b_);
        s.timeout = 12;
        s.retry_cnt = 3;
        s.rnr_retry = 7;  // for ever: emulation may be slow to post receives
        s.max_rd_atomic = 4;
        dog_.step("modify RTS", step_);
        if (ibv_modify_qp(q->qp, &s,
                          IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                              IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
            errors_++;
    }
}

void RingRun::connect_ud() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = dev_.port();
    a.qkey = 0x1234;
    dog_.step("modify UD", step_);
    ibv_modify_qp(u_.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    ibv_modify_qp(u_.qp, &a, IBV_QP_STATE);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    ibv_modify_qp(u_.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    if (!ah_) {
        ibv_ah_attr ah{};
        ah.is_global = 1;
        ah.grh.dgid = gid_;
        ah.grh.sgid_index = static_cast<std::uint8_t>(gid_index_);
        ah.grh.hop_limit = 64;
        ah.port_num = dev_.port();
        dog_.step("ibv_create_ah", step_);
        ah_ = ibv_create_ah(dev_.pd(), &ah);
    }
}

void RingRun::open_all() {
    cq_a_ = make_cq();
    cq_b_ = make_cq();
    cq_u_ = make_cq();
    a_ = make_qp(cq_a_.cq, IBV_QPT_RC);
    b_ = make_qp(cq_b_.cq, IBV_QPT_RC);
    u_ = make_qp(cq_u_.cq, IBV_QPT_UD);
    connect_pair();
    connect_ud();
    for (Qp* q : {&a_, &b_, &u_}) learn_rq(*q);
    for (int i = 0; i < 8; ++i) {
        post_recv(a_, i, 4096u * i, 4096);
        post_recv(b_, i, 4096u * i, 4096);
        post_recv(u_, i, 4096u * i, 4096);
    }
    learn_sq(a_);
    learn_sq(b_);
    if (ah_) learn_sq(u_);
}

void RingRun::close_all() {
    for (Qp* q : {&a_, &b_, &u_}) {
        if (!q->qp) continue;
        dog_.step("ibv_destroy_qp", step_);
        if (ibv_destroy_qp(q->qp)) errors_++;
        *q = Qp{};
    }
    for (Cq* c : {&cq_a_, &cq_b_, &cq_u_}) {
        if (!c->cq) continue;
        dog_.step("ibv_destroy_cq", step_);
        if (ibv_destroy_cq(c->cq)) errors_++;
        *c = Cq{};
    }
}

void RingRun::poll_all() {
    for (Cq* c : {&cq_a_, &cq_b_, &cq_u_}) {
        if (!c->cq) continue;
        ibv_wc wc[16];
        dog_.step("ibv_poll_cq", step_);
        // Bounded: a CQ whose memory is garbage may look full forever.
        for (int round = 0; round < 8; ++round) {
            const int n = ibv_poll_cq(c->cq, 16, wc);
            if (n <= 0) {
                if (n < 0) errors_++;
                break;
            }
            wcs_ += static_cast<std::uint64_t>(n);
            for (int i = 0; i < n; ++i)
                if (wc[i].status != IBV_WC_SUCCESS) bad_wcs_++;
        }
    }
}

void RingRun::scribble_wqe(Qp& q, std::uint8_t* slot) {
    auto* w = reinterpret_cast<metaroce_send_wqe*>(slot);
    switch (rng_.below(9)) {
        case 0:
            w->opcode = rng_.pick<std::uint32_t>(
                {0, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0xff, 0xffffffffu, rng_.u32()});
            break;
        case 1:
            w->num_sge = rng_.pick<std::uint32_t>({0, 2, 3, 4, 64, 0x10000, 0xffffffffu});
            break;
        case 2:
            w->flags |= METAROCE_WQE_INLINE;
            w->inline_len = rng_.pick<std::uint32_t>(
                {0, q.sq.stride - 64, q.sq.stride - 63, q.sq.stride, 4096, 0xffffffffu});
            break;
        case 3:
            w->ud.ah = rng_.pick<std::uint32_t>({0, 1, 2, 0xffff, 0xffffffffu, rng_.u32()});
            break;
        case 4:
            w->flags = rng_.u32();
            break;
        case 5: {
            auto* sge = reinterpret_cast<metaroce_sge*>(slot + sizeof(metaroce_send_wqe));
            sge->addr = rng_.pick<std::uint64_t>({0, ~0ull, ~0ull - 4095, 1ull << 32, rng_.next()});
            sge->length = rng_.pick<std::uint32_t>({0, 1, kBuf + 1, 0x7fffffff, 0xffffffffu});
            if (rng_.chance(50)) sge->lkey = rng_.u32();
            break;
        }
        case 6:
            w->rdma.remote_addr = rng_.next();
            w->rdma.rkey = rng_.u32();
            break;
        case 7:
            w->ud.remote_qpn = rng_.u32();
            break;
        default:
            rng_.fill(slot, q.sq.stride);
            break;
    }
}

ibv_qp_state qp_state(const Qp& q) {
    ibv_qp_attr a{};
    ibv_qp_init_attr init{};
    return ibv_query_qp(q.qp, &a, IBV_QP_STATE, &init) == 0 ? a.qp_state : IBV_QPS_UNKNOWN;
}

// Finding 3's input: the QP goes to ERR, and the responder's flush (run by the QP's transmit
// worker soon after) keeps finding receives, because a thread keeps the RQ producer half a
// ring past the consumer the kernel publishes. With the bug the flush never ends (the kernel
// reports a soft lockup after 20 s); with a flush that takes a snapshot the consumer stops
// moving and the thread gives up after a second of that.
void RingRun::race_rq_flush() {
    // A QP already in ERR was flushed already: race a healthy one.
    if (qp_state(a_) != IBV_QPS_RTS || qp_state(b_) != IBV_QPS_RTS) {
        close_all();
        open_all();
    }
    Qp& q = rng_.chance(50) ? a_ : b_;
    if (!q.rq.ok()) return;
    auto* producer = &q.rq.hdr()->producer;
    const auto* consumer = &q.rq.hdr()->consumer;
    const std::uint32_t ahead = std::max(1u, q.rq.entries / 2);
    std::atomic<bool> started{false};
    races_++;
    std::thread racer([&] {
        const auto until = Clock::now() + std::chrono::seconds(std::max(5, o_.watchdog_s - 5));
        std::uint32_t last = __atomic_load_n(consumer, __ATOMIC_ACQUIRE);
        auto moved = Clock::now();
        while (Clock::now() < until) {
            const std::uint32_t c = __atomic_load_n(consumer, __ATOMIC_ACQUIRE);
            __atomic_store_n(producer, c + ahead, __ATOMIC_RELEASE);
            if (c != last) {
                flushed_ += c - last;
                last = c;
                moved = Clock::now();
            }
            if (started && Clock::now() - moved > std::chrono::seconds(1)) break;
        }
    });
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_ERR;
    dog_.step("modify ERR while the RQ producer runs", step_);
    ibv_modify_qp(q.qp, &at, IBV_QP_STATE);
    started = true;
    dog_.step("RQ producer racing the flush", step_);
    racer.join();
}

void RingRun::step_once() {
    const unsigned roll = static_cast<unsigned>(rng_.below(100));
    Qp& q = rng_.chance(45) ? a_ : (rng_.chance(70) ? b_ : u_);
    const bool ud = &q == &u_;
    if (roll < 30) {
        // Normal work.
        const std::uint32_t off = static_cast<std::uint32_t>(rng_.below(kBuf));
        const std::uint32_t len = static_cast<std::uint32_t>(rng_.below(6000));
        if (rng_.chance(40)) {
            post_recv(q, step_, off, len);
        } else {
            const ibv_wr_opcode op =
                ud ? IBV_WR_SEND
                   : rng_.pick({IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
                                IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND_WITH_IMM});
            post_send(q, op, step_, off, ud ? std::min(len, 1024u) : len,
                      IBV_SEND_SIGNALED | (rng_.chance(10) && len <= 64 ? IBV_SEND_INLINE : 0));
        }
        poll_all();
        return;
    }
    if (roll < 40 && q.sq.ok()) {
        // Producer jump or rewind, then a doorbell.
        const std::uint32_t n = q.sq.entries;
        const std::uint32_t cur = q.sq.hdr()->producer;
        const std::uint32_t to = cur + rng_.pick<std::uint32_t>({1, 2, n - 1, n, n + 1, 0u - 1,
                                                                 0u - n, 0x80000000u, rng_.u32()});
        log("SQ producer of QP 0x%x: %u -> %u", q.qp->qp_num, cur, to);
        q.sq.hdr()->producer = to;
        doorbell_send(q);
        return;
    }
    if (roll < 48 && q.rq.ok()) {
        const std::uint32_t n = q.rq.entries;
        const std::uint32_t cur = q.rq.hdr()->producer;
        const std::uint32_t to = cur + rng_.pick<std::uint32_t>({1, n - 1, n, n + 1, 0u - 1, 0u - n,
                                                                 0x80000000u, rng_.u32()});
        log("RQ producer of QP 0x%x: %u -> %u", q.qp->qp_num, cur, to);
        q.rq.hdr()->producer = to;
        if (rng_.chance(70)) rng_.fill(q.rq.slot(cur), q.rq.stride);
        doorbell_recv(q);
        return;
    }
    if (roll < 62 && q.sq.ok()) {
        // A WQE changed after the doorbell (or before it, ahead of the producer).
        const std::uint32_t before = q.sq.hdr()->producer;
        const bool posted = rng_.chance(70) && post_send(q, ud ? IBV_WR_SEND : IBV_WR_RDMA_WRITE,
                                                         step_, 0, 512, IBV_SEND_SIGNALED);
        std::uint8_t* slot = q.sq.slot(posted ? before : q.sq.hdr()->producer);
        scribble_wqe(q, slot);
        log("WQE scribbled on QP 0x%x (%s)", q.qp->qp_num,
            posted ? "after its doorbell" : "unpublished");
        if (!posted) q.sq.hdr()->producer += 1;
        doorbell_send(q);
        return;
    }
    if (roll < 70) {
        Cq& c = rng_.chance(40) ? cq_a_ : (rng_.chance(60) ? cq_b_ : cq_u_);
        if (!c.ring.ok()) return;
        const std::uint32_t prod = c.ring.hdr()->producer;
        const std::uint32_t to =
            prod + rng_.pick<std::uint32_t>(
                       {1, 2, c.ring.entries, c.ring.entries + 1, 0x80000000u, rng_.u32()});
        log("CQ consumer ahead of the producer: %u (producer %u)", to, prod);
        c.ring.hdr()->consumer = to;
        if (rng_.chance(50)) post_send(a_, IBV_WR_RDMA_WRITE, step_, 0, 64, IBV_SEND_SIGNALED);
        poll_all();
        return;
    }
    if (roll < 78) {
        // Garbage in memory the kernel writes: CQEs, the CQ producer, the SQ/RQ consumers.
        Cq& c = rng_.chance(50) ? cq_a_ : cq_b_;
        switch (rng_.below(4)) {
            case 0:
                if (c.ring.ok()) rng_.fill(c.ring.slot(rng_.u32()), c.ring.stride);
                break;
            case 1:
                if (c.ring.ok()) c.ring.hdr()->producer = rng_.u32();
                break;
            case 2:
                if (q.sq.ok()) q.sq.hdr()->consumer = rng_.u32();
                break;
            default:
                if (q.sq.ok()) q.sq.hdr()->doorbell_needed = rng_.u32();
                break;
        }
        log("garbage in kernel-written ring memory");
        poll_all();
        return;
    }
    if (roll < 86) {
        // Garbage over unpublished slots, then post normally over it.
        Ring& r = rng_.chance(50) ? q.sq : q.rq;
        if (r.ok()) rng_.fill(r.slot(rng_.u32()), r.stride);
        post_send(q, ud ? IBV_WR_SEND : IBV_WR_RDMA_READ, step_, 0, 256, IBV_SEND_SIGNALED);
        return;
    }
    if (roll < 88 && !o_.avoid_known) {
        log("RQ producer racing a flush (finding 3)");
        race_rq_flush();
        return;
    }
    if (roll < 93) {
        poll_all();
        return;
    }
    // Renew the objects: destroy under traffic, create afresh.
    if (rng_.chance(30) || qp_state(a_) != IBV_QPS_RTS || qp_state(b_) != IBV_QPS_RTS) {
        log("renewing every QP and CQ");
        close_all();
        open_all();
        renewed_++;
    }
}

bool RingRun::liveness() {
    close_all();
    open_all();
    // Let the marker SENDs of open_all() land first; the WRITE goes where no receive is.
    dog_.step("liveness: settle", step_);
    for (int i = 0; i < 20; ++i) {
        poll_all();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    constexpr std::uint32_t kAt = kBuf / 2;
    const auto data = tools::pattern(4096, o_.seed);
    std::memcpy(buf_a_->data() + kAt, data.data(), data.size());
    std::memset(buf_b_->data() + kAt, 0, data.size());
    const bool posted = post_send(a_, IBV_WR_RDMA_WRITE, 77, kAt, 4096, IBV_SEND_SIGNALED);
    bool placed = false;
    std::optional<ibv_wc> wc;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    dog_.step("liveness: wait for the WRITE", step_);
    while (posted && Clock::now() < deadline && !(placed && wc)) {
        placed = placed || std::memcmp(buf_b_->data() + kAt, data.data(), data.size()) == 0;
        if (!wc) wc = tools::poll_one(cq_a_.cq, 10);
        if (wc && wc->wr_id != 77) wc.reset();  // a marker's
    }
    std::printf("# liveness: a WRITE between fresh QPs %s, its completion %s\n",
                placed ? "arrived intact" : "did NOT arrive",
                !posted ? "(not posted)"
                : wc    ? tools::wc_status_name(wc->status)
                        : "missing");
    return placed && wc && wc->status == IBV_WC_SUCCESS;
}

int RingRun::run() {
    std::printf("# metaroce-fuzz rings: seed 0x%llx, device %s, uid %d, %s\n",
                static_cast<unsigned long long>(o_.seed), o_.device.c_str(),
                static_cast<int>(getuid()),
                o_.avoid_known ? "avoiding the known bugs" : "known bugs reachable");
    open_all();
    std::printf("# rings: SQ %u x %u B, RQ %u x %u B, CQ %u x %u B\n", a_.sq.entries, a_.sq.stride,
                a_.rq.entries, a_.rq.stride, cq_a_.ring.entries, cq_a_.ring.stride);
    if (!a_.sq.ok() || !a_.rq.ok() || !cq_a_.ring.ok()) {
        std::printf("not ok - metaroce-fuzz rings: could not find the rings\n");
        return 1;
    }
    std::fflush(stdout);
    const auto start = Clock::now();
    for (step_ = 0;; ++step_) {
        if (o_.count && step_ >= o_.count) break;
        if (o_.seconds > 0 &&
            std::chrono::duration<double>(Clock::now() - start).count() >= o_.seconds)
            break;
        if (!o_.count && o_.seconds <= 0) break;
        step_once();
        if (o_.progress_every && step_ % o_.progress_every == 0) {
            std::printf("# %.1f s: step %llu\n", uptime_s(),
                        static_cast<unsigned long long>(step_));
            std::fflush(stdout);
        }
    }
    std::printf(
        "# %llu steps: %llu verbs errors returned, %llu completions (%llu not successful), %llu "
        "renewals\n",
        static_cast<unsigned long long>(step_), static_cast<unsigned long long>(errors_),
        static_cast<unsigned long long>(wcs_), static_cast<unsigned long long>(bad_wcs_),
        static_cast<unsigned long long>(renewed_));
    if (races_)
        std::printf(
            "# %llu races of the RQ producer against a flush: the kernel consumed %llu "
            "receives meanwhile\n",
            static_cast<unsigned long long>(races_),
            static_cast<unsigned long long>(flushed_.load()));
    const bool alive = liveness();
    close_all();
    if (ah_) ibv_destroy_ah(ah_);
    ah_ = nullptr;
    std::printf("%s - metaroce-fuzz rings, seed 0x%llx\n", alive ? "ok" : "not ok",
                static_cast<unsigned long long>(o_.seed));
    return alive ? 0 : 1;
}

}  // namespace

int run_rings(const Options& o) {
    RingRun run(o);
    return run.run();
}

}  // namespace metaroce::fuzz
