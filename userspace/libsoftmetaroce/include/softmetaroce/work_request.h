// Send-queue work requests, with the semantics of their verbs counterparts.
#pragma once

#include <cstdint>
#include <vector>

namespace metaroce {

enum class WrOpcode : std::uint8_t {
    Send,
    SendWithImm,
    Write,
    WriteWithImm,
    Read,
    SendWithInv,
    AtomicCmpSwp,
    AtomicFetchAdd,
};

// A send-queue work request. SEND and WRITE data is copied in at posting time; a READ's
// result, and an atomic's returned value, are returned in its completion (the model has no
// requester-side memory). Version 1
// has one ordered stream per connection (protocol.md section 9): every packet carries stream 0.
struct WorkRequest {
    std::uint64_t wr_id = 0;
    WrOpcode opcode = WrOpcode::Send;
    std::vector<std::uint8_t> data;  // SEND, WRITE
    std::uint64_t remote_addr = 0;   // WRITE, READ, atomics (a multiple of 8)
    std::uint32_t rkey = 0;          // WRITE, READ, atomics
    std::uint32_t read_length = 0;   // READ
    std::uint32_t imm = 0;           // *WithImm
    std::uint64_t swap_add = 0;      // AtomicCmpSwp: the new value; AtomicFetchAdd: the addend
    std::uint64_t compare = 0;       // AtomicCmpSwp: the expected value
    // SendWithInv: the responder's key it invalidates when the SEND completes (protocol.md
    // section 6), carried in the last packet's immediate field with INV.
    std::uint32_t invalidate_rkey = 0;
    bool solicited = false;  // SEND, WRITE with immediate: on the last packet
    bool signaled = true;    // complete successfully with a completion
    bool fence = false;      // wait for earlier READs and atomics to complete first

    bool has_imm() const {
        return opcode == WrOpcode::SendWithImm || opcode == WrOpcode::WriteWithImm;
    }
    bool has_inv() const { return opcode == WrOpcode::SendWithInv; }
    bool is_send() const {
        return opcode == WrOpcode::Send || opcode == WrOpcode::SendWithImm ||
               opcode == WrOpcode::SendWithInv;
    }
    bool is_write() const { return opcode == WrOpcode::Write || opcode == WrOpcode::WriteWithImm; }
    bool is_read() const { return opcode == WrOpcode::Read; }
    bool is_atomic() const {
        return opcode == WrOpcode::AtomicCmpSwp || opcode == WrOpcode::AtomicFetchAdd;
    }
    // A READ or an atomic: requested in parts whose responses the requester tracks (an atomic
    // is one part of one response, protocol.md section 8).
    bool has_responses() const { return is_read() || is_atomic(); }
    // Whether the message consumes a receive WQE at the responder.
    bool consumes_receive_wqe() const { return is_send() || opcode == WrOpcode::WriteWithImm; }
};

}  // namespace metaroce
