// The transfer metaroce-peer and metaroce-interop run between an initiator and a target, so
// that each side knows exactly what the other must end up with (docs in tools/README.md).
//
// The target exposes one buffer of 2 * count * size bytes: the write area (the first half),
// which the initiator fills, and the read area (the second half), which the target fills with
// the read pattern before it says READY. The initiator, for each selected operation:
//   write: WRITE i (i < count) puts bytes [i*size, (i+1)*size) of the write pattern at offset
//          i*size of the write area; then one WRITE with immediate kImm rewrites the last slot
//          (the target's first receive completes with it, RECV_RDMA_WITH_IMM);
//   read:  READ i reads slot i of the read area, and with `write` also READs slot i of the
//          write area (a READ observes earlier WRITEs of its QP); each compared with the pattern;
//   send:  SEND i carries send_len(i) bytes of the send pattern kSendSeed + i; the target's
//          receive WQEs (size bytes each) complete in order with them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace metaroce::tools {

namespace op {
inline constexpr unsigned kWrite = 1;
inline constexpr unsigned kRead = 2;
inline constexpr unsigned kSend = 4;
inline constexpr unsigned kAll = kWrite | kRead | kSend;
}  // namespace op

inline constexpr std::uint64_t kWriteSeed = 0x57524954;  // "WRIT"
inline constexpr std::uint64_t kReadSeed = 0x52454144;   // "READ"
inline constexpr std::uint64_t kSendSeed = 0x53454e44;   // "SEND"
inline constexpr std::uint32_t kImm = 0x4d524345;        // "MRCE"

// One work request of the initiator. Its bytes (a WRITE's or SEND's data, or what a READ must
// return) are [offset, offset + len) of the pattern stream `seed`.
struct Step {
    enum class Kind { Write, WriteWithImm, Read, Send };
    Kind kind = Kind::Write;
    std::uint64_t remote = 0;  // WRITE, READ: the offset in the target's buffer
    std::uint32_t len = 0;
    std::uint64_t seed = 0;
    std::uint64_t offset = 0;
};

struct Workload {
    std::uint32_t size = 65536;
    std::uint32_t count = 16;
    unsigned ops = op::kAll;

    std::uint64_t region_len() const { return 2ull * size * count; }
    std::uint64_t write_offset(std::uint32_t i) const { return std::uint64_t{i} * size; }
    std::uint64_t read_offset(std::uint32_t i) const {
        return std::uint64_t{count} * size + std::uint64_t{i} * size;
    }
    // SENDs of varied lengths in (size / 2, size], so that most end inside a packet.
    std::uint32_t send_len(std::uint32_t i) const {
        return size - static_cast<std::uint32_t>((std::uint64_t{i} * 977) % (size / 2 + 1));
    }
    // Receive WQEs the target posts: one for the WRITE with immediate, one per SEND.
    std::uint32_t receives() const {
        return ((ops & op::kWrite) ? 1 : 0) + ((ops & op::kSend) ? count : 0);
    }
    // The initiator's work requests in posting order (wr_id: the index), as described above.
    std::vector<Step> steps() const;
};

std::optional<unsigned> parse_ops(const std::string& text);
std::string format_ops(unsigned ops);

}  // namespace metaroce::tools
