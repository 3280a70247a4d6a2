// metaroce-interop: the verbs side of an interoperability test. It runs one RC QP of a real
// MetaRoCE device (the kernel soft-NIC, or any device with a verbs provider) against
// metaroce-peer, through the same exchange and workload (userspace/tools/README.md), and
// checks every byte and completion.
//
//   metaroce-interop -d DEV --role target|initiator [--local IP | --gid-index N]
//                    (--listen [ADDR:]PORT | --connect HOST:PORT)
//                    [--mtu 1024] [--size BYTES] [--count N] [--ops write,read,send]
//                    [--psn PSN] [--qp-timeout CODE] [--depth N] [--timeout SEC]
//
// Exit status: 0 when both sides verified the transfer, 1 on a data or completion error
// (here or reported by the other side), 2 for usage and setup errors.
#include <arpa/inet.h>
#include <getopt.h>

#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "exchange.h"
#include "pattern.h"
#include "verbs_util.h"
#include "workload.h"

namespace metaroce::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::string device;
    std::string role;
    std::string local;
    std::optional<int> gid_index;
    std::string listen;
    std::string connect;
    std::uint32_t mtu = 1024;
    Workload workload;
    std::optional<std::uint32_t> psn;
    std::uint8_t qp_timeout = 18;  // 1.07 s per retry period: patient under emulation
    std::uint32_t depth = 64;
    int timeout_s = 300;
};

[[noreturn]] void usage(const char* error = nullptr) {
    if (error != nullptr) std::fprintf(stderr, "metaroce-interop: %s\n", error);
    std::fprintf(stderr,
                 "usage: metaroce-interop -d DEV --role target|initiator [--local IP | "
                 "--gid-index N]\n"
                 "                        (--listen [ADDR:]PORT | --connect HOST:PORT)\n"
                 "                        [--mtu 1024] [--size BYTES] [--count N]\n"
                 "                        [--ops write,read,send] [--psn PSN] [--qp-timeout CODE]\n"
                 "                        [--depth N] [--timeout SEC]\n");
    std::exit(2);
}

std::uint64_t number(const char* text, const char* what) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 0);
    if (end == text || *end != '\0') usage((std::string("bad ") + what).c_str());
    return v;
}

Options parse_options(int argc, char** argv) {
    static const option longs[] = {{"device", required_argument, nullptr, 'd'},
                                   {"role", required_argument, nullptr, 'r'},
                                   {"local", required_argument, nullptr, 'l'},
                                   {"gid-index", required_argument, nullptr, 'g'},
                                   {"listen", required_argument, nullptr, 'L'},
                                   {"connect", required_argument, nullptr, 'C'},
                                   {"mtu", required_argument, nullptr, 'm'},
                                   {"size", required_argument, nullptr, 's'},
                                   {"count", required_argument, nullptr, 'n'},
                                   {"ops", required_argument, nullptr, 'o'},
                                   {"psn", required_argument, nullptr, 'Q'},
                                   {"qp-timeout", required_argument, nullptr, 'T'},
                                   {"depth", required_argument, nullptr, 'D'},
                                   {"timeout", required_argument, nullptr, 't'},
                                   {"help", no_argument, nullptr, 'h'},
                                   {nullptr, 0, nullptr, 0}};
    Options o;
    int c = 0;
    while ((c = getopt_long(argc, argv, "d:h", longs, nullptr)) != -1) {
        switch (c) {
            case 'd':
                o.device = optarg;
                break;
            case 'r':
                o.role = optarg;
                break;
            case 'l':
                o.local = optarg;
                break;
            case 'g':
                o.gid_index = static_cast<int>(number(optarg, "--gid-index"));
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
            case 'Q':
                o.psn = static_cast<std::uint32_t>(number(optarg, "--psn")) & 0xffffff;
                break;
            case 'T':
                o.qp_timeout = static_cast<std::uint8_t>(number(optarg, "--qp-timeout"));
                break;
            case 'D':
                o.depth = static_cast<std::uint32_t>(number(optarg, "--depth"));
                break;
            case 't':
                o.timeout_s = static_cast<int>(number(optarg, "--timeout"));
                break;
            default:
                usage();
        }
    }
    if (optind != argc) usage("unexpected arguments");
    if (o.device.empty()) usage("-d DEV is needed");
    if (o.role != "target" && o.role != "initiator") usage("--role target|initiator");
    if (o.listen.empty() == o.connect.empty()) usage("one of --listen and --connect");
    if (o.workload.size < 2 || o.workload.count == 0) usage("--size >= 2 and --count >= 1");
    if (o.depth == 0 || o.depth > 1024) usage("--depth: 1..1024");
    return o;
}

