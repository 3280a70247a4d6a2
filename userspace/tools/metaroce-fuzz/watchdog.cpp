#include "watchdog.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "cli.h"

namespace metaroce::fuzz {
namespace {
const auto g_start = std::chrono::steady_clock::now();
}

double uptime_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
}

void trace(const char* fmt, ...) {
    char buf[900];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    std::printf("# %s\n", buf);
    tools::kernel_log(2, "metaroce-fuzz: %s", buf);
}

Watchdog::Watchdog(std::uint64_t seed, int limit_s)
    : seed_(seed), limit_s_(limit_s), thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
    stop_ = true;
    thread_.join();
}

void Watchdog::step(const char* what, std::uint64_t index) {
    const std::lock_guard<std::mutex> lock(mu_);
    what_ = what;
    index_ = index;
    since_ = std::chrono::steady_clock::now();
}

void Watchdog::run() {
    while (!stop_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const std::lock_guard<std::mutex> lock(mu_);
        const auto stuck = std::chrono::steady_clock::now() - since_;
        if (stuck > std::chrono::seconds(limit_s_)) {
            std::printf("# HANG: \"%s\" (step %llu) did not return in %d s; seed 0x%llx\n",
                        what_.c_str(), static_cast<unsigned long long>(index_), limit_s_,
                        static_cast<unsigned long long>(seed_));
            std::printf("not ok - metaroce-fuzz: a call hung\n");
            std::fflush(stdout);
            _exit(3);
        }
    }
}

}  // namespace metaroce::fuzz
