#include "harness.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <thread>

#include "pattern.h"

namespace metaroce::compliance {
namespace {

bool g_verbose = false;
const auto g_start = std::chrono::steady_clock::now();

std::uint32_t now_us32() {
    return static_cast<std::uint32_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::steady_clock::now() - g_start)
                                          .count());
}

// Milliseconds until `deadline`, negative once it has passed.
long long ms_until(std::chrono::steady_clock::time_point deadline) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now())
        .count();
}

// Where probes write: the last 4 KiB of mr, which no case uses otherwise.
constexpr std::uint64_t kProbeOffset = Conn::kMrSize - 4096;

}  // namespace

std::string format(const char* fmt, ...) {
    char buf[1024];
    std::va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

void expect(bool ok, const std::string& what) {
    if (!ok) throw CaseFailure(what);
}

void note(const char* fmt, ...) {
    char buf[1024];
    std::va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    std::printf("# %s\n", buf);
    std::fflush(stdout);
}

void set_verbose(bool v) { g_verbose = v; }
bool verbose() { return g_verbose; }

std::string describe(const Packet& p) {
    std::string s = format("%s psn=0x%06x flags=0x%02x path=%u dqpn=0x%06x sqpn=0x%06x",
                           std::string(to_string(p.bth.opcode)).c_str(), p.bth.psn, p.bth.flags,
                           p.bth.path, p.bth.dqpn, p.bth.sqpn);
    if (const auto* a = std::get_if<Ack>(&p.ext)) {
        s += format(" cum=0x%06x %s nak_psn=0x%06x arg=%u ce=%u msn=%u sack0=%08x sack7=%08x",
                    a->cum_psn, std::string(to_string(a->syndrome)).c_str(), a->nak_psn, a->nak_arg,
                    a->ce_count, a->msn, a->sack[0], a->sack[7]);
    } else if (const auto* d = std::get_if<Deth>(&p.ext)) {
        s += format(" addr=0x%llx key=0x%x msn=%u msg_len=%u imm=0x%x payload=%zu",
                    static_cast<unsigned long long>(d->addr), d->key, d->msn, d->msg_len, d->imm,
                    p.payload.size());
    } else if (const auto* r = std::get_if<ReadReq>(&p.ext)) {
        s += format(" va=0x%llx rkey=0x%x len=%u offset=%u msn=%u",
                    static_cast<unsigned long long>(r->va), r->rkey, r->len, r->offset, r->msn);
    } else if (const auto* a = std::get_if<AtomicReq>(&p.ext)) {
        s += format(" va=0x%llx rkey=0x%x msn=%u swap_add=0x%llx compare=0x%llx",
                    static_cast<unsigned long long>(a->va), a->rkey, a->msn,
                    static_cast<unsigned long long>(a->swap_add),
                    static_cast<unsigned long long>(a->compare));
    }
    return s;
}

std::vector<std::uint8_t> bytes_of(std::size_t n, std::uint64_t seed) {
    return tools::pattern(n, seed);
}

// ---------------------------------------------------------------------------------------------
// Env

Env::Env(const Options& options) : options_(options) {
    dev_ = std::make_unique<VerbsDevice>(options.device);
    if (options.gid_index >= 0) {
        gid_index_ = options.gid_index;
    } else {
        const auto index = dev_->gid_index_for(options.dut_ip.str());
        if (!index) {
            throw std::runtime_error("device " + dev_->name() + " has no GID for " +
                                     options.dut_ip.str());
        }
        gid_index_ = *index;
    }
    udp_ = std::make_unique<UdpTransport>(options.local_ip, options.port, options.netns);
    if (options.alt_ip) {
        alt_udp_ = std::make_unique<UdpTransport>(*options.alt_ip, options.port, options.netns);
    }
    rng_ ^= static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

int Env::ms(int base) const { return static_cast<int>(base * options_.time_scale); }

std::map<std::string, std::uint64_t> Env::counters() {
    // The RDMA core caches hardware counters for about 10 ms.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    return tools::read_hw_counters(dev_->name(), dev_->port());
}

bool Env::has_counters() {
    if (!has_counters_) has_counters_ = !tools::read_hw_counters(dev_->name()).empty();
    return *has_counters_;
}

void Env::drain(int quiet_ms) {
    while (udp_->recv(quiet_ms)) {
    }
    if (alt_udp_) {
        while (alt_udp_->recv(0)) {
        }
    }
}

std::uint32_t Env::next_fake_qpn() {
    fake_qpn_ = (fake_qpn_ + 7) & 0xffffff;
    return fake_qpn_;
}

std::uint32_t Env::random24() {
    rng_ = rng_ * 6364136223846793005ull + 1442695040888963407ull;
    // Away from the wrap (cases that want it ask for it).
    return static_cast<std::uint32_t>((rng_ >> 33) % 0xe00000) + 0x10000;
}

// ---------------------------------------------------------------------------------------------
// CounterCheck

CounterCheck::CounterCheck(Env& env) : env_(env) {
    if (env_.has_counters()) before_ = env_.counters();
}

void CounterCheck::refresh() {
    if (!after_) after_ = env_.counters();
}

std::uint64_t CounterCheck::delta(const std::string& name) {
    refresh();
    const auto a = after_->find(name);
    const auto b = before_.find(name);
    if (a == after_->end() || b == before_.end()) return 0;
    return a->second - b->second;
}

void CounterCheck::expect_delta(const std::string& name, std::uint64_t want, bool at_least) {
    if (!env_.has_counters()) {
        note("the DUT exports no counters: %s not checked", name.c_str());
        return;
    }
    refresh();
    if (after_->find(name) == after_->end()) {
        note("the DUT has no counter %s: not checked", name.c_str());
        return;
    }
    const std::uint64_t got = delta(name);
    expect(at_least ? got >= want : got == want,
           format("counter %s grew by %llu, expected %s%llu", name.c_str(),
                  static_cast<unsigned long long>(got), at_least ? "at least " : "",
                  static_cast<unsigned long long>(want)));
}

// ---------------------------------------------------------------------------------------------
// Conn

Conn::Conn(Env& env, const ConnOptions& o) : env_(env), start_(std::chrono::steady_clock::now()) {
    env_.drain(5);
    qp_ = std::make_unique<RcQp>(env.dev(), 256, 4, o.srq);
    const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    mr_ = std::make_unique<MemoryRegion>(env.dev().pd(), kMrSize, rw);
    ro_ = std::make_unique<MemoryRegion>(env.dev().pd(), kSmallMrSize, IBV_ACCESS_REMOTE_READ);
    wo_ = std::make_unique<MemoryRegion>(env.dev().pd(), kSmallMrSize,
                                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    local_ = std::make_unique<MemoryRegion>(env.dev().pd(), kMrSize, IBV_ACCESS_LOCAL_WRITE);
    tools::fill_pattern({mr_->data(), mr_->size()}, 0x4d52);
    tools::fill_pattern({ro_->data(), ro_->size()}, 0x524f);
    fake_qpn_ = env.next_fake_qpn();
    rq_psn_ = o.dut_rq_psn.value_or(env.random24()) & kPsnMask;
    sq_psn_ = o.dut_sq_psn.value_or(env.random24()) & kPsnMask;
    if (!o.connect) return;
    tools::RcConnectParams p;
    p.dest_qpn = fake_qpn_;
    p.rq_psn = rq_psn_;
    p.sq_psn = sq_psn_;
    p.dgid = *tools::gid_of_ip(env.options().local_ip.str());
    p.sgid_index = env.gid_index();
    p.mtu = env.options().mtu;
    p.access = o.access;
    p.min_rnr_timer = o.min_rnr_timer;
    p.timeout = o.timeout;
    p.retry_cnt = o.retry_cnt;
    p.rnr_retry = o.rnr_retry;
    p.max_dest_rd_atomic = o.max_dest_rd_atomic;
    p.to_rts = o.to_rts;
    qp_->connect(p);
    if (verbose()) {
        note("DUT QP 0x%06x rq_psn 0x%06x sq_psn 0x%06x, harness QP 0x%06x", dut_qpn(), rq_psn_,
             sq_psn_, fake_qpn_);
    }
}

Packet Conn::base(Opcode op, Psn psn, std::uint8_t flags) const {
    Packet p;
    p.bth.opcode = op;
    p.bth.flags = flags;
    p.bth.dqpn = dut_qpn();
    p.bth.sqpn = fake_qpn_;
    p.bth.psn = psn & kPsnMask;
    return p;
}

Packet Conn::write(Psn psn, std::uint64_t offset, std::vector<std::uint8_t> payload,
                   std::uint8_t flags, std::optional<std::uint32_t> msg_len) const {
    Packet p = base(Opcode::Write, psn, flags);
    const auto len = static_cast<std::uint32_t>(payload.size());
    p.ext = Deth{mr_->addr() + offset, mr_->rkey(), 0, msg_len.value_or(len), 0};
    p.payload = std::move(payload);
    return p;
}

std::vector<Packet> Conn::write_message(Psn psn, std::uint64_t offset,
                                        const std::vector<std::uint8_t>& data,
                                        std::uint32_t msn) const {
    std::vector<Packet> out;
    const std::uint32_t n = message_packets(static_cast<std::uint32_t>(data.size()), mtu());
    for (std::uint32_t k = 0; k < n; ++k) {
        const std::size_t begin = std::size_t{k} * mtu();
        const std::size_t end = std::min(data.size(), begin + mtu());
        std::uint8_t flags = 0;
        if (k == 0) flags |= flag::kFirst;
        if (k + 1 == n) flags |= flag::kLast | flag::kAckReq;
        Packet p = base(Opcode::Write, psn_add(psn, k), flags);
        p.ext = Deth{mr_->addr() + offset + begin, mr_->rkey(), msn,
                     static_cast<std::uint32_t>(data.size()), 0};
        p.payload.assign(data.begin() + static_cast<std::ptrdiff_t>(begin),
                         data.begin() + static_cast<std::ptrdiff_t>(end));
        out.push_back(std::move(p));
    }
    return out;
}

std::vector<Packet> Conn::send_message(Psn psn, std::uint32_t msn,
                                       const std::vector<std::uint8_t>& data,
                                       std::optional<std::uint32_t> imm) const {
    std::vector<Packet> out;
    const std::uint32_t n = message_packets(static_cast<std::uint32_t>(data.size()), mtu());
    for (std::uint32_t k = 0; k < n; ++k) {
        const std::size_t begin = std::size_t{k} * mtu();
        const std::size_t end = std::min(data.size(), begin + mtu());
        const bool last = k + 1 == n;
        std::uint8_t flags = 0;
        if (k == 0) flags |= flag::kFirst;
        if (last) flags |= flag::kLast | flag::kAckReq;
        if (last && imm) flags |= flag::kImm;
        Packet p = base(Opcode::Send, psn_add(psn, k), flags);
        p.ext =
            Deth{begin, 0, msn, static_cast<std::uint32_t>(data.size()), last && imm ? *imm : 0};
        p.payload.assign(data.begin() + static_cast<std::ptrdiff_t>(begin),
                         data.begin() + static_cast<std::ptrdiff_t>(end));
        out.push_back(std::move(p));
    }
    return out;
}

Packet Conn::read_request(Psn psn, std::uint64_t va, std::uint32_t rkey, std::uint32_t len,
                          std::uint32_t offset, std::uint32_t msn, std::uint8_t flags) const {
    Packet p = base(Opcode::ReadRequest, psn, flags);
    p.ext = ReadReq{va, rkey, len, offset, msn};
    return p;
}

Packet Conn::atomic(Opcode op, Psn psn, std::uint64_t va, std::uint32_t rkey,
                    std::uint64_t swap_add, std::uint64_t compare, std::uint32_t msn,
                    std::uint8_t flags) const {
    Packet p = base(op, psn, flags);
    p.ext = AtomicReq{va, rkey, msn, swap_add, compare};
    return p;
}

Packet Conn::ack(Psn cum, const std::set<Psn>& sacked, Syndrome syndrome, Psn nak_psn,
                 std::uint8_t nak_arg) const {
    Packet p = base(Opcode::Ack, cum, 0);
    Ack a;
    a.cum_psn = cum & kPsnMask;
    a.syndrome = syndrome;
    a.nak_psn = nak_psn & kPsnMask;
    a.nak_arg = nak_arg;
    a.ts_echo = echo_ts_;
    a.echo_path = echo_path_;
    for (const Psn s : sacked) {
        const std::int32_t i = psn_diff(s, cum) - 1;
        if (i < 0 || i >= 256) continue;
        a.sack[static_cast<std::size_t>(i) / 32] |= 0x80000000u >> (i % 32);
    }
    p.ext = a;
    return p;
}

std::uint16_t Conn::src_port_of(std::uint16_t path) {
    return static_cast<std::uint16_t>(METAROCE_ENTROPY_BASE |
                                      ((0x1357u + path * 0x9e5u) & METAROCE_ENTROPY_MASK));
}

Packet Conn::send(const Packet& p, std::uint16_t path, std::uint8_t tos) {
    Packet q = p;
    q.bth.path = path;
    q.bth.ts = now_us32();
    if (verbose()) note("  -> %s", describe(q).c_str());
    send_bytes(encode(q), path, tos);
    return q;
}

void Conn::send_bytes(const std::vector<std::uint8_t>& bytes, std::uint16_t path,
                      std::uint8_t tos) {
    env_.udp().send(env_.options().dut_ip, env_.options().port, src_port_of(path), bytes, tos);
}

std::optional<Seen> Conn::receive(int timeout_ms) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(env_.ms(timeout_ms));
    for (;;) {
        const long long left = ms_until(deadline);
        if (left < 0) return std::nullopt;
        std::optional<tools::Received> r = env_.udp().recv(static_cast<int>(left));
        if (!r) return std::nullopt;
        if (!(r->from == env_.options().dut_ip)) continue;
        const std::optional<BthProbe> probe = probe_bth(r->bytes);
        if (!probe || probe->dqpn != fake_qpn_) continue;  // another connection's
        const auto decoded = decode(r->bytes, DecodeOptions{mtu()});
        expect(decoded.ok(),
               format("the DUT sent a malformed packet (%s), opcode 0x%02x psn 0x%06x",
                      decoded.ok() ? "" : std::string(to_string(decoded.error())).c_str(),
                      probe->opcode, probe->psn));
        expect(decoded->bth.sqpn == dut_qpn(),
               format("a packet for our QP came from QPN 0x%06x, not the DUT's 0x%06x",
                      decoded->bth.sqpn, dut_qpn()));
        Seen s{*decoded, r->from_port, std::chrono::steady_clock::now()};
        const Opcode op = s.packet.bth.opcode;
        if (op == Opcode::Send || op == Opcode::Write || op == Opcode::ReadRequest ||
            is_atomic_request(op)) {
            echo_ts_ = s.packet.bth.ts;
            echo_path_ = s.packet.bth.path;
        }
        if (verbose()) note("  <- %s (port 0x%04x)", describe(s.packet).c_str(), s.src_port);
        return s;
    }
}

std::vector<Seen> Conn::receive_until(const std::function<bool(const Packet&)>& done,
                                      int timeout_ms) {
    std::vector<Seen> out;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(env_.ms(timeout_ms));
    for (;;) {
        const long long left = ms_until(deadline);
        if (left < 0) return out;
        // receive() scales its timeout: hand it the unscaled remainder.
        std::optional<Seen> s =
            receive(std::max(0, static_cast<int>(left / env_.options().time_scale)));
        if (!s) return out;
        out.push_back(std::move(*s));
        if (done(out.back().packet)) return out;
    }
}

std::vector<Seen> Conn::collect(int ms) {
    return receive_until([](const Packet&) { return false; }, ms);
}

Packet Conn::expect_ack(Psn cum, int timeout_ms) {
    const auto seen = receive_until(
        [cum](const Packet& p) {
            return p.bth.opcode == Opcode::Ack && (p.ack().is_nak() || p.ack().cum_psn == cum);
        },
        timeout_ms);
    std::string last = "nothing";
    for (const Seen& s : seen) {
        if (s.packet.bth.opcode == Opcode::Ack) last = describe(s.packet);
    }
    expect(!seen.empty() && seen.back().packet.bth.opcode == Opcode::Ack,
           format("no ACK with cum_psn 0x%06x (last ACK: %s)", cum, last.c_str()));
    const Packet& p = seen.back().packet;
    expect(!p.ack().is_nak(),
           format("expected an ACK with cum_psn 0x%06x, got a NAK: %s", cum, describe(p).c_str()));
    return p;
}

Packet Conn::expect_nak(Syndrome syndrome, Psn nak_psn, int timeout_ms) {
    const auto seen = receive_until(
        [](const Packet& p) { return p.bth.opcode == Opcode::Ack && p.ack().is_nak(); },
        timeout_ms);
    std::string last = "nothing";
    for (const Seen& s : seen) last = describe(s.packet);
    expect(!seen.empty() && seen.back().packet.bth.opcode == Opcode::Ack &&
               seen.back().packet.ack().is_nak(),
           format("no %s NAK for PSN 0x%06x (last packet: %s)",
                  std::string(to_string(syndrome)).c_str(), nak_psn, last.c_str()));
    const Packet& p = seen.back().packet;
    expect(p.ack().syndrome == syndrome && p.ack().nak_psn == nak_psn,
           format("expected a %s NAK for PSN 0x%06x, got %s",
                  std::string(to_string(syndrome)).c_str(), nak_psn, describe(p).c_str()));
    return p;
}

Packet Conn::probe(Psn psn, Psn expect_cum, int timeout_ms) {
    send(write(psn, kProbeOffset, bytes_of(8, psn)));
    return expect_ack(expect_cum, timeout_ms);
}

void Conn::expect_dropped(const std::vector<std::uint8_t>& bytes, Psn next_psn,
                          const IpAddress* from) {
    if (from != nullptr) {
        UdpTransport* alt = env_.alt_udp();
        expect(alt != nullptr, "no alternative address");
        alt->send(env_.options().dut_ip, env_.options().port, src_port_of(0), bytes, 0);
    } else {
        send_bytes(bytes);
    }
    send(write(next_psn, kProbeOffset, bytes_of(8, next_psn)));
    const Psn want = psn_next(next_psn);
    const auto seen =
        receive_until([](const Packet& p) { return p.bth.opcode == Opcode::Ack; }, 2000);
    for (const Seen& s : seen) {
        const Packet& p = s.packet;
        expect(p.bth.opcode == Opcode::Ack,
               "the DUT answered a packet it must drop: " + describe(p));
        expect(!p.ack().is_nak(), "the DUT sent a NAK for a packet it must drop: " + describe(p));
    }
    expect(!seen.empty(),
           format("no ACK for the probe at PSN 0x%06x after the dropped packet", next_psn));
    // Wait for the probe's own ACK if an earlier (delayed) one came first.
    Packet a = seen.back().packet;
    if (a.ack().cum_psn != want && !psn_before(want, a.ack().cum_psn)) a = expect_ack(want);
    expect(a.ack().cum_psn == want,
           format("after a packet the DUT must drop, the probe at 0x%06x was answered with "
                  "cum_psn 0x%06x: the dropped packet changed the window",
                  next_psn, a.ack().cum_psn));
    expect(
        a.ack().sack == SackWords{},
        "the SACK bitmap shows PSNs received that only the dropped packet carried: " + describe(a));
    // A reaction to the dropped packet may also come after the probe's ACK.
    for (const Seen& late : collect(50)) {
        const Packet& p = late.packet;
        expect(p.bth.opcode == Opcode::Ack && !p.ack().is_nak(),
               "the DUT answered a packet it must drop: " + describe(p));
    }
}

void Conn::expect_state(ibv_qp_state want) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(env_.ms(2000));
    ibv_qp_state s = state();
    while (s != want && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        s = state();
    }
    static const char* const kNames[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    const auto name = [](ibv_qp_state x) { return x <= IBV_QPS_ERR ? kNames[x] : "UNKNOWN"; };
    expect(s == want, format("the DUT QP is in state %s, expected %s", name(s), name(want)));
}

void Conn::post_recv(std::uint64_t wr_id, std::uint64_t offset, std::uint32_t len) {
    qp_->post_recv(wr_id, local_->addr() + offset, len, local_->lkey());
}

std::optional<ibv_wc> Conn::poll_send(int timeout_ms) {
    return tools::poll_one(qp_->send_cq(), env_.ms(timeout_ms));
}

std::optional<ibv_wc> Conn::poll_recv(int timeout_ms) {
    return tools::poll_one(qp_->recv_cq(), env_.ms(timeout_ms));
}

ibv_wc Conn::expect_recv_completion(int timeout_ms) {
    const auto wc = poll_recv(timeout_ms);
    expect(wc.has_value(), "no receive completion");
    return *wc;
}

ibv_wc Conn::expect_send_completion(int timeout_ms) {
    const auto wc = poll_send(timeout_ms);
    expect(wc.has_value(), "no send completion");
    return *wc;
}

std::map<Psn, Seen> Conn::collect_requests(std::size_t count, int timeout_ms) {
    std::map<Psn, Seen> out;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(env_.ms(timeout_ms));
    while (out.size() < count) {
        const long long left = ms_until(deadline);
        std::optional<Seen> s;
        if (left > 0) s = receive(static_cast<int>(left / env_.options().time_scale));
        expect(s.has_value(),
               format("the DUT sent %zu of the %zu packets expected", out.size(), count));
        const Opcode op = s->packet.bth.opcode;
        if (op != Opcode::Send && op != Opcode::Write && op != Opcode::ReadRequest &&
            !is_atomic_request(op)) {
            continue;
        }
        out.emplace(s->packet.bth.psn, std::move(*s));
    }
    return out;
}

DutRegion::DutRegion(Env& env, std::size_t len, int access) : buf_(len) {
    mr_ = ibv_reg_mr(env.dev().pd(), buf_.data(), len, access);
    if (!mr_) throw CaseFailure(format("ibv_reg_mr: %s", std::strerror(errno)));
    lkey_ = mr_->lkey;
    rkey_ = mr_->rkey;
}

DutRegion::~DutRegion() {
    if (mr_) ibv_dereg_mr(mr_);
}

void DutRegion::deregister() {
    const int err = ibv_dereg_mr(mr_);
    mr_ = nullptr;
    expect(err == 0, format("ibv_dereg_mr: %s", std::strerror(err)));
}

void DutRegion::rereg_to(void* addr, std::size_t len) {
    errno = 0;
    const int ret = ibv_rereg_mr(mr_, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, addr, len, 0);
    expect(ret == 0, format("ibv_rereg_mr: %d (%s)", ret, std::strerror(errno)));
    lkey_ = mr_->lkey;
    rkey_ = mr_->rkey;
}

}  // namespace metaroce::compliance
