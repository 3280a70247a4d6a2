// metaroce-peer: a soft MetaRoCE endpoint (libsoftmetaroce) over a real UDP socket. It plays
// one RC QP against a QP of another implementation (the kernel's, driven by metaroce-interop)
// and checks every byte that crosses. See userspace/tools/README.md.
//
//   metaroce-peer --role target|initiator --local IP [--port 4793]
//                 (--listen [ADDR:]PORT | --connect HOST:PORT)
//                 [--mtu 1024] [--size BYTES] [--count N] [--ops write,read,send]
//                 [--loss PCT] [--seed N] [--paths N] [--qpn QPN] [--psn PSN]
//                 [--qp-timeout CODE] [--timeout SEC] [-v]
//
// Exit status: 0 when the transfer completed and both sides verified it, 1 when data or a
// completion was wrong (or the other side said so), 2 for usage and setup errors.
#include <getopt.h>

#include <chrono>
#include <cinttypes>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "exchange.h"
#include "pattern.h"
#include "soft_endpoint.h"
#include "softmetaroce/queue_pair.h"
#include "softmetaroce/sim/rng.h"
#include "transfer.h"
#include "udp.h"
#include "workload.h"

namespace metaroce::tools {
namespace {

// Where the target's buffer lives in the model's address space (any value works: the model's
// memory is addressed by rkey and virtual address, like a verbs MR).
constexpr std::uint64_t kRegionAddr = 0x00007e5700000000ull;
constexpr std::uint64_t kRecvAddr = 0x00007e5800000000ull;
constexpr std::uint32_t kRecvKey = 0x0000ec11;

constexpr const char* kUsage =
    "usage: metaroce-peer --role target|initiator --local IP [--port 4793]\n"
    "                     (--listen [ADDR:]PORT | --connect HOST:PORT)\n"
    "                     [--mtu 1024] [--size BYTES] [--count N]\n"
    "                     [--ops write,read,send] [--loss PCT] [--seed N]\n"
    "                     [--paths N] [--qpn QPN] [--psn PSN] [--qp-timeout CODE]\n"
    "                     [--depth N] [--timeout SEC] [-v]\n";

struct Options : TransferOptions {
    std::uint16_t port = METAROCE_UDP_PORT;
    double loss = 0;
    std::uint64_t seed = 1;
    unsigned paths = 8;
    std::optional<std::uint32_t> qpn;
    bool verbose = false;
};

Options parse_options(int argc, char** argv) {
    std::vector<option> longs = transfer_long_options();
    longs.insert(longs.end(), {{"port", required_argument, nullptr, 'P'},
                               {"loss", required_argument, nullptr, 'x'},
                               {"seed", required_argument, nullptr, 'S'},
                               {"paths", required_argument, nullptr, 'p'},
                               {"qpn", required_argument, nullptr, 'q'},
                               {"verbose", no_argument, nullptr, 'v'},
                               {nullptr, 0, nullptr, 0}});
    Options o;
    int c = 0;
    while ((c = getopt_long(argc, argv, "vh", longs.data(), nullptr)) != -1) {
        if (parse_transfer_option(c, optarg, o)) continue;
        switch (c) {
            case 'P':
                o.port = static_cast<std::uint16_t>(parse_number(optarg, "--port"));
                break;
            case 'x':
                o.loss = std::strtod(optarg, nullptr) / 100.0;
                break;
            case 'S':
                o.seed = parse_number(optarg, "--seed");
                break;
            case 'p':
                o.paths = static_cast<unsigned>(parse_number(optarg, "--paths"));
                break;
            case 'q':
                o.qpn = static_cast<std::uint32_t>(parse_number(optarg, "--qpn")) & kPsnMask;
                break;
            case 'v':
                o.verbose = true;
                break;
            default:
                usage();
        }
    }
    if (optind != argc) usage("unexpected arguments");
    check_transfer_options(o);
    if (o.local.empty()) usage("--local IP is needed");
    if (!is_valid_mtu(o.mtu)) usage("--mtu: 256, 512, 1024, 2048 or 4096");
    if (o.loss < 0 || o.loss >= 1) usage("--loss: a percentage below 100");
    if (o.depth == 0) o.depth = 1;
    return o;
}

WrOpcode soft_opcode(Step::Kind kind) {
    switch (kind) {
        case Step::Kind::Write:
            return WrOpcode::Write;
        case Step::Kind::WriteWithImm:
            return WrOpcode::WriteWithImm;
        case Step::Kind::Read:
            return WrOpcode::Read;
        case Step::Kind::Send:
            break;
    }
    return WrOpcode::Send;
}

WorkCompletion completion(const Completion& c) {
    WorkCompletion out;
    out.wr_id = c.wr_id;
    if (c.status != WcStatus::Success) out.error = to_string(c.status);
    out.opcode = static_cast<int>(c.opcode);
    out.has_imm = c.imm.has_value();
    out.imm = c.imm.value_or(0);
    out.byte_len = c.byte_len;
    out.read_data = c.read_data;
    return out;
}

class Peer {
  public:
    explicit Peer(const Options& o) : o_(o) {}

    int run();