void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log(const char* fmt, ...) {
    std::va_list ap;
    va_start(ap, fmt);
    std::fputs("metaroce-interop: ", stdout);
    std::vfprintf(stdout, fmt, ap);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    va_end(ap);
}

int remaining_ms(Clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(left);
}

class Interop {
  public:
    explicit Interop(const Options& o) : o_(o) {}
    int run();

  private:
    int run_target();
    int run_initiator();
    std::string verify_target(const std::vector<ibv_wc>& recvs);

    const Options& o_;
    std::unique_ptr<VerbsDevice> dev_;
    std::unique_ptr<RcQp> qp_;
    std::unique_ptr<LineChannel> channel_;
    std::unique_ptr<MemoryRegion> region_;  // target: the exposed buffer
    std::unique_ptr<MemoryRegion> local_;   // target: receive buffers; initiator: its data
    EndpointInfo mine_;
    EndpointInfo theirs_;
    Clock::time_point deadline_;
};

int Interop::run() {
    deadline_ = Clock::now() + std::chrono::seconds(o_.timeout_s);
    dev_ = std::make_unique<VerbsDevice>(o_.device);
    const std::optional<int> gid_index =
        o_.gid_index ? o_.gid_index : dev_->gid_index_for(o_.local);
    if (!gid_index) {
        throw std::runtime_error("no GID for " + (o_.local.empty() ? "IPv4" : o_.local) + " on " +
                                 dev_->name());
    }
    const Workload& w = o_.workload;
    qp_ = std::make_unique<RcQp>(*dev_, std::max(o_.depth, w.receives()) + 16);
    std::random_device entropy;
    mine_.role = o_.role;
    mine_.qpn = qp_->qpn();
    mine_.psn = o_.psn.value_or(entropy() & 0xffffff);
    mine_.ip = ip_of_gid(dev_->gid(*gid_index));
    mine_.mtu = o_.mtu;
    mine_.size = w.size;
    mine_.count = w.count;
    mine_.ops = format_ops(w.ops);
    const int remote_access =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (o_.role == "target") {
        region_ = std::make_unique<MemoryRegion>(dev_->pd(), w.region_len(), remote_access);
        fill_pattern({region_->data() + w.read_offset(0), std::uint64_t{w.count} * w.size},
                     kReadSeed);
        mine_.addr = region_->addr();
        mine_.rkey = region_->rkey();
        mine_.len = w.region_len();
        local_ = std::make_unique<MemoryRegion>(dev_->pd(), std::uint64_t{w.receives()} * w.size,
                                                IBV_ACCESS_LOCAL_WRITE);
    }

    channel_ =
        std::make_unique<LineChannel>(open_channel(o_.listen, o_.connect, remaining_ms(deadline_)));
    theirs_ = exchange_hello(*channel_, mine_, remaining_ms(deadline_));
    const std::optional<ibv_gid> dgid = gid_of_ip(theirs_.ip);
    if (!dgid) throw std::runtime_error("the other side sent a bad address " + theirs_.ip);
    log("%s QP 0x%06x psn 0x%06x GID %d (%s) <-> QP 0x%06x psn 0x%06x at %s (%s, mtu %u)",
        dev_->name().c_str(), mine_.qpn, mine_.psn, *gid_index, mine_.ip.c_str(), theirs_.qpn,
        theirs_.psn, theirs_.ip.c_str(), o_.role.c_str(), o_.mtu);

    RcConnectParams p;
    p.dest_qpn = theirs_.qpn;
    p.rq_psn = theirs_.psn;
    p.sq_psn = mine_.psn;
    p.dgid = *dgid;
    p.sgid_index = *gid_index;
    p.mtu = o_.mtu;
    p.access = remote_access;
    p.timeout = o_.qp_timeout;
    qp_->connect(p);
    return o_.role == "target" ? run_target() : run_initiator();
}

