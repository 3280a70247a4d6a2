// The conformance suite's harness: the device under test (DUT) is a MetaRoCE device driven
// through libibverbs (its QPs, memory and completions), faced from another address (another
// network namespace or host) with packets crafted by the libsoftmetaroce codec over a UDP
// socket. Each case sets up its own DUT QP connected to a fictitious peer QP that the harness
// plays, sends packets and checks every packet the DUT answers with, its memory, completions,
// QP state and counters.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "softmetaroce/codec.h"
#include "softmetaroce/packet.h"
#include "udp.h"
#include "verbs_util.h"

namespace metaroce::compliance {

using tools::IpAddress;
using tools::MemoryRegion;
using tools::RcQp;
using tools::UdpTransport;
using tools::VerbsDevice;

// A check failed: the case fails with this message.
struct CaseFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// The case cannot run here (missing address, ...).
struct CaseSkip : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Fails the case unless `ok`.
void expect(bool ok, const std::string& what);
// A diagnostic line ("# ...") in the TAP output.
void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void set_verbose(bool verbose);
bool verbose();

std::string describe(const Packet& p);

struct Options {
    std::string device;
    IpAddress dut_ip;
    IpAddress local_ip;
    std::optional<IpAddress> alt_ip;
    std::uint16_t port = METAROCE_UDP_PORT;
    std::string netns;  // the harness's sockets live in this network namespace
    std::uint32_t mtu = 1024;
    int gid_index = -1;
    double time_scale = 1.0;  // multiplies every timeout (slow DUTs, emulation)
    bool verbose = false;
};

// What every case shares: the device, the sockets, the options.
class Env {
  public:
    explicit Env(const Options& options);

    const Options& options() const { return options_; }
    VerbsDevice& dev() { return *dev_; }
    UdpTransport& udp() { return *udp_; }
    // A second socket on the alternative local address (for wrong-source tests), if any.
    UdpTransport* alt_udp() { return alt_udp_.get(); }
    int gid_index() const { return gid_index_; }
    // Payload bytes per packet: the segment size of the DUT QP's path MTU (options().mtu).
    std::uint32_t mtu() const { return segment_size(options_.mtu); }

    // Milliseconds scaled by --time-scale.
    int ms(int base) const;

    // The DUT's counters (empty map if it exports none). Waits for the counters' cache to
    // expire first, so that what happened before the call is included.
    std::map<std::string, std::uint64_t> counters();
    bool has_counters();

    // Drops whatever is queued on the socket (late packets of earlier cases).
    void drain(int quiet_ms = 20);

    // A fresh fictitious QPN for the harness's side.
    std::uint32_t next_fake_qpn();
    std::uint32_t random24();

  private:
    Options options_;
    std::unique_ptr<VerbsDevice> dev_;
    std::unique_ptr<UdpTransport> udp_;
    std::unique_ptr<UdpTransport> alt_udp_;
    int gid_index_ = 1;
    std::uint32_t fake_qpn_ = 0xc0de00;
    std::uint64_t rng_ = 0x12345678;
    std::optional<bool> has_counters_;
};

// Counter deltas between two snapshots; checks are skipped (noted) when the DUT exports none.
class CounterCheck {
  public:
    explicit CounterCheck(Env& env);
    // Fails unless counter `name` grew by exactly `delta` (at least `delta` if `at_least`).
    void expect_delta(const std::string& name, std::uint64_t delta, bool at_least = false);
    std::uint64_t delta(const std::string& name);

  private:
    void refresh();
    Env& env_;
    std::map<std::string, std::uint64_t> before_;
    std::optional<std::map<std::string, std::uint64_t>> after_;
};

struct ConnOptions {
    std::optional<Psn> dut_rq_psn;  // the first PSN the DUT expects from us
    std::optional<Psn> dut_sq_psn;  // the DUT's first PSN
    std::uint8_t min_rnr_timer = 12;
    std::uint8_t timeout = 16;  // 268 ms per retry period
    std::uint8_t retry_cnt = 7;
    std::uint8_t rnr_retry = 7;
    std::uint8_t max_dest_rd_atomic = 16;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    bool to_rts = true;
    bool connect = true;     // false: leave the QP in RESET
    ibv_srq* srq = nullptr;  // the DUT QP receives from it
};

// A DUT packet seen by the harness, with when it arrived and where from.
struct Seen {
    Packet packet;
    std::uint16_t src_port = 0;
    std::chrono::steady_clock::time_point at;
};

// One DUT QP connected to a fictitious peer QP played by the harness.
class Conn {
  public:
    static constexpr std::size_t kMrSize = 256 * 1024;
    static constexpr std::size_t kSmallMrSize = 8192;