  private:
    bool serve_until_line(const char* what, std::string& line);
    int run_target();
    int run_initiator();

    const Options& o_;
    std::unique_ptr<UdpTransport> udp_;
    std::unique_ptr<LineChannel> channel_;
    EndpointInfo mine_;
    EndpointInfo theirs_;
    MemoryModel memory_;
    std::unique_ptr<QueuePair> qp_;
    std::unique_ptr<SoftEndpoint> endpoint_;
    std::vector<Completion> recv_completions_;
    std::chrono::steady_clock::time_point deadline_;
};

// Keeps the QP going until the other side sends a line on the exchange; false on timeout.
bool Peer::serve_until_line(const char* what, std::string& line) {
    std::optional<std::string> got;
    const bool ok = endpoint_->run_until(
        [&] {
            for (Completion& c : qp_->poll_recv_cq()) recv_completions_.push_back(std::move(c));
            if (!got) got = channel_->try_recv_line(0);
            return got.has_value();
        },
        remaining_ms(deadline_));
    if (!ok) {
        log("timed out waiting for %s", what);
        return false;
    }
    line = *got;
    return true;
}

int Peer::run() {
    deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(o_.timeout_s);
    const std::optional<IpAddress> local = IpAddress::parse(o_.local);
    if (!local) throw std::runtime_error("bad --local address " + o_.local);
    udp_ = std::make_unique<UdpTransport>(*local, o_.port);

    sim::SimRng rng(o_.seed * 0x9e3779b97f4a7c15ull + 17);
    mine_ = endpoint_info(o_);
    // A QPN the kernel does not use for its own QPs is not needed (it is the peer's number),
    // but 0 and 1 are special in IB: avoid them.
    mine_.qpn = o_.qpn.value_or(0x800000 | static_cast<std::uint32_t>(rng.below(0x7ffffe) + 2));
    mine_.psn = o_.psn.value_or(static_cast<std::uint32_t>(rng.below(1u << 24)));
    mine_.ip = local->str();
    if (o_.role == "target") {
        mine_.addr = kRegionAddr;
        mine_.rkey = static_cast<std::uint32_t>(0x5eed0000 | rng.below(0x10000));
        mine_.len = o_.workload.region_len();
    }

    channel_ =
        std::make_unique<LineChannel>(open_channel(o_.listen, o_.connect, remaining_ms(deadline_)));
    theirs_ = exchange_hello(*channel_, mine_, remaining_ms(deadline_));
    const std::optional<IpAddress> peer_ip = IpAddress::parse(theirs_.ip);
    if (!peer_ip) throw std::runtime_error("the other side sent a bad address " + theirs_.ip);
    log("QP 0x%06x psn 0x%06x at %s:%u <-> QP 0x%06x psn 0x%06x at %s (%s, mtu %u, loss %.1f%%)",
        mine_.qpn, mine_.psn, mine_.ip.c_str(), o_.port, theirs_.qpn, theirs_.psn,
        theirs_.ip.c_str(), o_.role.c_str(), o_.mtu, o_.loss * 100);

    QpConfig config = make_qp_config(mine_.qpn, theirs_.qpn, mine_.psn, theirs_.psn,
                                     segment_size(o_.mtu), o_.paths);
    config.sender.timeout = o_.qp_timeout;
    // The timestamp secret of protocol.md section 12.1.
    config.sender.ts_offset = std::random_device{}();
    qp_ = std::make_unique<QueuePair>(config, memory_);
    endpoint_ = std::make_unique<SoftEndpoint>(
        *qp_, *udp_, SoftEndpointConfig{*peer_ip, METAROCE_UDP_PORT, o_.loss, o_.seed});

    const int rc = o_.role == "target" ? run_target() : run_initiator();
    const SoftEndpointStats& s = endpoint_->stats();
    const SenderCounters& tx = qp_->sender().counters();
    const ReceiverCounters& rx = qp_->receiver().counters();
    log("datagrams sent %" PRIu64 " received %" PRIu64 " dropped by --loss %" PRIu64 "/%" PRIu64
        " | requester: new %" PRIu64 " retransmitted %" PRIu64 " re-reads %" PRIu64
        " tail probes %" PRIu64 " RTOs %" PRIu64 " | responder: placed %" PRIu64
        " duplicates %" PRIu64 " ACKs %" PRIu64 " NAKs %" PRIu64 " READs held back %" PRIu64
        " beyond window %" PRIu64,
        s.sent, s.received, s.dropped_tx, s.dropped_rx, tx.new_packets, tx.retransmissions,
        tx.rereads, tx.tail_probes, tx.rto_expiries, rx.placed, rx.duplicates, rx.acks_sent,
        rx.rnr_naks + rx.access_naks + rx.invalid_naks + rx.operational_naks, rx.read_overflow,
        rx.out_of_window);
    // Whatever the other implementation sent must be valid MetaRoCE: anything the codec
    // rejects is an interoperability failure.
    const QpCounters& qc = qp_->counters();
    std::string bad;
    for (std::size_t e = 0; e < kParseErrorCount; ++e) {
        if (qc.malformed[e] == 0) continue;
        bad += " " + std::string(to_string(static_cast<ParseError>(e))) + "=" +
               std::to_string(qc.malformed[e]);
    }
    if (qc.wrong_qp + qc.wrong_peer + qc.wrong_type != 0) {
        bad += " misaddressed=" + std::to_string(qc.wrong_qp + qc.wrong_peer + qc.wrong_type);
    }
    if (!bad.empty()) {
        log("FAIL: the other side sent invalid packets:%s", bad.c_str());
        return rc == 0 ? 1 : rc;
    }
    return rc;
}

int Peer::run_target() {
    const Workload& w = o_.workload;
    if (!memory_.register_region(
            mine_.rkey, kRegionAddr, static_cast<std::uint32_t>(w.region_len()),
            access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead)) {
        throw std::runtime_error("cannot register the target region");
    }
    // The read area holds the read pattern.
    const auto region = memory_.region_bytes(mine_.rkey);
    fill_pattern(region.subspan(w.read_offset(0), std::uint64_t{w.count} * w.size), kReadSeed);
    const std::uint32_t receives = w.receives();
    memory_.register_region(kRecvKey, kRecvAddr, std::max<std::uint32_t>(1, receives * w.size),
                            access::kLocalWrite);
    for (std::uint32_t i = 0; i < receives; ++i) {
        qp_->post_recv(ReceiveWqe{i, {{kRecvKey, kRecvAddr + std::uint64_t{i} * w.size, w.size}}});
    }
    channel_->send_line("READY");
    std::string line;
    if (!serve_until_line("READY", line)) return 1;
    if (line != "READY") throw std::runtime_error("exchange: expected READY, got " + line);
    log("ready: serving %s", mine_.ops.c_str());
    if (!serve_until_line("DONE", line)) return 1;
    if (line.rfind("DONE", 0) != 0) throw std::runtime_error("exchange: expected DONE: " + line);
    // Let the last ACKs go out and stragglers arrive.
    endpoint_->run_for(50);
    for (Completion& c : qp_->poll_recv_cq()) recv_completions_.push_back(std::move(c));
    std::vector<WorkCompletion> completions;
    for (const Completion& c : recv_completions_) completions.push_back(completion(c));
    const std::string problem = verify_target(w, region.subspan(0, std::uint64_t{w.count} * w.size),
                                              memory_.region_bytes(kRecvKey), completions);
    return target_verdict(*channel_, line, problem, recv_completions_.size());
}

int Peer::run_initiator() {
    const Workload& w = o_.workload;
    const std::vector<Step> steps = w.steps();
    std::deque<WorkRequest> queue;
    for (const Step& s : steps) {
        WorkRequest wr;
        wr.wr_id = queue.size();
        wr.opcode = soft_opcode(s.kind);
        if (s.kind == Step::Kind::Read) {
            wr.read_length = s.len;
        } else {
            wr.data = pattern(s.len, s.seed, s.offset);
        }
        if (s.kind != Step::Kind::Send) {
            wr.remote_addr = theirs_.addr + s.remote;
            wr.rkey = theirs_.rkey;
        }
        if (s.kind == Step::Kind::WriteWithImm) wr.imm = kImm;
        queue.push_back(std::move(wr));
    }
    const std::uint64_t total = steps.size();

    channel_->send_line("READY");
    std::string line;
    if (!serve_until_line("READY", line)) return 1;
    if (line != "READY") throw std::runtime_error("exchange: expected READY, got " + line);
    log("ready: %" PRIu64 " work requests (%s, %u x %u bytes)", total, mine_.ops.c_str(), w.count,
        w.size);

    std::string problem;
    std::uint64_t completed = 0;
    std::uint64_t outstanding = 0;
    const auto start = std::chrono::steady_clock::now();
    const bool finished = endpoint_->run_until(
        [&] {
            while (!queue.empty() && outstanding < o_.depth) {
                qp_->post_send(std::move(queue.front()), endpoint_->now());
                queue.pop_front();
                ++outstanding;
            }
            for (const Completion& c : qp_->poll_send_cq()) {
                --outstanding;
                ++completed;
                if (problem.empty()) {
                    problem =
                        check_send_completion(steps[completed - 1], completed - 1, completion(c));
                }
            }
            return completed == total || !problem.empty() || qp_->in_error();
        },
        remaining_ms(deadline_));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!finished) {
        problem = "timed out with " + std::to_string(completed) + " of " + std::to_string(total) +
                  " work requests complete";
    } else if (problem.empty() && completed != total) {
        problem = "the QP failed after " + std::to_string(completed) + " completions";
    }
    if (problem.empty()) {
        log("%" PRIu64 " work requests completed and verified in %.2f s", total, seconds);
    }
    channel_->send_line(done_line(problem));
    if (!serve_until_line("RESULT", line)) return 1;
    return initiator_verdict(problem, line);
}

}  // namespace
}  // namespace metaroce::tools

int main(int argc, char** argv) {
    using namespace metaroce::tools;
    return run_tool("metaroce-peer", kUsage, [&] {
        const Options options = parse_options(argc, argv);
        Peer peer(options);
        return peer.run();
    });
}