int Interop::run_target() {
    const Workload& w = o_.workload;
    for (std::uint32_t i = 0; i < w.receives(); ++i) {
        qp_->post_recv(i, local_->addr() + std::uint64_t{i} * w.size, w.size, local_->lkey());
    }
    channel_->send_line("READY");
    std::string line = channel_->recv_line(remaining_ms(deadline_));
    if (line != "READY") throw std::runtime_error("exchange: expected READY, got " + line);
    log("ready: serving %s", mine_.ops.c_str());
    std::vector<ibv_wc> recvs;
    std::optional<std::string> done;
    while (!done) {
        for (const ibv_wc& wc : poll_cq(qp_->recv_cq(), 16, 0)) recvs.push_back(wc);
        done = channel_->try_recv_line(5);
        if (!done && remaining_ms(deadline_) == 0) {
            log("timed out waiting for DONE");
            return 1;
        }
    }
    // Completions that were still on their way.
    for (const ibv_wc& wc : poll_cq(qp_->recv_cq(), 64, 20)) recvs.push_back(wc);
    const std::string problem = verify_target(recvs);
    channel_->send_line(problem.empty() ? "RESULT ok" : "RESULT fail " + problem);
    if (*done != "DONE ok") {
        log("the initiator failed: %s", done->c_str());
        return 1;
    }
    if (!problem.empty()) {
        log("FAIL: %s", problem.c_str());
        return 1;
    }
    log("PASS: target memory and %zu receive completions verified", recvs.size());
    return 0;
}

std::string Interop::verify_target(const std::vector<ibv_wc>& recvs) {
    const Workload& w = o_.workload;
    char buf[256];
    if (w.ops & op::kWrite) {
        const std::int64_t bad =
            first_mismatch({region_->data(), std::uint64_t{w.count} * w.size}, kWriteSeed);
        if (bad >= 0) {
            std::snprintf(buf, sizeof buf, "write area differs at byte %lld",
                          static_cast<long long>(bad));
            return buf;
        }
    }
    if (recvs.size() != w.receives()) {
        std::snprintf(buf, sizeof buf, "%zu receive completions, expected %u", recvs.size(),
                      w.receives());
        return buf;
    }
    for (std::uint32_t n = 0; n < recvs.size(); ++n) {
        const ibv_wc& wc = recvs[n];
        if (wc.wr_id != n) return "receive completions out of order";
        if (wc.status != IBV_WC_SUCCESS) {
            std::snprintf(buf, sizeof buf, "receive %u completed with %s", n,
                          wc_status_name(wc.status));
            return buf;
        }
        if ((w.ops & op::kWrite) && n == 0) {
            if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM) ||
                ntohl(wc.imm_data) != kImm || wc.byte_len != w.size) {
                std::snprintf(buf, sizeof buf,
                              "WRITE with immediate: opcode %d imm 0x%x length %u, expected "
                              "RECV_RDMA_WITH_IMM 0x%x %u",
                              wc.opcode, ntohl(wc.imm_data), wc.byte_len, kImm, w.size);
                return buf;
            }
            continue;
        }
        const std::uint32_t i = n - ((w.ops & op::kWrite) ? 1 : 0);
        if (wc.opcode != IBV_WC_RECV || wc.byte_len != w.send_len(i)) {
            std::snprintf(buf, sizeof buf, "SEND %u: opcode %d length %u, expected RECV %u", i,
                          wc.opcode, wc.byte_len, w.send_len(i));
            return buf;
        }
        const std::int64_t bad = first_mismatch(
            {local_->data() + std::uint64_t{n} * w.size, wc.byte_len}, kSendSeed + i);
        if (bad >= 0) {
            std::snprintf(buf, sizeof buf, "SEND %u differs at byte %lld", i,
                          static_cast<long long>(bad));
            return buf;
        }
    }
    return "";
}