    Conn(Env& env, const ConnOptions& options = {});

    Env& env() { return env_; }
    RcQp& qp() { return *qp_; }
    std::uint32_t dut_qpn() const { return qp_->qpn(); }
    std::uint32_t fake_qpn() const { return fake_qpn_; }
    Psn rq_psn() const { return rq_psn_; }  // DUT's expected first PSN
    Psn sq_psn() const { return sq_psn_; }  // DUT's first PSN
    std::uint32_t mtu() const { return env_.mtu(); }

    // DUT memory: `mr` allows remote read and write, `ro` remote read only, `wo` remote write
    // only, `recv` is local (receive buffers, READ destinations, send sources).
    MemoryRegion& mr() { return *mr_; }
    MemoryRegion& ro() { return *ro_; }
    MemoryRegion& wo() { return *wo_; }
    MemoryRegion& local() { return *local_; }

    // Packets from the harness to the DUT, with the right addressing and the time.
    Packet base(Opcode op, Psn psn, std::uint8_t flags) const;
    // One WRITE packet of `payload` at byte `offset` of mr (msg_len defaults to its size).
    Packet write(Psn psn, std::uint64_t offset, std::vector<std::uint8_t> payload,
                 std::uint8_t flags = flag::kFirst | flag::kLast | flag::kAckReq,
                 std::optional<std::uint32_t> msg_len = std::nullopt) const;
    // The packets of a whole WRITE message of `data` at `offset` of mr from PSN `psn`
    // (ACK_REQ on the last).
    std::vector<Packet> write_message(Psn psn, std::uint64_t offset,
                                      const std::vector<std::uint8_t>& data,
                                      std::uint32_t msn = 0) const;
    std::vector<Packet> send_message(Psn psn, std::uint32_t msn,
                                     const std::vector<std::uint8_t>& data,
                                     std::optional<std::uint32_t> imm = std::nullopt) const;
    Packet read_request(Psn psn, std::uint64_t va, std::uint32_t rkey, std::uint32_t len,
                        std::uint32_t offset = 0, std::uint32_t msn = 0,
                        std::uint8_t flags = flag::kAckReq) const;
    // An atomic request (ATOMIC_CMP_SWP or ATOMIC_FETCH_ADD, section 3.4) on the word at `va`.
    Packet atomic(Opcode op, Psn psn, std::uint64_t va, std::uint32_t rkey, std::uint64_t swap_add,
                  std::uint64_t compare = 0, std::uint32_t msn = 0,
                  std::uint8_t flags = flag::kAckReq) const;
    // An ACK (or NAK) as a responder sends it: it echoes the timestamp and path of the newest
    // request packet (SEND, WRITE, READ_REQ, atomic) the harness received from the DUT
    // (section 3.3), as the DUT's requester checks (section 12.1).
    Packet ack(Psn cum, const std::set<Psn>& sacked = {}, Syndrome syndrome = Syndrome::Ack,
               Psn nak_psn = 0, std::uint8_t nak_arg = 0) const;
    // The timestamp an ACK from the harness echoes now.
    std::uint32_t echo_ts() const { return echo_ts_; }

    // Sends a packet (or raw bytes) on path `path` (UDP source port 0xC000 | entropy).
    // Returns the packet as sent (with its path and timestamp).
    Packet send(const Packet& p, std::uint16_t path = 0, std::uint8_t tos = 0);
    void send_bytes(const std::vector<std::uint8_t>& bytes, std::uint16_t path = 0,
                    std::uint8_t tos = 0);
    static std::uint16_t src_port_of(std::uint16_t path);

    // The next packet from the DUT for this connection within timeout_ms (scaled), or nullopt.
    // Anything the DUT sends that does not decode fails the case.
    std::optional<Seen> receive(int timeout_ms);
    // Packets until `done` returns true for one (returned last) or the timeout.
    std::vector<Seen> receive_until(const std::function<bool(const Packet&)>& done, int timeout_ms);
    // Everything the DUT sends in `ms` milliseconds (scaled).
    std::vector<Seen> collect(int ms);

