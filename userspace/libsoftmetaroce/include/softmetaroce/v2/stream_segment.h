// Sections 7 and 8.1: what a stream's receiver needs of a segment's header, and what each
// opcode's row of the per-opcode table says about it (RECV, a request, RESP).
#pragma once

#include <cstdint>

namespace softmetaroce::v2 {

// Section 7's opcodes that are segments of a stream (the datagrams and ACK are not).
enum class Op : uint8_t {
    Send = 0x01,
    SendImm = 0x02,
    SendInv = 0x03,
    Write = 0x04,
    WriteImm = 0x05,
    ReadReq = 0x06,
    ReadResp = 0x07,
    CmpSwp = 0x08,
    FetchAdd = 0x09,
    AtomicResp = 0x0a,
    Nak = 0x0b,
};

struct Segment {
    Op op;
    uint32_t ssn, msn, offset, msg_len, payload_len;
};

// RECV in the table: the message consumes a receive WQE, and its MSN names which.
constexpr bool consumes_recv(Op op) {
    return op == Op::Send || op == Op::SendImm || op == Op::SendInv || op == Op::WriteImm;
}

// Section 9.1: a request the responder executes and answers (one segment each).
constexpr bool is_request(Op op) {
    return op == Op::ReadReq || op == Op::CmpSwp || op == Op::FetchAdd;
}

// RESP in the table: a segment of the responder's stream; its MSN is the request's SSN.
constexpr bool is_response(Op op) {
    return op == Op::ReadResp || op == Op::AtomicResp || op == Op::Nak;
}

// Section 8.1: the segment with offset + payload = length is its message's last. Widened so
// that no header can overflow it.
constexpr bool is_last(const Segment& s) { return uint64_t{s.offset} + s.payload_len == s.msg_len; }

}  // namespace softmetaroce::v2
