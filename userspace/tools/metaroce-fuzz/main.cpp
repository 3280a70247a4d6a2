// metaroce-fuzz: the packet fuzzer and the hostile-process (ring) fuzzer (docs/fuzzing.md).
//
//   metaroce-fuzz packets -d DEV --dut-ip IP --local IP [--alt-ip IP] [--netns NS]
//                 [--attack-pid PID]... [--protect-pid PID]... [--target
//                 DQPN:SQPN[:RQ_PSN[:SQ_PSN]]]...
//                 [--qps N] [--rate PPS]
//   metaroce-fuzz rings -d DEV --dut-ip IP
//   common: [--seed S] [--seconds N | --count N] [--avoid-known] [--watchdog S]
//           [--verbose-from STEP] [--progress N]
//   metaroce-fuzz --self-test      host check of the generator (no device)
//
// Exit status: 0 the run ended with the device alive, 1 it did not, 2 usage or setup,
// 3 a call hung (the watchdog's message names it).
#include <getopt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "fuzz.h"
#include "packet_gen.h"
#include "softmetaroce/codec.h"

namespace metaroce::fuzz {

int self_test() {
    int failures = 0;
    auto check = [&](bool ok, const char* what) {
        std::printf("%s - %s\n", ok ? "ok" : "not ok", what);
        if (!ok) failures++;
    };
    Target a;
    a.kind = Target::Kind::Own;
    a.dqpn = 0x11;
    a.sqpn = 0xf00007;
    a.rq_psn = 0xfffff8;
    a.mr_addr = 0x7f0000001000;
    a.mr_rkey = 0x1234;
    a.mr_len = 65536;
    a.recv_len = 8192;
    Target b = a;
    PacketGen g1(42, {}), g2(42, {});
    bool same = true;
    std::size_t known = 0;
    for (int i = 0; i < 20000; ++i) {
        const Shot x = g1.next(a), y = g2.next(b);
        same = same && x.bytes == y.bytes && x.known == y.known;
        known += x.known != KnownBug::None;
    }
    check(same, "the same seed gives the same packets");
    check(known > 0, "without --avoid-known the known bugs are reached");
    PacketGen g3(42, {true});
    Target c = a;
    c.rq_psn = 0xfffff8;
    std::size_t reached = 0;
    bool wrapped = false;
    for (int i = 0; i < 20000; ++i) {
        const Shot s = g3.next(c);
        reached += classify(s.bytes, !s.wrong_source) == KnownBug::WrappedOffset;
        wrapped = wrapped || c.rq_psn < 0x1000;  // started at 0xfffff8
    }
    check(reached == 0, "--avoid-known never produces a wrapped SEND offset");
    check(wrapped, "an own QP's PSNs cross the 24-bit wrap");
    // Finding 1's example packet is classified as such.
    Packet p;
    p.bth.opcode = Opcode::Send;
    p.bth.flags = flag::kFirst | flag::kLast;
    p.ext = Deth{0xFFFFFFFFFFFFFBB8ull, 0, 0, 1400, 0};
    p.payload.assign(1400, 0xab);
    check(classify(encode(p), true) == KnownBug::WrappedOffset, "finding 1's packet is recognised");
    const auto qps = parse_qps(
        R"([{"ifindex":3,"ifname":"mr1","port":1,"lqpn":17,"rqpn":18,"type":"RC","state":"RTS",)"
        R"("rq-psn":5,"sq-psn":9,"path-mig-state":"MIGRATED","pdn":3,"pid":41001,"comm":"x"},)"
        R"({"ifindex":3,"ifname":"mr1","port":1,"lqpn":1,"type":"GSI","state":"RTS","sq-psn":0,"comm":"ib_core"}])");
    check(qps.size() == 2 && qps[0].lqpn == 17 && qps[0].rqpn == 18 && qps[0].rq_psn == 5 &&
              qps[0].sq_psn == 9 && qps[0].pid == 41001 && qps[0].dev == "mr1" &&
              qps[1].type == "GSI",
          "rdma res show qp output is parsed");
    std::printf("# self-test: %d failed\n", failures);
    return failures ? 1 : 0;
}

}  // namespace metaroce::fuzz

