// metaroce-fuzz: the two fuzzers of docs/fuzzing.md and what they share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace metaroce::fuzz {

// A QP to attack given on the command line (what rdma res show qp would say).
struct TargetHint {
    std::uint32_t dqpn = 0, sqpn = 0, rq_psn = 0, sq_psn = 0;
};

struct Options {
    std::string mode;    // "packets" or "rings"
    std::string device;  // the device under test (mr1)
    std::uint64_t seed = 0;
    double seconds = 0;        // run for this long (0: until count)
    std::uint64_t count = 0;   // or this many steps (0: until seconds)
    bool avoid_known = false;  // do not generate inputs reaching the known bugs
    int watchdog_s = 60;       // a step that takes longer is a hang
    std::uint64_t verbose_from = ~std::uint64_t{0};  // log every step from this index on
    std::uint64_t progress_every = 2000;

    // packets
    std::string dut_ip;    // the device's address (the packets' destination)
    std::string local_ip;  // the address to send from (the QPs' peers' address)
    std::string alt_ip;    // another local address (off-path source), optional
    std::string netns;     // the sockets' network namespace (empty: ours)
    std::uint32_t mtu = 1024;
    int own_qps = 4;                  // QPs the fuzzer opens and connects to peers it plays
    std::vector<int> attack_pids;     // transfers whose QPs it may spoof in their window
    std::vector<int> protect_pids;    // transfers whose QPs must survive (never spoofed)
    std::vector<TargetHint> targets;  // --target DQPN:SQPN[:RQ_PSN[:SQ_PSN]]
    int rate = 1500;                  // packets per second at most
};

// A QP found through the RDMA netlink (rdma res show qp).
struct QpInfo {
    std::string dev;
    std::uint32_t lqpn = 0;
    std::uint32_t rqpn = 0;
    std::uint32_t rq_psn = 0;
    std::uint32_t sq_psn = 0;
    int pid = 0;
    std::string type;
    std::string state;
};

// Every QP `rdma -j -d res show qp` lists (empty if the command fails).
std::vector<QpInfo> list_qps();
// Parses that command's JSON output (exposed for the self-test).
std::vector<QpInfo> parse_qps(const std::string& json);

int run_packets(const Options& o);
int run_rings(const Options& o);
int self_test();

}  // namespace metaroce::fuzz
