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
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "exchange.h"
#include "pattern.h"
#include "soft_endpoint.h"
#include "softmetaroce/queue_pair.h"
#include "softmetaroce/sim/rng.h"
#include "udp.h"
#include "workload.h"

namespace metaroce::tools {
namespace {

// Where the target's buffer lives in the model's address space (any value works: the model's
// memory is addressed by rkey and virtual address, like a verbs MR).
constexpr std::uint64_t kRegionAddr = 0x00007e5700000000ull;
constexpr std::uint64_t kRecvAddr = 0x00007e5800000000ull;
constexpr std::uint32_t kRecvKey = 0x0000ec11;

struct Options {
    std::string role;
    std::string local;
    std::uint16_t port = METAROCE_UDP_PORT;
    std::string listen;
    std::string connect;
    std::uint32_t mtu = 1024;
    Workload workload;
    double loss = 0;
    std::uint64_t seed = 1;
    unsigned paths = 8;
    std::optional<std::uint32_t> qpn;
    std::optional<std::uint32_t> psn;
    std::uint8_t qp_timeout = 18;  // 1.07 s per retry period: patient under emulation
    int timeout_s = 300;
    std::uint32_t depth = 64;  // work requests outstanding at once (initiator)
    bool verbose = false;
};

[[noreturn]] void usage(const char* error = nullptr) {
    if (error != nullptr) std::fprintf(stderr, "metaroce-peer: %s\n", error);
    std::fprintf(stderr,
                 "usage: metaroce-peer --role target|initiator --local IP [--port 4793]\n"
                 "                     (--listen [ADDR:]PORT | --connect HOST:PORT)\n"
                 "                     [--mtu 1024] [--size BYTES] [--count N]\n"
                 "                     [--ops write,read,send] [--loss PCT] [--seed N]\n"
                 "                     [--paths N] [--qpn QPN] [--psn PSN] [--qp-timeout CODE]\n"
                 "                     [--depth N] [--timeout SEC] [-v]\n");
    std::exit(2);
}

std::uint64_t number(const char* text, const char* what) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 0);
    if (end == text || *end != '\0') usage((std::string("bad ") + what).c_str());
    return v;
}

Options parse_options(int argc, char** argv) {
    static const option longs[] = {{"role", required_argument, nullptr, 'r'},
                                   {"local", required_argument, nullptr, 'l'},
                                   {"port", required_argument, nullptr, 'P'},
                                   {"listen", required_argument, nullptr, 'L'},
                                   {"connect", required_argument, nullptr, 'C'},
                                   {"mtu", required_argument, nullptr, 'm'},
                                   {"size", required_argument, nullptr, 's'},
                                   {"count", required_argument, nullptr, 'n'},
                                   {"ops", required_argument, nullptr, 'o'},
                                   {"loss", required_argument, nullptr, 'x'},
                                   {"seed", required_argument, nullptr, 'S'},
                                   {"paths", required_argument, nullptr, 'p'},
                                   {"qpn", required_argument, nullptr, 'q'},
                                   {"psn", required_argument, nullptr, 'Q'},
                                   {"qp-timeout", required_argument, nullptr, 'T'},
                                   {"depth", required_argument, nullptr, 'd'},
                                   {"timeout", required_argument, nullptr, 't'},
                                   {"verbose", no_argument, nullptr, 'v'},
                                   {"help", no_argument, nullptr, 'h'},
                                   {nullptr, 0, nullptr, 0}};
    Options o;
    int c = 0;
    while ((c = getopt_long(argc, argv, "vh", longs, nullptr)) != -1) {
        switch (c) {
            case 'r':
                o.role = optarg;
                break;
            case 'l':
                o.local = optarg;
                break;
            case 'P':
                o.port = static_cast<std::uint16_t>(number(optarg, "--port"));
                break;
            case 'L':
                o.listen = optarg;
                break;
            case 'C':
                o.connect = optarg;
                break;
            case 'm':
                o.mtu = static_cast<std::uint32_t>(number(optarg, "--mtu"));
                break;
            case 's':
                o.workload.size = static_cast<std::uint32_t>(number(optarg, "--size"));
                break;
            case 'n':
                o.workload.count = static_cast<std::uint32_t>(number(optarg, "--count"));
                break;
            case 'o': {
                const auto ops = parse_ops(optarg);
                if (!ops) usage("bad --ops");
                o.workload.ops = *ops;
                break;
            }
            case 'x':
                o.loss = std::strtod(optarg, nullptr) / 100.0;
                break;
            case 'S':
                o.seed = number(optarg, "--seed");
                break;
            case 'p':
                o.paths = static_cast<unsigned>(number(optarg, "--paths"));
                break;
            case 'q':
                o.qpn = static_cast<std::uint32_t>(number(optarg, "--qpn")) & kPsnMask;
                break;
            case 'Q':
                o.psn = static_cast<std::uint32_t>(number(optarg, "--psn")) & kPsnMask;
                break;
            case 'T':
                o.qp_timeout = static_cast<std::uint8_t>(number(optarg, "--qp-timeout"));
                break;
            case 'd':
                o.depth = static_cast<std::uint32_t>(number(optarg, "--depth"));
                break;
            case 't':
                o.timeout_s = static_cast<int>(number(optarg, "--timeout"));
                break;
            case 'v':
                o.verbose = true;
                break;
            default:
                usage();
        }
    }
    if (optind != argc) usage("unexpected arguments");
    if (o.role != "target" && o.role != "initiator") usage("--role target|initiator");
    if (o.local.empty()) usage("--local IP is needed");
    if (o.listen.empty() == o.connect.empty()) usage("one of --listen and --connect");
    if (!is_valid_mtu(o.mtu)) usage("--mtu: 256, 512, 1024, 2048 or 4096");
    if (o.workload.size < 2 || o.workload.count == 0) usage("--size >= 2 and --count >= 1");
    if (o.loss < 0 || o.loss >= 1) usage("--loss: a percentage below 100");
    if (o.depth == 0) o.depth = 1;
    return o;
}

