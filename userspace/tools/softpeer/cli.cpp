#include "cli.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace metaroce::tools {
namespace {

const char* tool_name = "metaroce";

}  // namespace

void usage(const std::string& error) { throw UsageError(error); }

std::uint64_t parse_number(const char* text, const char* what) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 0);
    if (end == text || *end != '\0') usage(std::string("bad ") + what);
    return v;
}

int run_tool(const char* name, const char* usage_text, const std::function<int()>& body) {
    tool_name = name;
    try {
        return body();
    } catch (const UsageError& e) {
        if (*e.what() != '\0') std::fprintf(stderr, "%s: %s\n", name, e.what());
        std::fputs(usage_text, stderr);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", name, e.what());
    }
    return 2;
}

void log(const char* fmt, ...) {
    std::va_list ap;
    va_start(ap, fmt);
    std::fprintf(stdout, "%s: ", tool_name);
    std::vfprintf(stdout, fmt, ap);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    va_end(ap);
}

void kernel_log(int level, const char* fmt, ...) {
    static const int kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
    if (kmsg < 0) return;
    char msg[900];
    std::va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char line[960];
    const int n = std::snprintf(line, sizeof line, "<%d>%s\n", level, msg);
    // The kernel's log is a witness, not a result: a failed write changes nothing.
    if (write(kmsg, line, static_cast<std::size_t>(std::clamp(n, 0, 959))) < 0) return;
}

int remaining_ms(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace metaroce::tools
