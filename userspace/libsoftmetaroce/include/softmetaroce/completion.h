// Work completions, with the semantics (and numeric values) of their verbs counterparts.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace metaroce {

// Values are those of enum ibv_wc_status.
enum class WcStatus : std::uint8_t {
    Success = 0,
    LocLenErr = 1,
    LocQpOpErr = 2,
    LocProtErr = 4,
    WrFlushErr = 5,
    BadRespErr = 7,
    LocAccessErr = 8,
    RemInvReqErr = 9,
    RemAccessErr = 10,
    RemOpErr = 11,
    RetryExcErr = 12,
    RnrRetryExcErr = 13,
};

std::string_view to_string(WcStatus status);

// Values are those of enum ibv_wc_opcode.
enum class WcOpcode : std::uint8_t {
    Send = 0,
    RdmaWrite = 1,
    RdmaRead = 2,
    CompSwap = 3,
    FetchAdd = 4,
    Recv = 128,
    RecvRdmaWithImm = 129,
};

struct Completion {
    std::uint64_t wr_id = 0;
    WcStatus status = WcStatus::Success;
    WcOpcode opcode = WcOpcode::Send;
    std::uint32_t byte_len = 0;
    std::optional<std::uint32_t> imm;
    // A receive of a SEND with invalidate: the key it named (IBV_WC_WITH_INV).
    std::optional<std::uint32_t> invalidated_rkey;
    bool solicited = false;
    std::vector<std::uint8_t> read_data;        // a READ's result; an atomic's 8 bytes, host order
    std::optional<std::uint64_t> atomic_value;  // an atomic's: what the remote word held
};

}  // namespace metaroce