class Peer {
  public:
    explicit Peer(const Options& o) : o_(o) {}

    int run();

  private:
    bool serve_until_line(const char* what, std::string& line);
    int run_target();
    int run_initiator();
    std::string verify_target();
    void log(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

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

void Peer::log(const char* fmt, ...) {
    std::va_list ap;
    va_start(ap, fmt);
    std::fputs("metaroce-peer: ", stdout);
    std::vfprintf(stdout, fmt, ap);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    va_end(ap);
}

int remaining_ms(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    return left < 0 ? 0 : static_cast<int>(left);
}

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
    mine_.role = o_.role;
    // A QPN the kernel does not use for its own QPs is not needed (it is the peer's number),
    // but 0 and 1 are special in IB: avoid them.
    mine_.qpn = o_.qpn.value_or(0x800000 | static_cast<std::uint32_t>(rng.below(0x7ffffe) + 2));
    mine_.psn = o_.psn.value_or(static_cast<std::uint32_t>(rng.below(1u << 24)));
    mine_.ip = local->str();
    mine_.mtu = o_.mtu;
    mine_.size = o_.workload.size;
    mine_.count = o_.workload.count;
    mine_.ops = format_ops(o_.workload.ops);
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

    QpConfig config =
        make_qp_config(mine_.qpn, theirs_.qpn, mine_.psn, theirs_.psn, o_.mtu, o_.paths);
    config.sender.timeout = o_.qp_timeout;
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
    const std::string problem = verify_target();
    channel_->send_line(problem.empty() ? "RESULT ok" : "RESULT fail " + problem);
    if (line != "DONE ok") {
        log("the initiator failed: %s", line.c_str());
        return 1;
    }
    if (!problem.empty()) {
        log("FAIL: %s", problem.c_str());
        return 1;
    }
    log("PASS: target memory and %zu receive completions verified", recv_completions_.size());
    return 0;
}

std::string Peer::verify_target() {
    const Workload& w = o_.workload;
    char buf[256];
    const auto region = memory_.region_bytes(mine_.rkey);
    if (w.ops & op::kWrite) {
        const auto area = region.subspan(0, std::uint64_t{w.count} * w.size);
        const std::int64_t bad = first_mismatch(area, kWriteSeed);
        if (bad >= 0) {
            std::snprintf(buf, sizeof buf, "write area differs at byte %lld",
                          static_cast<long long>(bad));
            return buf;
        }
    }
    if (recv_completions_.size() != w.receives()) {
        std::snprintf(buf, sizeof buf, "%zu receive completions, expected %u",
                      recv_completions_.size(), w.receives());
        return buf;
    }
    std::uint32_t next = 0;
    for (const Completion& c : recv_completions_) {
        if (c.wr_id != next) return "receive completions out of order";
        if (c.status != WcStatus::Success) {
            std::snprintf(buf, sizeof buf, "receive %u completed with %s", next,
                          std::string(to_string(c.status)).c_str());
            return buf;
        }
        const ReceiveWqe wqe{next, {{kRecvKey, kRecvAddr + std::uint64_t{next} * w.size, w.size}}};
        if ((w.ops & op::kWrite) && next == 0) {
            if (c.opcode != WcOpcode::RecvRdmaWithImm || c.imm != kImm || c.byte_len != w.size) {
                return "the WRITE with immediate did not complete as RECV_RDMA_WITH_IMM " +
                       std::to_string(kImm);
            }
        } else {
            const std::uint32_t i = next - ((w.ops & op::kWrite) ? 1 : 0);
            if (c.opcode != WcOpcode::Recv || c.byte_len != w.send_len(i)) {
                std::snprintf(buf, sizeof buf, "SEND %u: opcode %d length %u, expected %u", i,
                              static_cast<int>(c.opcode), c.byte_len, w.send_len(i));
                return buf;
            }
            const std::int64_t bad = first_mismatch(memory_.gather(wqe, c.byte_len), kSendSeed + i);
            if (bad >= 0) {
                std::snprintf(buf, sizeof buf, "SEND %u differs at byte %lld", i,
                              static_cast<long long>(bad));
                return buf;
            }
        }
        ++next;
    }
    return "";
}

int Peer::run_initiator() {
    const Workload& w = o_.workload;
    // The work, in posting order; READ results are checked against `expect`.
    struct Expected {
        std::uint64_t seed = 0;
        std::uint64_t offset = 0;
    };
    std::deque<WorkRequest> queue;
    std::map<std::uint64_t, Expected> expect;
    std::uint64_t id = 0;
    if (w.ops & op::kWrite) {
        for (std::uint32_t i = 0; i < w.count; ++i) {
            WorkRequest wr;
            wr.wr_id = id++;
            wr.opcode = WrOpcode::Write;
            wr.data = pattern(w.size, kWriteSeed, w.write_offset(i));
            wr.remote_addr = theirs_.addr + w.write_offset(i);
            wr.rkey = theirs_.rkey;
            queue.push_back(std::move(wr));
        }
        WorkRequest wr;
        wr.wr_id = id++;
        wr.opcode = WrOpcode::WriteWithImm;
        wr.data = pattern(w.size, kWriteSeed, w.write_offset(w.count - 1));
        wr.remote_addr = theirs_.addr + w.write_offset(w.count - 1);
        wr.rkey = theirs_.rkey;
        wr.imm = kImm;
        queue.push_back(std::move(wr));
    }
    if (w.ops & op::kRead) {
        for (std::uint32_t i = 0; i < w.count; ++i) {
            WorkRequest wr;
            wr.wr_id = id++;
            wr.opcode = WrOpcode::Read;
            wr.remote_addr = theirs_.addr + w.read_offset(i);
            wr.rkey = theirs_.rkey;
            wr.read_length = w.size;
            expect[wr.wr_id] = {kReadSeed, std::uint64_t{i} * w.size};
            queue.push_back(wr);
            if (w.ops & op::kWrite) {
                wr.wr_id = id++;
                wr.remote_addr = theirs_.addr + w.write_offset(i);
                expect[wr.wr_id] = {kWriteSeed, w.write_offset(i)};
                queue.push_back(wr);
            }
        }
    }
    if (w.ops & op::kSend) {
        for (std::uint32_t i = 0; i < w.count; ++i) {
            WorkRequest wr;
            wr.wr_id = id++;
            wr.opcode = WrOpcode::Send;
            wr.data = pattern(w.send_len(i), kSendSeed + i);
            queue.push_back(std::move(wr));
        }
    }
    const std::uint64_t total = id;

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
                if (!problem.empty()) continue;
                if (c.status != WcStatus::Success) {
                    problem = "work request " + std::to_string(c.wr_id) + " completed with " +
                              std::string(to_string(c.status));
                    continue;
                }
                if (c.wr_id != completed - 1) problem = "send completions out of order";
                const auto it = expect.find(c.wr_id);
                if (it == expect.end()) continue;
                const std::int64_t bad =
                    first_mismatch(c.read_data, it->second.seed, it->second.offset);
                if (bad >= 0 || c.read_data.size() != w.size) {
                    problem = "READ " + std::to_string(c.wr_id) + " returned wrong data at byte " +
                              std::to_string(bad);
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
    channel_->send_line(problem.empty() ? "DONE ok" : "DONE fail " + problem);
    if (!serve_until_line("RESULT", line)) return 1;
    if (!problem.empty()) {
        log("FAIL: %s", problem.c_str());
        return 1;
    }
    if (line != "RESULT ok") {
        log("FAIL: the target says: %s", line.c_str());
        return 1;
    }
    log("PASS: the target verified its memory and receive completions");
    return 0;
}

}  // namespace
}  // namespace metaroce::tools

int main(int argc, char** argv) {
    using namespace metaroce::tools;
    const Options options = parse_options(argc, argv);
    try {
        Peer peer(options);
        return peer.run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "metaroce-peer: %s\n", e.what());
        return 2;
    }
}
