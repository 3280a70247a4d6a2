// Bounds every step of a fuzzer: the main thread says what it is doing (a verbs call, a
// wait); if one step lasts longer than the limit, the watchdog prints it with the seed and
// the step's index and ends the process with status 3, so that a hang in the kernel or the
// provider becomes a reported failure, not a stuck test.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace metaroce::fuzz {

class Watchdog {
  public:
    Watchdog(std::uint64_t seed, int limit_s);
    ~Watchdog();
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    // The step now under way (a short name; copied).
    void step(const char* what, std::uint64_t index);

  private:
    void run();

    std::uint64_t seed_;
    int limit_s_;
    std::mutex mu_;
    std::string what_ = "start";
    std::uint64_t index_ = 0;
    std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// Seconds since the process started, for log lines.
double uptime_s();

// A "# " line on stdout and, where this process may write /dev/kmsg (root), in the kernel's
// log too: in order with an oops it provokes, which a panic cannot lose.
void trace(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace metaroce::fuzz
