// What metaroce-peer and metaroce-interop share around their QPs: the command-line options of
// a transfer, the HELLO describing it, and the checks and verdicts of step 3 of the exchange
// (exchange.h) for the workload (workload.h).
#pragma once

#include <getopt.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exchange.h"
#include "workload.h"

namespace metaroce::tools {

// The options of both tools:
//   --role target|initiator [--local IP] (--listen [ADDR:]PORT | --connect HOST:PORT)
//   [--mtu 1024] [--size BYTES] [--count N] [--ops write,read,send] [--psn PSN]
//   [--qp-timeout CODE] [--depth N] [--timeout SEC] [--help]
struct TransferOptions {
    std::string role;
    std::string local;
    std::string listen;
    std::string connect;
    std::uint32_t mtu = 1024;
    Workload workload;
    std::optional<std::uint32_t> psn;
    std::uint8_t qp_timeout = 18;  // 1.07 s per retry period: patient under emulation
    std::uint32_t depth = 64;      // work requests outstanding at once (initiator)
    int timeout_s = 300;
};

// getopt_long() entries for them, without the terminating one; --help gives 'h'.
std::vector<option> transfer_long_options();
// Takes getopt_long()'s `c` and `arg` if `c` is one of them (false if not); UsageError on a
// bad value.
bool parse_transfer_option(int c, const char* arg, TransferOptions& o);
// UsageError unless the role is known, exactly one of --listen and --connect is given, and
// the workload has --size >= 2 and --count >= 1.
void check_transfer_options(const TransferOptions& o);

// The HELLO's role, path MTU and workload; the caller adds its QP, address and buffer.
EndpointInfo endpoint_info(const TransferOptions& o);

// A work completion of either kind of QP (verbs or libsoftmetaroce), as the checks need it.
struct WorkCompletion {
    std::uint64_t wr_id = 0;
    std::string error;  // empty on success, else the status
    int opcode = 0;     // numbered as in enum ibv_wc_opcode
    bool has_imm = false;
    std::uint32_t imm = 0;  // host byte order
    std::uint32_t byte_len = 0;
    std::span<const std::uint8_t> read_data;  // a READ's: the bytes it read
};

// The initiator's check of the completion it expects next, of work request `expected`
// (`step`): "" if all is well, else what is wrong.
std::string check_send_completion(const Step& step, std::uint64_t expected,
                                  const WorkCompletion& c);

// The target's check once the initiator is done: the write area of its buffer, and its
// receive completions in order (receive n's buffer is `size` bytes at n * size of
// `recv_area`). "" if all is well, else what is wrong.
std::string verify_target(const Workload& w, std::span<const std::uint8_t> write_area,
                          std::span<const std::uint8_t> recv_area,
                          const std::vector<WorkCompletion>& recvs);

// Step 3 for the target: answers the initiator's DONE line `done` with the RESULT for
// `problem` (from verify_target()), logs the verdict and returns the exit status.
int target_verdict(LineChannel& channel, const std::string& done, const std::string& problem,
                   std::size_t receives);
// Step 3 for the initiator: its DONE line for its own `problem` ("" if none) ...
std::string done_line(const std::string& problem);
// ... and, with the target's RESULT line, the verdict (logged) and the exit status.
int initiator_verdict(const std::string& problem, const std::string& result);

}  // namespace metaroce::tools
