// Command-line plumbing shared by metaroce-peer, metaroce-interop and metaroce-compliance: the
// main() frame with its exit statuses, usage errors, numbers, log lines and deadlines.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace metaroce::tools {

// A bad command line: run_tool() prints "TOOL: <what>" (unless it is empty) and the usage.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Throws UsageError(error).
[[noreturn]] void usage(const std::string& error = {});

// `text` as a number (decimal, 0x hex or 0 octal); a UsageError "bad <what>" if it is not one.
std::uint64_t parse_number(const char* text, const char* what);

// A tool's main(): runs `body` and returns its exit status. A UsageError prints the usage
// (after the error, if any) on stderr and gives 2, as does any other exception, printed as
// "TOOL: <what>". `name` also prefixes log().
int run_tool(const char* name, const char* usage_text, const std::function<int()>& body);

// One line on stdout, "TOOL: " and the message, flushed.
void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// One line in the kernel's log at printk `level` (0 to 7), where this process may write
// /dev/kmsg (root); nothing otherwise. It lands in order with what the kernel logs, so a kernel
// report can be pinned on the step that came before it.
void kernel_log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Milliseconds until `deadline`, 0 once it has passed.
int remaining_ms(std::chrono::steady_clock::time_point deadline);

}  // namespace metaroce::tools