    // Waits for an ACK (syndrome 0) whose cum_psn is `cum`; fails the case on timeout or on
    // a NAK. Returns it.
    Packet expect_ack(Psn cum, int timeout_ms = 2000);
    // Waits for a NAK with `syndrome` and `nak_psn`; fails on timeout.
    Packet expect_nak(Syndrome syndrome, Psn nak_psn, int timeout_ms = 2000);

    // A valid one-packet WRITE of a marker at PSN `psn` to the probe area (the last 4 KiB of
    // mr) with ACK_REQ, and the ACK that answers it: shows that the DUT is alive and where its
    // window stands. Returns the ACK (fails unless its cum_psn is `expect_cum`).
    Packet probe(Psn psn, Psn expect_cum, int timeout_ms = 2000);

    // Sends `bytes` (which the DUT must drop), then a probe at `next_psn`: the DUT must answer
    // the probe with cum_psn `next_psn + 1` (nothing of the dropped packet was marked) and
    // nothing else (no NAK, no READ response).
    void expect_dropped(const std::vector<std::uint8_t>& bytes, Psn next_psn,
                        const IpAddress* from = nullptr);

    // The DUT QP's state.
    ibv_qp_state state() const { return qp_->state(); }
    void expect_state(ibv_qp_state state);

    // DUT verbs: post work and wait for completions (timeout scaled).
    void post_recv(std::uint64_t wr_id, std::uint64_t offset, std::uint32_t len);
    ibv_wc expect_recv_completion(int timeout_ms = 2000);
    ibv_wc expect_send_completion(int timeout_ms = 2000);
    std::optional<ibv_wc> poll_send(int timeout_ms);
    std::optional<ibv_wc> poll_recv(int timeout_ms);

    // The DUT requester's side: collects the DUT's request packets (SEND, WRITE, READ_REQ,
    // atomic) by PSN until `count` distinct PSNs were seen (fails on timeout).
    std::map<Psn, Seen> collect_requests(std::size_t count, int timeout_ms = 3000);

  private:
    Env& env_;
    std::unique_ptr<RcQp> qp_;
    std::unique_ptr<MemoryRegion> mr_, ro_, wo_, local_;
    std::uint32_t fake_qpn_;
    Psn rq_psn_;
    Psn sq_psn_;
    std::chrono::steady_clock::time_point start_;
    // Of the newest DUT request packet received: what the harness's ACKs echo.
    std::uint32_t echo_ts_ = 0;
    std::uint16_t echo_path_ = 0;
};

// A DUT memory region a case registers itself, so that it can deregister it and keep the
// buffer mapped (MemoryRegion frees both together): what the DUT does with a key after
// ibv_dereg_mr returns, while the application reuses the memory.
class DutRegion {
  public:
    DutRegion(Env& env, std::size_t len, int access);
    ~DutRegion();
    DutRegion(const DutRegion&) = delete;
    DutRegion& operator=(const DutRegion&) = delete;

    std::uint8_t* data() { return buf_.data(); }
    std::uint64_t addr() const { return reinterpret_cast<std::uintptr_t>(buf_.data()); }
    std::uint32_t lkey() const { return lkey_; }
    std::uint32_t rkey() const { return rkey_; }
    // ibv_dereg_mr; fails the case unless it returns 0. The keys keep their old values.
    void deregister();
    // ibv_rereg_mr onto [@addr, @addr + @len) (a new translation; the buffer stays mapped);
    // fails the case unless it returns 0. The keys are the ones the DUT returns.
    void rereg_to(void* addr, std::size_t len);

  private:
    std::vector<std::uint8_t> buf_;
    ibv_mr* mr_ = nullptr;
    std::uint32_t lkey_ = 0;
    std::uint32_t rkey_ = 0;
};

// A data pattern (seeded) for payloads.
std::vector<std::uint8_t> bytes_of(std::size_t n, std::uint64_t seed);

struct Case {
    const char* name;
    const char* summary;  // what it checks (docs/compliance.md lists the same)
    std::function<void(Env&)> run;
};

std::vector<Case> responder_cases();
std::vector<Case> validation_cases();
std::vector<Case> requester_cases();
std::vector<Case> atomic_cases();
std::vector<Case> health_cases();

}  // namespace metaroce::compliance
