#include "workload.h"

#include <sstream>

namespace metaroce::tools {

std::optional<unsigned> parse_ops(const std::string& text) {
    unsigned ops = 0;
    std::istringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (item == "write") {
            ops |= op::kWrite;
        } else if (item == "read") {
            ops |= op::kRead;
        } else if (item == "send") {
            ops |= op::kSend;
        } else if (item == "all") {
            ops |= op::kAll;
        } else {
            return std::nullopt;
        }
    }
    if (ops == 0) return std::nullopt;
    return ops;
}

std::string format_ops(unsigned ops) {
    std::string out;
    const auto add = [&out](const char* name) {
        if (!out.empty()) out += ',';
        out += name;
    };
    if (ops & op::kWrite) add("write");
    if (ops & op::kRead) add("read");
    if (ops & op::kSend) add("send");
    return out;
}

}  // namespace metaroce::tools
