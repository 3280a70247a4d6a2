// Section 7: protocol v2's headers on the wire, written from the spec alone. parse() takes any
// bytes to a packet or the first rule they break; build_headers() writes a packet's transport
// header and extensions. Whatever parses builds back into the same header bytes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace softmetaroce::v2 {

constexpr uint8_t kWireVersion = 2;
constexpr uint32_t kTransportHeaderLen = 32;
constexpr uint8_t kOpUdSend = 0x0c;     // the datagrams and ACK are not stream segments, so
constexpr uint8_t kOpUdSendImm = 0x0d;  // Op (stream_segment.h) leaves them out
constexpr uint8_t kOpAck = 0x10;
constexpr uint8_t kFlagAckReq = 0x1;
constexpr uint8_t kFlagRetx = 0x2;
constexpr uint8_t kFlagSolicited = 0x4;
constexpr uint8_t kFlagEarly = 0x8;  // section 9.1: the stream began in its sender's RTR
constexpr uint8_t kMaxPaths = 64;

// NAK syndromes (section 7's NAK extension, section 9.2).
constexpr uint8_t kSyndromeRnr = 1;
constexpr uint8_t kSyndromeInvalidRequest = 2;
constexpr uint8_t kSyndromeRemoteAccess = 3;
constexpr uint8_t kSyndromeRemoteOperation = 4;

// Section 7's "What parsing refuses", in its order.
enum class WireError {
    Ok,
    Short,     // shorter than the transport header, or than the opcode's headers
    Version,   // not version 2
    Opcode,    // not in the per-opcode table
    Reserved,  // a reserved bit or field, or a field the opcode does not use, not 0
    Path,      // a path index of 64 or more
    Floor,     // a floor delta over 254
    Payload,   // payload on an opcode that carries none
    Bounds,    // offset, payload, message length or address range do not add up
    Syndrome,  // a NAK syndrome not in the list
};

struct WirePacket {
    // transport header (32 bytes)
    uint8_t flags = 0;  // low 4 bits of byte 0: ACK_REQ 0x1, RETX 0x2, SOLICITED 0x4, EARLY 0x8
    uint8_t opcode = 0;
    uint8_t path = 0;
    uint32_t conn = 0, seq = 0;
    uint16_t floor_delta = 0, stream = 0;
    uint32_t ssn = 0, msn = 0, offset = 0, msg_len = 0;
    // extensions (only those the opcode carries are meaningful; others stay 0)
    uint64_t va = 0;
    uint32_t rkey = 0;                   // RETH, or ATOMIC's address and R_Key
    uint64_t swap_add = 0, compare = 0;  // ATOMIC
    uint32_t qkey = 0, src_qpn = 0;      // DETH
    uint32_t imm = 0;                    // IMM
    uint8_t syndrome = 0, rnr_timer = 0;
    uint32_t nak_ssn = 0;  // NAK
    uint32_t ack_cum = 0;
    std::array<uint64_t, 4> ack_bits{};  // ACK: bit i = word i/64, bit i%64 is cum+1+i
    uint32_t ack_delay_us = 0, ack_ce = 0;
    uint16_t share = 0;
    uint32_t capacity_mbps = 0;
    // payload: where it starts in the parsed buffer, and its length
    uint32_t payload_offset = 0, payload_len = 0;

    bool operator==(const WirePacket&) const = default;
};

// out is reset first; on a refusal it keeps what was decoded before the rule that failed.
WireError parse(std::span<const uint8_t> bytes, WirePacket& out);

// The transport header and the opcode's extensions (no payload); nullopt for an opcode not in
// the table. Fields are written as given (no validation), only the opcode's extensions are
// written, flags keep their low 4 bits, and ACK delay and CE saturate at 65535.
std::optional<std::vector<uint8_t>> build_headers(const WirePacket& p);

// The transport header and extensions of an opcode, in bytes; 0 if not an opcode.
uint32_t header_length(uint8_t opcode);

}  // namespace softmetaroce::v2