namespace {

[[noreturn]] void usage() {
    std::fprintf(
        stderr,
        "usage: metaroce-fuzz packets|rings -d DEV --dut-ip IP [--local IP] [--alt-ip IP]\n"
        "         [--netns NS] [--attack-pid PID]... [--protect-pid PID]...\n"
        "         [--target DQPN:SQPN[:RQ_PSN[:SQ_PSN]]]... [--qps N]\n"
        "         [--rate PPS] [--mtu BYTES] [--seed S] [--seconds N | --count N]\n"
        "         [--avoid-known] [--watchdog S] [--verbose-from STEP] [--progress N]\n"
        "       metaroce-fuzz --self-test\n");
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    using metaroce::fuzz::Options;
    if (argc >= 2 && std::strcmp(argv[1], "--self-test") == 0) return metaroce::fuzz::self_test();
    if (argc < 2) usage();
    Options o;
    o.mode = argv[1];
    if (o.mode != "packets" && o.mode != "rings") usage();
    o.seed =
        static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
    static const option longopts[] = {
        {"device", required_argument, nullptr, 'd'},
        {"dut-ip", required_argument, nullptr, 'D'},
        {"local", required_argument, nullptr, 'l'},
        {"alt-ip", required_argument, nullptr, 'a'},
        {"netns", required_argument, nullptr, 'n'},
        {"attack-pid", required_argument, nullptr, 'A'},
        {"protect-pid", required_argument, nullptr, 'P'},
        {"target", required_argument, nullptr, 'T'},
        {"qps", required_argument, nullptr, 'q'},
        {"rate", required_argument, nullptr, 'r'},
        {"mtu", required_argument, nullptr, 'm'},
        {"seed", required_argument, nullptr, 's'},
        {"seconds", required_argument, nullptr, 't'},
        {"count", required_argument, nullptr, 'c'},
        {"avoid-known", no_argument, nullptr, 'k'},
        {"watchdog", required_argument, nullptr, 'w'},
        {"verbose-from", required_argument, nullptr, 'v'},
        {"progress", required_argument, nullptr, 'p'},
        {nullptr, 0, nullptr, 0},
    };
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "d:", longopts, nullptr)) != -1) {
        switch (c) {
            case 'd':
                o.device = optarg;
                break;
            case 'D':
                o.dut_ip = optarg;
                break;
            case 'l':
                o.local_ip = optarg;
                break;
            case 'a':
                o.alt_ip = optarg;
                break;
            case 'n':
                o.netns = optarg;
                break;
            case 'A':
                o.attack_pids.push_back(std::atoi(optarg));
                break;
            case 'P':
                o.protect_pids.push_back(std::atoi(optarg));
                break;
            case 'T': {
                metaroce::fuzz::TargetHint h;
                unsigned long v[4] = {};
                char* p = optarg;
                for (int i = 0; i < 4 && *p; ++i) {
                    v[i] = std::strtoul(p, &p, 0);
                    if (*p == ':') ++p;
                }
                h.dqpn = static_cast<std::uint32_t>(v[0]);
                h.sqpn = static_cast<std::uint32_t>(v[1]);
                h.rq_psn = static_cast<std::uint32_t>(v[2]);
                h.sq_psn = static_cast<std::uint32_t>(v[3]);
                o.targets.push_back(h);
                break;
            }
            case 'q':
                o.own_qps = std::max(1, std::atoi(optarg));
                break;
            case 'r':
                o.rate = std::atoi(optarg);
                break;
            case 'm':
                o.mtu = static_cast<std::uint32_t>(std::strtoul(optarg, nullptr, 0));
                break;
            case 's':
                o.seed = std::strtoull(optarg, nullptr, 0);
                break;
            case 't':
                o.seconds = std::atof(optarg);
                break;
            case 'c':
                o.count = std::strtoull(optarg, nullptr, 0);
                break;
            case 'k':
                o.avoid_known = true;
                break;
            case 'w':
                o.watchdog_s = std::atoi(optarg);
                break;
            case 'v':
                o.verbose_from = std::strtoull(optarg, nullptr, 0);
                break;
            case 'p':
                o.progress_every = std::strtoull(optarg, nullptr, 0);
                break;
            default:
                usage();
        }
    }
    if (o.device.empty() || o.dut_ip.empty()) usage();
    if (o.mode == "packets" && o.local_ip.empty()) usage();
    if (!o.count && o.seconds <= 0) o.seconds = 30;
    // Line by line: a kernel panic must not swallow the steps logged before it.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    // The seed first, so that even a run the kernel kills can be repeated.
    std::printf("# metaroce-fuzz %s --seed 0x%llx\n", o.mode.c_str(),
                static_cast<unsigned long long>(o.seed));
    std::fflush(stdout);
    try {
        return o.mode == "packets" ? metaroce::fuzz::run_packets(o) : metaroce::fuzz::run_rings(o);
    } catch (const std::exception& e) {
        std::printf("not ok - metaroce-fuzz %s: %s (seed 0x%llx)\n", o.mode.c_str(), e.what(),
                    static_cast<unsigned long long>(o.seed));
        return 2;
    }
}
