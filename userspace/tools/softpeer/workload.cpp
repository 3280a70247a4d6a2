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

std::vector<Step> Workload::steps() const {
    using Kind = Step::Kind;
    std::vector<Step> out;
    if (ops & op::kWrite) {
        for (std::uint32_t i = 0; i < count; ++i) {
            out.push_back({Kind::Write, write_offset(i), size, kWriteSeed, write_offset(i)});
        }
        const std::uint64_t last = write_offset(count - 1);
        out.push_back({Kind::WriteWithImm, last, size, kWriteSeed, last});
    }
    if (ops & op::kRead) {
        for (std::uint32_t i = 0; i < count; ++i) {
            out.push_back({Kind::Read, read_offset(i), size, kReadSeed, std::uint64_t{i} * size});
            if (ops & op::kWrite) {
                out.push_back({Kind::Read, write_offset(i), size, kWriteSeed, write_offset(i)});
            }
        }
    }
    if (ops & op::kSend) {
        for (std::uint32_t i = 0; i < count; ++i) {
            out.push_back({Kind::Send, 0, send_len(i), kSendSeed + i, 0});
        }
    }
    return out;
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
