// metaroce-compliance: the MetaRoCE conformance suite. It faces a device under test (DUT)
// from another address with packets crafted by the libsoftmetaroce codec and checks each
// response against docs/protocol.md; the DUT's QPs, memory and completions are driven through
// libibverbs. See docs/compliance.md.
//
//   metaroce-compliance --list | --describe
//   metaroce-compliance -d DEV --local IP [--netns NS] [--dut-ip IP] [--alt-ip IP]
//                       [--port 4793] [--mtu 1024] [--gid-index N] [--time-scale X] [-v]
//                       [CASE...]
//
// The harness's UDP sockets are made in network namespace NS (ip netns name or path), the
// tool itself staying in its own, where the device's counters are visible in sysfs.
//
// Output is TAP; the exit status is 0 when every case passed (or was skipped), 1 when one
// failed, 2 for usage and setup errors.
#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.h"
#include "harness.h"

namespace metaroce::compliance {
namespace {

using tools::usage;

std::vector<Case> all_cases() {
    std::vector<Case> out;
    for (auto group : {responder_cases(), atomic_cases(), validation_cases(), requester_cases(),
                       health_cases()}) {
        for (Case& c : group) out.push_back(std::move(c));
    }
    return out;
}

constexpr const char* kUsage =
    "usage: metaroce-compliance --list | --describe\n"
    "       metaroce-compliance -d DEV --local IP [--netns NS] [--dut-ip IP]\n"
    "                           [--alt-ip IP] [--port 4793] [--mtu 1024]\n"
    "                           [--gid-index N] [--time-scale X] [-v] [CASE...]\n";

IpAddress address(const char* text, const char* what) {
    const auto a = IpAddress::parse(text);
    if (!a) usage(std::string("bad ") + what);
    return *a;
}

int run(int argc, char** argv) {
    static const option longs[] = {{"device", required_argument, nullptr, 'd'},
                                   {"local", required_argument, nullptr, 'l'},
                                   {"dut-ip", required_argument, nullptr, 'D'},
                                   {"alt-ip", required_argument, nullptr, 'a'},
                                   {"port", required_argument, nullptr, 'p'},
                                   {"netns", required_argument, nullptr, 'n'},
                                   {"mtu", required_argument, nullptr, 'm'},
                                   {"gid-index", required_argument, nullptr, 'g'},
                                   {"time-scale", required_argument, nullptr, 't'},
                                   {"list", no_argument, nullptr, 'L'},
                                   {"describe", no_argument, nullptr, 'E'},
                                   {"verbose", no_argument, nullptr, 'v'},
                                   {"help", no_argument, nullptr, 'h'},
                                   {nullptr, 0, nullptr, 0}};
    Options o;
    bool list = false;
    bool describe_cases = false;
    bool have_local = false;
    std::optional<IpAddress> dut_ip;
    int c = 0;
    while ((c = getopt_long(argc, argv, "d:vh", longs, nullptr)) != -1) {
        switch (c) {
            case 'd':
                o.device = optarg;
                break;
            case 'l':
                o.local_ip = address(optarg, "--local");
                have_local = true;
                break;
            case 'D':
                dut_ip = address(optarg, "--dut-ip");
                break;
            case 'a':
                o.alt_ip = address(optarg, "--alt-ip");
                break;
            case 'p':
                o.port = static_cast<std::uint16_t>(std::strtoul(optarg, nullptr, 0));
                break;
            case 'n':
                o.netns = optarg;
                break;
            case 'm':
                o.mtu = static_cast<std::uint32_t>(std::strtoul(optarg, nullptr, 0));
                break;
            case 'g':
                o.gid_index = static_cast<int>(std::strtol(optarg, nullptr, 0));
                break;
            case 't':
                o.time_scale = std::strtod(optarg, nullptr);
                break;
            case 'L':
                list = true;
                break;
            case 'E':
                describe_cases = true;
                break;
            case 'v':
                o.verbose = true;
                break;
            default:
                usage();
        }
    }
    const std::vector<Case> cases = all_cases();
    if (list || describe_cases) {
        for (const Case& k : cases) {
            if (describe_cases) {
                std::printf("%s\t%s\n", k.name, k.summary);
            } else {
                std::printf("%s\n", k.name);
            }
        }
        return 0;
    }
    std::vector<const Case*> selected;
    for (int i = optind; i < argc; ++i) {
        const Case* found = nullptr;
        for (const Case& k : cases) {
            if (argv[i] == std::string(k.name)) found = &k;
        }
        if (found == nullptr) usage(std::string("no case named ") + argv[i]);
        selected.push_back(found);
    }
    if (selected.empty()) {
        for (const Case& k : cases) selected.push_back(&k);
    }
    if (o.device.empty()) usage("-d DEV is needed");
    if (!have_local) usage("--local IP (the harness's address) is needed");
    if (!is_valid_mtu(o.mtu)) usage("--mtu: 256, 512, 1024, 2048 or 4096");
    if (o.time_scale <= 0) usage("--time-scale must be positive");
    set_verbose(o.verbose);

    // The DUT's address: given, or its first IPv4 GID.
    if (!dut_ip) {
        VerbsDevice dev(o.device);
        const auto index =
            o.gid_index >= 0 ? std::optional<int>(o.gid_index) : dev.gid_index_for("");
        if (!index) usage("the device has no IPv4 GID: give --dut-ip");
        dut_ip = IpAddress::parse(tools::ip_of_gid(dev.gid(*index)));
    }
    o.dut_ip = *dut_ip;

    const auto env = std::make_unique<Env>(o);
    std::printf("TAP version 13\n1..%zu\n", selected.size());
    std::printf("# DUT %s at %s (GID %d), harness at %s:%u, MTU %u\n", o.device.c_str(),
                o.dut_ip.str().c_str(), env->gid_index(), o.local_ip.str().c_str(), o.port, o.mtu);
    if (!env->has_counters()) {
        std::printf("# the DUT's counters are not visible here: counter checks are skipped\n");
    }
    std::fflush(stdout);
    unsigned pass = 0, fail = 0, skip = 0, n = 0;
    for (const Case* k : selected) {
        ++n;
        note("%s: %s", k->name, k->summary);
        // compliance.sh pins a kernel report on the case whose line comes before it.
        tools::kernel_log(6, "metaroce-compliance: case %s", k->name);
        const auto start = std::chrono::steady_clock::now();
        std::string result;
        try {
            k->run(*env);
            ++pass;
            result = format("ok %u - %s", n, k->name);
        } catch (const CaseSkip& e) {
            ++skip;
            result = format("ok %u - %s # SKIP %s", n, k->name, e.what());
        } catch (const CaseFailure& e) {
            ++fail;
            note("FAIL: %s", e.what());
            result = format("not ok %u - %s", n, k->name);
        } catch (const std::exception& e) {
            ++fail;
            note("ERROR: %s", e.what());
            result = format("not ok %u - %s", n, k->name);
        }
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        note("time: %.2fs", secs);
        std::printf("%s\n", result.c_str());
        std::fflush(stdout);
        env->drain(5);
    }
    std::printf("# Totals: pass:%u fail:%u xfail:0 xpass:0 skip:%u error:0\n", pass, fail, skip);
    return fail == 0 ? 0 : 1;
}

}  // namespace
}  // namespace metaroce::compliance

int main(int argc, char** argv) {
    return metaroce::tools::run_tool("metaroce-compliance", metaroce::compliance::kUsage,
                                     [&] { return metaroce::compliance::run(argc, argv); });
}
