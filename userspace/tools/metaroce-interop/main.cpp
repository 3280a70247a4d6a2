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

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "exchange.h"
#include "pattern.h"
#include "transfer.h"
#include "verbs_util.h"
#include "workload.h"

namespace metaroce::tools {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: metaroce-interop -d DEV --role target|initiator [--local IP | --gid-index N]\n"
    "                        (--listen [ADDR:]PORT | --connect HOST:PORT)\n"
    "                        [--mtu 1024] [--size BYTES] [--count N]\n"
    "                        [--ops write,read,send] [--psn PSN] [--qp-timeout CODE]\n"
    "                        [--depth N] [--timeout SEC]\n";

struct Options : TransferOptions {
    std::string device;
    std::optional<int> gid_index;
};

Options parse_options(int argc, char** argv) {
    std::vector<option> longs = transfer_long_options();
    longs.insert(longs.end(), {{"device", required_argument, nullptr, 'd'},
                               {"gid-index", required_argument, nullptr, 'g'},
                               {nullptr, 0, nullptr, 0}});
    Options o;
    int c = 0;
    while ((c = getopt_long(argc, argv, "d:h", longs.data(), nullptr)) != -1) {
        if (parse_transfer_option(c, optarg, o)) continue;
        switch (c) {
            case 'd':
                o.device = optarg;
                break;
            case 'g':
                o.gid_index = static_cast<int>(parse_number(optarg, "--gid-index"));
                break;
            default:
                usage();
        }
    }
    if (optind != argc) usage("unexpected arguments");
    if (o.device.empty()) usage("-d DEV is needed");
    check_transfer_options(o);
    if (o.depth == 0 || o.depth > 1024) usage("--depth: 1..1024");
    return o;
}

ibv_wr_opcode verbs_opcode(Step::Kind kind) {
    switch (kind) {
        case Step::Kind::Write:
            return IBV_WR_RDMA_WRITE;
        case Step::Kind::WriteWithImm:
            return IBV_WR_RDMA_WRITE_WITH_IMM;
        case Step::Kind::Read:
            return IBV_WR_RDMA_READ;
        case Step::Kind::Send:
            break;
    }
    return IBV_WR_SEND;
}

WorkCompletion completion(const ibv_wc& wc) {
    WorkCompletion c;
    c.wr_id = wc.wr_id;
    if (wc.status != IBV_WC_SUCCESS) c.error = wc_status_name(wc.status);
    c.opcode = wc.opcode;
    c.has_imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
    c.imm = ntohl(wc.imm_data);
    c.byte_len = wc.byte_len;
    return c;
}

class Interop {
  public:
    explicit Interop(const Options& o) : o_(o) {}
    int run();

  private:
    int run_target();
    int run_initiator();

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
    mine_ = endpoint_info(o_);
    mine_.qpn = qp_->qpn();
    mine_.psn = o_.psn.value_or(entropy() & 0xffffff);
    mine_.ip = ip_of_gid(dev_->gid(*gid_index));
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
    std::vector<WorkCompletion> completions;
    for (const ibv_wc& wc : recvs) completions.push_back(completion(wc));
    const std::string problem = verify_target(w, {region_->data(), std::uint64_t{w.count} * w.size},
                                              {local_->data(), local_->size()}, completions);
    return target_verdict(*channel_, *done, problem, recvs.size());
}

int Interop::run_initiator() {
    const Workload& w = o_.workload;
    const std::vector<Step> steps = w.steps();
    // Our buffer: a slice per work request, with what it sends or for what it reads.
    std::vector<std::uint64_t> slice;
    std::uint64_t len = 0;
    for (const Step& s : steps) {
        slice.push_back(len);
        len += s.len;
    }
    local_ = std::make_unique<MemoryRegion>(dev_->pd(), len, IBV_ACCESS_LOCAL_WRITE);
    for (std::size_t k = 0; k < steps.size(); ++k) {
        const Step& s = steps[k];
        if (s.kind == Step::Kind::Read) {
            std::memset(local_->data() + slice[k], 0xa5, s.len);
        } else {
            fill_pattern({local_->data() + slice[k], s.len}, s.seed, s.offset);
        }
    }

    channel_->send_line("READY");
    std::string line = channel_->recv_line(remaining_ms(deadline_));
    if (line != "READY") throw std::runtime_error("exchange: expected READY, got " + line);
    log("ready: %zu work requests (%s, %u x %u bytes)", steps.size(), mine_.ops.c_str(), w.count,
        w.size);

    std::string problem;
    std::size_t posted = 0;
    std::size_t completed = 0;
    const auto start = Clock::now();
    while (completed < steps.size() && problem.empty()) {
        while (posted < steps.size() && posted - completed < o_.depth) {
            const Step& s = steps[posted];
            const std::uint64_t remote = s.kind == Step::Kind::Send ? 0 : theirs_.addr + s.remote;
            qp_->post_send(verbs_opcode(s.kind), posted, local_->addr() + slice[posted], s.len,
                           local_->lkey(), remote, theirs_.rkey,
                           s.kind == Step::Kind::WriteWithImm ? kImm : 0);
            ++posted;
        }
        const auto wcs = poll_cq(qp_->send_cq(), 32, std::min(remaining_ms(deadline_), 1000));
        for (const ibv_wc& wc : wcs) {
            const Step& s = steps[completed];
            WorkCompletion c = completion(wc);
            c.read_data = {local_->data() + slice[completed], s.len};
            problem = check_send_completion(s, completed, c);
            if (!problem.empty()) break;
            ++completed;
        }
        if (wcs.empty() && remaining_ms(deadline_) == 0) {
            problem = "timed out with " + std::to_string(completed) + " of " +
                      std::to_string(steps.size()) + " work requests complete";
        }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (problem.empty()) {
        log("%zu work requests completed and verified in %.2f s", steps.size(), seconds);
    }
    channel_->send_line(done_line(problem));
    line = channel_->recv_line(std::max(remaining_ms(deadline_), 10'000));
    return initiator_verdict(problem, line);
}

}  // namespace
}  // namespace metaroce::tools

int main(int argc, char** argv) {
    using namespace metaroce::tools;
    return run_tool("metaroce-interop", kUsage, [&] {
        const Options options = parse_options(argc, argv);
        Interop interop(options);
        return interop.run();
    });
}
