#include "transfer.h"

#include <cstdio>

#include "cli.h"
#include "pattern.h"
#include "softmetaroce/completion.h"
#include "softmetaroce/psn.h"

namespace metaroce::tools {

std::vector<option> transfer_long_options() {
    return {{"role", required_argument, nullptr, 'r'},
            {"local", required_argument, nullptr, 'l'},
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
            {"help", no_argument, nullptr, 'h'}};
}

bool parse_transfer_option(int c, const char* arg, TransferOptions& o) {
    switch (c) {
        case 'r':
            o.role = arg;
            break;
        case 'l':
            o.local = arg;
            break;
        case 'L':
            o.listen = arg;
            break;
        case 'C':
            o.connect = arg;
            break;
        case 'm':
            o.mtu = static_cast<std::uint32_t>(parse_number(arg, "--mtu"));
            break;
        case 's':
            o.workload.size = static_cast<std::uint32_t>(parse_number(arg, "--size"));
            break;
        case 'n':
            o.workload.count = static_cast<std::uint32_t>(parse_number(arg, "--count"));
            break;
        case 'o': {
            const auto ops = parse_ops(arg);
            if (!ops) usage("bad --ops");
            o.workload.ops = *ops;
            break;
        }
        case 'Q':
            o.psn = static_cast<std::uint32_t>(parse_number(arg, "--psn")) & kPsnMask;
            break;
        case 'T':
            o.qp_timeout = static_cast<std::uint8_t>(parse_number(arg, "--qp-timeout"));
            break;
        case 'D':
            o.depth = static_cast<std::uint32_t>(parse_number(arg, "--depth"));
            break;
        case 't':
            o.timeout_s = static_cast<int>(parse_number(arg, "--timeout"));
            break;
        default:
            return false;
    }
    return true;
}

void check_transfer_options(const TransferOptions& o) {
    if (o.role != "target" && o.role != "initiator") usage("--role target|initiator");
    if (o.listen.empty() == o.connect.empty()) usage("one of --listen and --connect");
    if (o.workload.size < 2 || o.workload.count == 0) usage("--size >= 2 and --count >= 1");
}

EndpointInfo endpoint_info(const TransferOptions& o) {
    EndpointInfo info;
    info.role = o.role;
    info.mtu = o.mtu;
    info.size = o.workload.size;
    info.count = o.workload.count;
    info.ops = format_ops(o.workload.ops);
    return info;
}

std::string check_send_completion(const Step& step, std::uint64_t expected,
                                  const WorkCompletion& c) {
    if (!c.error.empty()) {
        return "work request " + std::to_string(c.wr_id) + " completed with " + c.error;
    }
    if (c.wr_id != expected) return "send completions out of order";
    if (step.kind == Step::Kind::Read) {
        const std::int64_t bad = first_mismatch(c.read_data, step.seed, step.offset);
        if (bad >= 0 || c.read_data.size() != step.len) {
            return "READ " + std::to_string(c.wr_id) + " returned wrong data at byte " +
                   std::to_string(bad);
        }
    }
    return "";
}

std::string verify_target(const Workload& w, std::span<const std::uint8_t> write_area,
                          std::span<const std::uint8_t> recv_area,
                          const std::vector<WorkCompletion>& recvs) {
    constexpr int kRecv = static_cast<int>(WcOpcode::Recv);
    constexpr int kRecvRdmaWithImm = static_cast<int>(WcOpcode::RecvRdmaWithImm);
    char buf[256];
    if (w.ops & op::kWrite) {
        const std::int64_t bad = first_mismatch(write_area, kWriteSeed);
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
        const WorkCompletion& c = recvs[n];
        if (c.wr_id != n) return "receive completions out of order";
        if (!c.error.empty()) {
            std::snprintf(buf, sizeof buf, "receive %u completed with %s", n, c.error.c_str());
            return buf;
        }
        if ((w.ops & op::kWrite) && n == 0) {
            if (c.opcode != kRecvRdmaWithImm || !c.has_imm || c.imm != kImm ||
                c.byte_len != w.size) {
                std::snprintf(buf, sizeof buf,
                              "WRITE with immediate: opcode %d imm 0x%x length %u, expected "
                              "RECV_RDMA_WITH_IMM 0x%x %u",
                              c.opcode, c.imm, c.byte_len, kImm, w.size);
                return buf;
            }
            continue;
        }
        const std::uint32_t i = n - ((w.ops & op::kWrite) ? 1 : 0);
        if (c.opcode != kRecv || c.byte_len != w.send_len(i)) {
            std::snprintf(buf, sizeof buf, "SEND %u: opcode %d length %u, expected RECV %u", i,
                          c.opcode, c.byte_len, w.send_len(i));
            return buf;
        }
        const std::int64_t bad =
            first_mismatch(recv_area.subspan(std::uint64_t{n} * w.size, c.byte_len), kSendSeed + i);
        if (bad >= 0) {
            std::snprintf(buf, sizeof buf, "SEND %u differs at byte %lld", i,
                          static_cast<long long>(bad));
            return buf;
        }
    }
    return "";
}

int target_verdict(LineChannel& channel, const std::string& done, const std::string& problem,
                   std::size_t receives) {
    channel.send_line(problem.empty() ? "RESULT ok" : "RESULT fail " + problem);
    if (done != "DONE ok") {
        log("the initiator failed: %s", done.c_str());
        return 1;
    }
    if (!problem.empty()) {
        log("FAIL: %s", problem.c_str());
        return 1;
    }
    log("PASS: target memory and %zu receive completions verified", receives);
    return 0;
}

std::string done_line(const std::string& problem) {
    return problem.empty() ? "DONE ok" : "DONE fail " + problem;
}

int initiator_verdict(const std::string& problem, const std::string& result) {
    if (!problem.empty()) {
        log("FAIL: %s", problem.c_str());
        return 1;
    }
    if (result != "RESULT ok") {
        log("FAIL: the target says: %s", result.c_str());
        return 1;
    }
    log("PASS: the target verified its memory and receive completions");
    return 0;
}

}  // namespace metaroce::tools
