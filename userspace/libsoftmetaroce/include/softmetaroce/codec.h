// Wire codec: bytes <-> Packet, with the strict validation of protocol.md section 12.
//
// decode() accepts exactly the packets a conforming sender may emit and names the first rule
// a rejected packet breaks; it never has undefined behaviour, whatever the bytes. encode() writes
// any Packet as is (no validation), so tests can also craft malformed packets; for every byte
// string x that decodes, encode(decode(x)) == x.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string_view>
#include <vector>

#include "softmetaroce/packet.h"
#include "softmetaroce/result.h"

namespace metaroce {

enum class ParseError : std::uint8_t {
    Truncated,           // shorter than the BTH, or than the BTH plus the opcode's extension
    BadVersion,          // version nibble is not METAROCE_VERSION
    ReservedBitsSet,     // a reserved field/bit is non-zero (incl. top byte of 24-bit fields)
    UnknownOpcode,       // opcode not in section 3
    FlagNotAllowed,      // a defined flag the opcode does not use (e.g. IMM on READ_REQ)
    UnknownSyndrome,     // ACK syndrome not in section 3.3
    FieldMustBeZero,     // a field the opcode defines as 0 is not (e.g. SEND key, ACK nak_psn)
    InconsistentHeader,  // header fields contradict each other (ACK cum_psn vs BTH PSN, ...)
    InconsistentFlags,   // FIRST/LAST disagree with the packet's offset and length, or
                         // flags contradict each other (INV without LAST, INV with IMM)
    PayloadNotAllowed,   // READ_REQ or ACK with a payload
    PayloadTooLong,      // more payload than the segment size
    InconsistentLength,  // offset/payload/message length do not add up (section 3.1)
    StreamNotZero,       // a stream other than 0: version 1 uses stream 0 only (section 9)
};

inline constexpr std::size_t kParseErrorCount =
    static_cast<std::size_t>(ParseError::StreamNotZero) + 1;

std::string_view to_string(ParseError error);
std::ostream& operator<<(std::ostream& os, ParseError error);

struct DecodeOptions {
    // The receiving QP's payload bytes per packet, its segment size (segment_size(path MTU));
    // anything is_valid_segment() refuses counts as 4096.
    std::uint32_t mtu = 4096;
};

// An IB path MTU in bytes: 256, 512, 1024, 2048 or 4096.
bool is_valid_mtu(std::uint32_t mtu);

// Payload bytes of every packet of a message but its last, on a path MTU of `path_mtu` bytes
// (protocol section 4.1).
inline std::uint32_t segment_size(std::uint32_t path_mtu) {
    return metaroce_segment_size(path_mtu);
}

// A segment size the model can work with: 256 to 4096 bytes, a multiple of 8. The model's
// `mtu` settings are segment sizes.
bool is_valid_segment(std::uint32_t bytes);

// Parses and validates one MetaRoCE packet (the UDP payload).
Result<Packet, ParseError> decode(std::span<const std::uint8_t> bytes,
                                  const DecodeOptions& options = {});

// Serializes a packet: the extension written is the one held in packet.ext.
std::vector<std::uint8_t> encode(const Packet& packet);
std::size_t encoded_size(const Packet& packet);

// The BTH fields of a packet that may be of another protocol version, read at the version 1
// offsets (we assume later versions keep the BTH's first 24 bytes): enough to answer with a
// VERSION NAK. Empty when the bytes are shorter than a BTH.
struct BthProbe {
    std::uint8_t version = 0;
    std::uint8_t opcode = 0;
    std::uint32_t dqpn = 0;
    std::uint32_t sqpn = 0;
    Psn psn = 0;
    std::uint16_t path = 0;
    std::uint32_t ts = 0;
};

std::optional<BthProbe> probe_bth(std::span<const std::uint8_t> bytes);

// Number of READ_RESP packets (and PSNs) a READ of `length` bytes takes: max(1, ceil(L/MTU)).
constexpr std::uint32_t read_response_packets(std::uint32_t length, std::uint32_t mtu) {
    return length == 0 ? 1 : static_cast<std::uint32_t>((std::uint64_t{length} + mtu - 1) / mtu);
}

// Number of packets a SEND or WRITE of `length` bytes takes (a zero-length message is one).
constexpr std::uint32_t message_packets(std::uint32_t length, std::uint32_t mtu) {
    return read_response_packets(length, mtu);
}

}  // namespace metaroce
