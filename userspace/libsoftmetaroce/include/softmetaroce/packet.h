// A decoded MetaRoCE packet as a plain value: BTH, extension header and payload. The field
// meanings are those of docs/protocol.md sections 2 and 3; the byte layouts live only in
// <rdma/metaroce_wire.h> (see codec.h).
#pragma once

#include <rdma/metaroce_wire.h>

#include <array>
#include <cstdint>
#include <string_view>
#include <variant>
#include <vector>

#include "softmetaroce/psn.h"

namespace metaroce {

enum class Opcode : std::uint8_t {
    Send = METAROCE_OP_SEND,
    Write = METAROCE_OP_WRITE,
    ReadRequest = METAROCE_OP_READ_REQ,
    ReadResponse = METAROCE_OP_READ_RESP,
    UdSend = METAROCE_OP_UD_SEND,
    AtomicCmpSwp = METAROCE_OP_ATOMIC_CMP_SWP,
    AtomicFetchAdd = METAROCE_OP_ATOMIC_FETCH_ADD,
    AtomicResponse = METAROCE_OP_ATOMIC_RESP,
    Ack = METAROCE_OP_ACK,
};

std::string_view to_string(Opcode opcode);

// BTH flag bits.
namespace flag {
inline constexpr std::uint8_t kFirst = METAROCE_F_FIRST;
inline constexpr std::uint8_t kLast = METAROCE_F_LAST;
inline constexpr std::uint8_t kImm = METAROCE_F_IMM;
inline constexpr std::uint8_t kSolicited = METAROCE_F_SOLICITED;
inline constexpr std::uint8_t kAckReq = METAROCE_F_ACK_REQ;
inline constexpr std::uint8_t kRetx = METAROCE_F_RETX;
// The last packet of a SEND with invalidate: deth.imm holds the receiver's key to invalidate.
// Only on a SEND packet with LAST, never with IMM (protocol.md section 3).
inline constexpr std::uint8_t kInv = METAROCE_F_INV;
inline constexpr std::uint8_t kAll = METAROCE_F_ALL;
}  // namespace flag

enum class Syndrome : std::uint8_t {
    Ack = METAROCE_ACK,
    RnrNak = METAROCE_NAK_RNR,
    InvalidRequest = METAROCE_NAK_INVALID_REQ,
    RemoteAccess = METAROCE_NAK_REMOTE_ACCESS,
    RemoteOperational = METAROCE_NAK_REMOTE_OP,
    Version = METAROCE_NAK_VERSION,
};

std::string_view to_string(Syndrome syndrome);

struct Bth {
    std::uint8_t version = METAROCE_VERSION;  // the high nibble of byte 0
    Opcode opcode = Opcode::Send;
    std::uint8_t flags = 0;
    std::uint8_t stream = 0;
    std::uint32_t dqpn = 0;
    std::uint32_t sqpn = 0;
    Psn psn = 0;
    std::uint16_t path = 0;
    std::uint32_t ts = 0;

    bool has(std::uint8_t f) const { return (flags & f) != 0; }
    friend bool operator==(const Bth&, const Bth&) = default;
};

// Data extension header: SEND, WRITE, READ_RESP, UD_SEND, ATOMIC_RESP.
struct Deth {
    std::uint64_t addr = 0;  // WRITE: remote address; SEND, READ_RESP: offset in the message
    std::uint32_t key = 0;
    std::uint32_t msn = 0;
    std::uint32_t msg_len = 0;
    std::uint32_t imm = 0;

    friend bool operator==(const Deth&, const Deth&) = default;
};

// Read request extension header.
struct ReadReq {
    std::uint64_t va = 0;
    std::uint32_t rkey = 0;
    std::uint32_t len = 0;
    std::uint32_t offset = 0;
    std::uint32_t msn = 0;

    friend bool operator==(const ReadReq&, const ReadReq&) = default;
};

// Atomic request extension header (ATOMIC_CMP_SWP, ATOMIC_FETCH_ADD; protocol.md section 3.4).
struct AtomicReq {
    std::uint64_t va = 0;  // a multiple of 8
    std::uint32_t rkey = 0;
    std::uint32_t msn = 0;       // as a READ's: the next message number, not consumed
    std::uint64_t swap_add = 0;  // CMP_SWP: the value stored on a match; FETCH_ADD: the addend
    std::uint64_t compare = 0;   // CMP_SWP: the expected value; FETCH_ADD: 0

    friend bool operator==(const AtomicReq&, const AtomicReq&) = default;
};

using SackWords = std::array<std::uint32_t, METAROCE_SACK_WORDS>;

// ACK / NAK extension header.
struct Ack {
    Psn cum_psn = 0;
    Psn nak_psn = 0;
    Syndrome syndrome = Syndrome::Ack;
    std::uint8_t nak_arg = 0;
    std::uint16_t ce_count = 0;
    std::uint16_t fair_share = 0;
    std::uint16_t echo_path = 0;
    std::uint32_t ts_echo = 0;
    std::uint32_t msn = 0;
    SackWords sack{};

    bool is_nak() const { return syndrome != Syndrome::Ack; }
    friend bool operator==(const Ack&, const Ack&) = default;
};

using Extension = std::variant<Deth, ReadReq, Ack, AtomicReq>;

struct Packet {
    Bth bth;
    Extension ext;
    std::vector<std::uint8_t> payload;

    const Deth& deth() const { return std::get<Deth>(ext); }
    Deth& deth() { return std::get<Deth>(ext); }
    const ReadReq& rreq() const { return std::get<ReadReq>(ext); }
    ReadReq& rreq() { return std::get<ReadReq>(ext); }
    const Ack& ack() const { return std::get<Ack>(ext); }
    Ack& ack() { return std::get<Ack>(ext); }
    const AtomicReq& areq() const { return std::get<AtomicReq>(ext); }
    AtomicReq& areq() { return std::get<AtomicReq>(ext); }

    friend bool operator==(const Packet&, const Packet&) = default;
};

// A packet a component wants sent, with the entropy of the path it goes on (UDP source port
// METAROCE_ENTROPY_BASE | entropy). Data packets are sent ECT(0), ACKs Not-ECT (section 1).
struct OutboundPacket {
    Packet packet;
    std::uint16_t entropy = 0;

    bool ect() const { return packet.bth.opcode != Opcode::Ack; }
};

// Whether packets of this opcode carry a DETH and a payload.
constexpr bool is_data_opcode(Opcode op) {
    return op == Opcode::Send || op == Opcode::Write || op == Opcode::ReadResponse ||
           op == Opcode::UdSend || op == Opcode::AtomicResponse;
}

// ATOMIC_CMP_SWP or ATOMIC_FETCH_ADD: a request with an AREQ.
constexpr bool is_atomic_request(Opcode op) {
    return op == Opcode::AtomicCmpSwp || op == Opcode::AtomicFetchAdd;
}

}  // namespace metaroce