int Interop::run_initiator() {
    const Workload& w = o_.workload;
    const std::uint64_t slots = std::uint64_t{w.count} * w.size;
    // Our buffer: [write sources | send sources | read destinations (2 * count slots)].
    const std::uint64_t send_base = slots;
    const std::uint64_t read_base = 2 * slots;
    local_ = std::make_unique<MemoryRegion>(dev_->pd(), 4 * slots, IBV_ACCESS_LOCAL_WRITE);
    fill_pattern({local_->data(), slots}, kWriteSeed);
    for (std::uint32_t i = 0; i < w.count; ++i) {
        fill_pattern({local_->data() + send_base + std::uint64_t{i} * w.size, w.send_len(i)},
                     kSendSeed + i);
    }
    std::memset(local_->data() + read_base, 0xa5, 2 * slots);

    struct Work {
        ibv_wr_opcode op;
        std::uint64_t local;
        std::uint32_t len;
        std::uint64_t remote;
        std::uint32_t imm = 0;
        std::optional<std::pair<std::uint64_t, std::uint64_t>> check;  // READ: seed, offset
    };
    std::vector<Work> work;
    if (w.ops & op::kWrite) {
        for (std::uint32_t i = 0; i < w.count; ++i) {
            work.push_back({IBV_WR_RDMA_WRITE, w.write_offset(i), w.size,
                            theirs_.addr + w.write_offset(i), 0, std::nullopt});
        }
        const std::uint64_t last = w.write_offset(w.count - 1);
        work.push_back(
            {IBV_WR_RDMA_WRITE_WITH_IMM, last, w.size, theirs_.addr + last, kImm, std::nullopt});
    }
    if (w.ops & op::kRead) {
        for (std::uint32_t i = 0; i < w.count; ++i) {
            const std::uint64_t dst = read_base + 2ull * i * w.size;
            work.push_back({IBV_WR_RDMA_READ, dst, w.size, theirs_.addr + w.read_offset(i), 0,
                            std::pair{kReadSeed, std::uint64_t{i} * w.size}});
            if (w.ops & op::kWrite) {
                work.push_back({IBV_WR_RDMA_READ, dst + w.size, w.size,
                                theirs_.addr + w.write_offset(i), 0,
                                std::pair{kWriteSeed, w.write_offset(i)}});
            }
        }
    }
    if (w.ops & op::kSend) {
        for (std::uint32_t i = 0; i < w.count; ++i) {
            work.push_back({IBV_WR_SEND, send_base + std::uint64_t{i} * w.size, w.send_len(i), 0, 0,
                            std::nullopt});
        }
    }

    channel_->send_line("READY");
    std::string line = channel_->recv_line(remaining_ms(deadline_));
    if (line != "READY") throw std::runtime_error("exchange: expected READY, got " + line);
    log("ready: %zu work requests (%s, %u x %u bytes)", work.size(), mine_.ops.c_str(), w.count,
        w.size);

    std::string problem;
    std::size_t posted = 0;
    std::size_t completed = 0;
    const auto start = Clock::now();
    while (completed < work.size() && problem.empty()) {
        while (posted < work.size() && posted - completed < o_.depth) {
            const Work& x = work[posted];
            qp_->post_send(x.op, posted, local_->addr() + x.local, x.len, local_->lkey(), x.remote,
                           theirs_.rkey, x.imm);
            ++posted;
        }
        const auto wcs = poll_cq(qp_->send_cq(), 32, std::min(remaining_ms(deadline_), 1000));
        for (const ibv_wc& wc : wcs) {
            if (!problem.empty()) break;
            if (wc.status != IBV_WC_SUCCESS) {
                problem = "work request " + std::to_string(wc.wr_id) + " completed with " +
                          wc_status_name(wc.status);
                break;
            }
            if (wc.wr_id != completed) {
                problem = "send completions out of order";
                break;
            }
            const Work& x = work[completed];
            if (x.check) {
                const std::int64_t bad = first_mismatch({local_->data() + x.local, x.len},
                                                        x.check->first, x.check->second);
                if (bad >= 0) {
                    problem = "READ " + std::to_string(completed) +
                              " returned wrong data at byte " + std::to_string(bad);
                }
            }
            ++completed;
        }
        if (wcs.empty() && remaining_ms(deadline_) == 0) {
            problem = "timed out with " + std::to_string(completed) + " of " +
                      std::to_string(work.size()) + " work requests complete";
        }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (problem.empty()) {
        log("%zu work requests completed and verified in %.2f s", work.size(), seconds);
    }
    channel_->send_line(problem.empty() ? "DONE ok" : "DONE fail " + problem);
    line = channel_->recv_line(std::max(remaining_ms(deadline_), 10'000));
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
        Interop interop(options);
        return interop.run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "metaroce-interop: %s\n", e.what());
        return 2;
    }
}
