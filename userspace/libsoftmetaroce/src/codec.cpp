#include "softmetaroce/codec.h"

#include <rdma/metaroce_wire.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

#include "byte_order.h"

namespace metaroce {
namespace {

using detail::load_be16;
using detail::load_be32;
using detail::load_be64;
using detail::store_be16;
using detail::store_be32;
using detail::store_be64;

// Field offsets come from the shared header; the asserts pin them to protocol.md.
constexpr std::size_t kBthLen = METAROCE_BTH_LEN;
static_assert(sizeof(metaroce_bth) == METAROCE_BTH_LEN);
static_assert(sizeof(metaroce_deth) == METAROCE_DETH_LEN);
static_assert(sizeof(metaroce_rreq) == METAROCE_RREQ_LEN);
static_assert(sizeof(metaroce_ack) == METAROCE_ACK_LEN);
static_assert(sizeof(metaroce_areq) == METAROCE_AREQ_LEN);

// Byte 0 of the BTH: version in the high nibble, reserved low nibble.
constexpr unsigned kVersionShift = 4;
constexpr std::uint8_t kVersionReservedMask = 0x0f;

constexpr std::uint32_t k24BitReservedMask = ~std::uint32_t{METAROCE_PSN_MASK};

// Highest RNR timer value in the IB encoding.
constexpr std::uint8_t kMaxRnrTimerCode = 31;

// The flags each opcode may carry (protocol.md section 3): SEND any defined flag (INV only
// with LAST and without IMM, checked with the DETH), WRITE any but INV, READ_REQ ACK_REQ and
// RETX, READ_RESP FIRST, LAST and RETX, UD_SEND FIRST and LAST (both, checked with the
// lengths), IMM and SOLICITED, an atomic request ACK_REQ and RETX, an ATOMIC_RESP FIRST and
// LAST (both, checked with the DETH) and RETX, an ACK none.
std::uint8_t allowed_flags(Opcode op) {
    using namespace flag;
    switch (op) {
        case Opcode::Send:
            return kFirst | kLast | kImm | kSolicited | kAckReq | kRetx | kInv;
        case Opcode::Write:
            return kFirst | kLast | kImm | kSolicited | kAckReq | kRetx;
        case Opcode::ReadRequest:
            return kAckReq | kRetx;
        case Opcode::ReadResponse:
            return kFirst | kLast | kRetx;
        case Opcode::UdSend:
            return kFirst | kLast | kImm | kSolicited;
        case Opcode::AtomicCmpSwp:
        case Opcode::AtomicFetchAdd:
            return kAckReq | kRetx;
        case Opcode::AtomicResponse:
            return kFirst | kLast | kRetx;
        case Opcode::Ack:
            return 0;
    }
    return 0;
}

bool is_known_syndrome(std::uint8_t s) { return s <= METAROCE_NAK_VERSION; }

Deth load_deth(const std::uint8_t* p) {
    Deth d;
    d.addr = load_be64(p + offsetof(metaroce_deth, addr));
    d.key = load_be32(p + offsetof(metaroce_deth, key));
    d.msn = load_be32(p + offsetof(metaroce_deth, msn));
    d.msg_len = load_be32(p + offsetof(metaroce_deth, msg_len));
    d.imm = load_be32(p + offsetof(metaroce_deth, imm));
    return d;
}

ReadReq load_rreq(const std::uint8_t* p) {
    ReadReq r;
    r.va = load_be64(p + offsetof(metaroce_rreq, va));
    r.rkey = load_be32(p + offsetof(metaroce_rreq, rkey));
    r.len = load_be32(p + offsetof(metaroce_rreq, len));
    r.offset = load_be32(p + offsetof(metaroce_rreq, offset));
    r.msn = load_be32(p + offsetof(metaroce_rreq, msn));
    return r;
}

AtomicReq load_areq(const std::uint8_t* p) {
    AtomicReq a;
    a.va = load_be64(p + offsetof(metaroce_areq, va));
    a.rkey = load_be32(p + offsetof(metaroce_areq, rkey));
    a.msn = load_be32(p + offsetof(metaroce_areq, msn));
    a.swap_add = load_be64(p + offsetof(metaroce_areq, swap_add));
    a.compare = load_be64(p + offsetof(metaroce_areq, compare));
    return a;
}

// The syndrome is returned raw so that an unknown value can be reported before converting.
Ack load_ack(const std::uint8_t* p, std::uint8_t& raw_syndrome) {
    Ack a;
    a.cum_psn = load_be32(p + offsetof(metaroce_ack, cum_psn));
    a.nak_psn = load_be32(p + offsetof(metaroce_ack, nak_psn));
    raw_syndrome = p[offsetof(metaroce_ack, syndrome)];
    a.nak_arg = p[offsetof(metaroce_ack, nak_arg)];
    a.ce_count = load_be16(p + offsetof(metaroce_ack, ce_count));
    a.fair_share = load_be16(p + offsetof(metaroce_ack, fair_share));
    a.echo_path = load_be16(p + offsetof(metaroce_ack, echo_path));
    a.ts_echo = load_be32(p + offsetof(metaroce_ack, ts_echo));
    a.msn = load_be32(p + offsetof(metaroce_ack, msn));
    for (std::size_t i = 0; i < a.sack.size(); ++i) {
        a.sack[i] = load_be32(p + offsetof(metaroce_ack, sack) + 4 * i);
    }
    return a;
}

// Length rules of a data packet whose offset in its message is known (SEND, READ_RESP, a
// first WRITE packet): every packet but the last carries exactly one MTU, the last the rest,
// a zero-length message is one empty packet, and FIRST/LAST mark offset 0 and the end. A
// READ_RESP's "message" is the READ_REQ part it answers (its msg_len is the part's end), and
// FIRST marks the first response of the part, which need not be at offset 0
// (`first_at_zero` false): only LAST can be checked there.
std::optional<ParseError> check_known_offset(std::uint64_t offset, std::uint32_t payload,
                                             std::uint32_t msg_len, std::uint8_t flags,
                                             std::uint32_t mtu, bool first_at_zero = true) {
    // Written so that no sum can overflow, whatever the offset.
    if (offset % mtu != 0 || offset > msg_len || payload > msg_len - offset) {
        return ParseError::InconsistentLength;
    }
    const bool ends_message = offset + payload == msg_len;
    if (!ends_message && payload != mtu) return ParseError::InconsistentLength;
    if (ends_message && payload == 0 && msg_len != 0) return ParseError::InconsistentLength;
    const bool first = (flags & flag::kFirst) != 0;
    const bool last = (flags & flag::kLast) != 0;
    if (last != ends_message) return ParseError::InconsistentFlags;
    if (first_at_zero ? first != (offset == 0) : (offset == 0 && !first)) {
        return ParseError::InconsistentFlags;
    }
    return std::nullopt;
}

// A WRITE packet carries its remote address, not its offset, so only what follows from the
// FIRST/LAST flags can be checked: the first packet is at offset 0 and the last one ends the
// message after whole-MTU packets.
std::optional<ParseError> check_write_lengths(std::uint32_t payload, std::uint32_t msg_len,
                                              std::uint8_t flags, std::uint32_t mtu) {
    const bool first = (flags & flag::kFirst) != 0;
    const bool last = (flags & flag::kLast) != 0;
    if (first) return check_known_offset(0, payload, msg_len, flags, mtu);
    if (payload > msg_len) return ParseError::InconsistentLength;
    if (last) {
        // Offset msg_len - payload must be a positive multiple of the MTU.
        const std::uint32_t offset = msg_len - payload;
        if (payload == 0 || offset == 0 || offset % mtu != 0) return ParseError::InconsistentLength;
        return std::nullopt;
    }
    // A middle packet: MTU-sized, after the first and before the last packet.
    if (payload != mtu || std::uint64_t{msg_len} <= 2 * std::uint64_t{mtu}) {
        return ParseError::InconsistentLength;
    }
    return std::nullopt;
}

std::optional<ParseError> check_deth(const Bth& bth, const Deth& d, std::uint32_t payload,
                                     std::uint32_t mtu) {
    // INV marks the last packet of a SEND with invalidate, whose immediate field holds the key
    // to invalidate: never before the last packet, never with IMM (the two share the field).
    // INV on any other opcode was refused with the flags.
    if (bth.has(flag::kInv) && (!bth.has(flag::kLast) || bth.has(flag::kImm))) {
        return ParseError::InconsistentFlags;
    }
    // The immediate field only has a meaning with IMM (or INV); otherwise it is sent, and
    // checked, as 0.
    if (!bth.has(flag::kImm) && !bth.has(flag::kInv) && d.imm != 0) {
        return ParseError::FieldMustBeZero;
    }
    switch (bth.opcode) {
        case Opcode::Send:
            if (d.key != 0) return ParseError::FieldMustBeZero;
            return check_known_offset(d.addr, payload, d.msg_len, bth.flags, mtu);
        case Opcode::ReadResponse:
            if (d.key != 0) return ParseError::FieldMustBeZero;
            return check_known_offset(d.addr, payload, d.msg_len, bth.flags, mtu,
                                      /*first_at_zero=*/false);
        case Opcode::Write:
            return check_write_lengths(payload, d.msg_len, bth.flags, mtu);
        case Opcode::UdSend:
            if (d.addr != 0 || d.msn != 0) return ParseError::FieldMustBeZero;
            if (!bth.has(flag::kFirst) || !bth.has(flag::kLast)) {
                return ParseError::InconsistentFlags;
            }
            if (d.msg_len != payload) return ParseError::InconsistentLength;
            return std::nullopt;
        case Opcode::AtomicResponse:
            // Its row of section 3.1: address 0, key 0, the atomic's MSN, length 8, imm 0
            // (checked above); FIRST and LAST always; exactly the 8 bytes of the value.
            if (d.addr != 0 || d.key != 0) return ParseError::FieldMustBeZero;
            if (!bth.has(flag::kFirst) || !bth.has(flag::kLast)) {
                return ParseError::InconsistentFlags;
            }
            if (d.msg_len != METAROCE_ATOMIC_LEN || payload != METAROCE_ATOMIC_LEN) {
                return ParseError::InconsistentLength;
            }
            return std::nullopt;
        default:
            return std::nullopt;
    }
}

// The largest message, as in IB: a READ ends within it (section 12).
constexpr std::uint64_t kMaxMessageSize = std::uint64_t{1} << 31;

std::optional<ParseError> check_rreq(const ReadReq& r, std::uint32_t mtu) {
    if (r.offset % mtu != 0) return ParseError::InconsistentLength;
    if (std::uint64_t{r.offset} + r.len > kMaxMessageSize) {
        return ParseError::InconsistentLength;
    }
    if (r.va > std::numeric_limits<std::uint64_t>::max() - r.len) {
        return ParseError::InconsistentLength;
    }
    return std::nullopt;
}

// A FETCH_ADD has no compare value: it is sent, and checked, as 0 (section 12). The address's
// alignment is not the codec's: the responder refuses it with an INVALID_REQUEST NAK (section 6).
std::optional<ParseError> check_areq(const Bth& bth, const AtomicReq& a) {
    if (bth.opcode == Opcode::AtomicFetchAdd && a.compare != 0) return ParseError::FieldMustBeZero;
    return std::nullopt;
}

std::optional<ParseError> check_ack(const Bth& bth, const Ack& a) {
    if ((a.cum_psn & k24BitReservedMask) != 0 || (a.nak_psn & k24BitReservedMask) != 0) {
        return ParseError::ReservedBitsSet;
    }
    if (a.cum_psn != bth.psn) return ParseError::InconsistentHeader;
    switch (a.syndrome) {
        case Syndrome::Ack:
            if (a.nak_psn != 0 || a.nak_arg != 0) return ParseError::FieldMustBeZero;
            return std::nullopt;
        case Syndrome::RnrNak:
            if (a.nak_arg > kMaxRnrTimerCode) return ParseError::InconsistentHeader;
            return std::nullopt;
        case Syndrome::Version:
            return std::nullopt;
        default:
            if (a.nak_arg != 0) return ParseError::FieldMustBeZero;
            return std::nullopt;
    }
}

}  // namespace

bool is_valid_mtu(std::uint32_t mtu) {
    return mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096;
}

bool is_valid_segment(std::uint32_t bytes) {
    return bytes >= 256 && bytes <= 4096 && bytes % 8 == 0;
}

Result<Packet, ParseError> decode(std::span<const std::uint8_t> bytes,
                                  const DecodeOptions& options) {
    const std::uint32_t mtu = is_valid_segment(options.mtu) ? options.mtu : 4096;
    if (bytes.size() < kBthLen) return Unexpected(ParseError::Truncated);
    const std::uint8_t* p = bytes.data();

    Packet pkt;
    Bth& bth = pkt.bth;
    const std::uint8_t version_byte = p[offsetof(metaroce_bth, version)];
    bth.version = version_byte >> kVersionShift;
    if (bth.version != METAROCE_VERSION) return Unexpected(ParseError::BadVersion);
    if ((version_byte & kVersionReservedMask) != 0) return Unexpected(ParseError::ReservedBitsSet);

    const std::uint8_t raw_opcode = p[offsetof(metaroce_bth, opcode)];
    bth.flags = p[offsetof(metaroce_bth, flags)];
    bth.stream = p[offsetof(metaroce_bth, stream)];
    bth.dqpn = load_be32(p + offsetof(metaroce_bth, dqpn));
    bth.sqpn = load_be32(p + offsetof(metaroce_bth, sqpn));
    bth.psn = load_be32(p + offsetof(metaroce_bth, psn));
    bth.path = load_be16(p + offsetof(metaroce_bth, path));
    const std::uint16_t bth_reserved = load_be16(p + offsetof(metaroce_bth, reserved));
    bth.ts = load_be32(p + offsetof(metaroce_bth, ts));
    if (((bth.dqpn | bth.sqpn | bth.psn) & k24BitReservedMask) != 0 || bth_reserved != 0) {
        return Unexpected(ParseError::ReservedBitsSet);
    }
    if (bth.stream != 0) return Unexpected(ParseError::StreamNotZero);

    const int ext_len = metaroce_ext_len(raw_opcode);
    if (ext_len < 0) return Unexpected(ParseError::UnknownOpcode);
    bth.opcode = static_cast<Opcode>(raw_opcode);
    if (bytes.size() < kBthLen + static_cast<std::size_t>(ext_len)) {
        return Unexpected(ParseError::Truncated);
    }
    if ((bth.flags & ~flag::kAll) != 0) return Unexpected(ParseError::ReservedBitsSet);
    if ((bth.flags & ~allowed_flags(bth.opcode)) != 0) {
        return Unexpected(ParseError::FlagNotAllowed);
    }

    const std::uint8_t* ext = p + kBthLen;
    const std::span<const std::uint8_t> payload = bytes.subspan(kBthLen + ext_len);
    const bool has_payload_field = metaroce_op_has_payload(raw_opcode) != 0;
    if (!has_payload_field && !payload.empty()) return Unexpected(ParseError::PayloadNotAllowed);
    if (payload.size() > mtu) return Unexpected(ParseError::PayloadTooLong);
    const auto payload_len = static_cast<std::uint32_t>(payload.size());

    std::optional<ParseError> error;
    switch (bth.opcode) {
        case Opcode::ReadRequest: {
            pkt.ext = load_rreq(ext);
            error = check_rreq(pkt.rreq(), mtu);
            break;
        }
        case Opcode::AtomicCmpSwp:
        case Opcode::AtomicFetchAdd: {
            pkt.ext = load_areq(ext);
            error = check_areq(bth, pkt.areq());
            break;
        }
        case Opcode::Ack: {
            std::uint8_t raw_syndrome = 0;
            Ack ack = load_ack(ext, raw_syndrome);
            if (!is_known_syndrome(raw_syndrome)) return Unexpected(ParseError::UnknownSyndrome);
            ack.syndrome = static_cast<Syndrome>(raw_syndrome);
            pkt.ext = ack;
            error = check_ack(bth, pkt.ack());
            break;
        }
        default: {
            pkt.ext = load_deth(ext);
            error = check_deth(bth, pkt.deth(), payload_len, mtu);
            break;
        }
    }
    if (error) return Unexpected(*error);

    pkt.payload.assign(payload.begin(), payload.end());
    return pkt;
}

std::size_t encoded_size(const Packet& packet) {
    std::size_t ext_len = METAROCE_DETH_LEN;
    if (std::holds_alternative<ReadReq>(packet.ext)) ext_len = METAROCE_RREQ_LEN;
    if (std::holds_alternative<Ack>(packet.ext)) ext_len = METAROCE_ACK_LEN;
    if (std::holds_alternative<AtomicReq>(packet.ext)) ext_len = METAROCE_AREQ_LEN;
    return kBthLen + ext_len + packet.payload.size();
}

std::vector<std::uint8_t> encode(const Packet& packet) {
    std::vector<std::uint8_t> out(encoded_size(packet), 0);
    std::uint8_t* p = out.data();
    const Bth& bth = packet.bth;
    p[offsetof(metaroce_bth, version)] = static_cast<std::uint8_t>(bth.version << kVersionShift);
    p[offsetof(metaroce_bth, opcode)] = static_cast<std::uint8_t>(bth.opcode);
    p[offsetof(metaroce_bth, flags)] = bth.flags;
    p[offsetof(metaroce_bth, stream)] = bth.stream;
    store_be32(p + offsetof(metaroce_bth, dqpn), bth.dqpn);
    store_be32(p + offsetof(metaroce_bth, sqpn), bth.sqpn);
    store_be32(p + offsetof(metaroce_bth, psn), bth.psn);
    store_be16(p + offsetof(metaroce_bth, path), bth.path);
    store_be32(p + offsetof(metaroce_bth, ts), bth.ts);

    std::uint8_t* ext = p + kBthLen;
    std::size_t ext_len = 0;
    if (const auto* d = std::get_if<Deth>(&packet.ext)) {
        store_be64(ext + offsetof(metaroce_deth, addr), d->addr);
        store_be32(ext + offsetof(metaroce_deth, key), d->key);
        store_be32(ext + offsetof(metaroce_deth, msn), d->msn);
        store_be32(ext + offsetof(metaroce_deth, msg_len), d->msg_len);
        store_be32(ext + offsetof(metaroce_deth, imm), d->imm);
        ext_len = METAROCE_DETH_LEN;
    } else if (const auto* r = std::get_if<ReadReq>(&packet.ext)) {
        store_be64(ext + offsetof(metaroce_rreq, va), r->va);
        store_be32(ext + offsetof(metaroce_rreq, rkey), r->rkey);
        store_be32(ext + offsetof(metaroce_rreq, len), r->len);
        store_be32(ext + offsetof(metaroce_rreq, offset), r->offset);
        store_be32(ext + offsetof(metaroce_rreq, msn), r->msn);
        ext_len = METAROCE_RREQ_LEN;
    } else if (const auto* at = std::get_if<AtomicReq>(&packet.ext)) {
        store_be64(ext + offsetof(metaroce_areq, va), at->va);
        store_be32(ext + offsetof(metaroce_areq, rkey), at->rkey);
        store_be32(ext + offsetof(metaroce_areq, msn), at->msn);
        store_be64(ext + offsetof(metaroce_areq, swap_add), at->swap_add);
        store_be64(ext + offsetof(metaroce_areq, compare), at->compare);
        ext_len = METAROCE_AREQ_LEN;
    } else {
        const Ack& a = std::get<Ack>(packet.ext);
        store_be32(ext + offsetof(metaroce_ack, cum_psn), a.cum_psn);
        store_be32(ext + offsetof(metaroce_ack, nak_psn), a.nak_psn);
        ext[offsetof(metaroce_ack, syndrome)] = static_cast<std::uint8_t>(a.syndrome);
        ext[offsetof(metaroce_ack, nak_arg)] = a.nak_arg;
        store_be16(ext + offsetof(metaroce_ack, ce_count), a.ce_count);
        store_be16(ext + offsetof(metaroce_ack, fair_share), a.fair_share);
        store_be16(ext + offsetof(metaroce_ack, echo_path), a.echo_path);
        store_be32(ext + offsetof(metaroce_ack, ts_echo), a.ts_echo);
        store_be32(ext + offsetof(metaroce_ack, msn), a.msn);
        for (std::size_t i = 0; i < a.sack.size(); ++i) {
            store_be32(ext + offsetof(metaroce_ack, sack) + 4 * i, a.sack[i]);
        }
        ext_len = METAROCE_ACK_LEN;
    }
    std::copy(packet.payload.begin(), packet.payload.end(), ext + ext_len);
    return out;
}

std::optional<BthProbe> probe_bth(std::span<const std::uint8_t> bytes) {
    if (bytes.size() < kBthLen) return std::nullopt;
    const std::uint8_t* p = bytes.data();
    BthProbe probe;
    probe.version = p[offsetof(metaroce_bth, version)] >> kVersionShift;
    probe.opcode = p[offsetof(metaroce_bth, opcode)];
    probe.dqpn = load_be32(p + offsetof(metaroce_bth, dqpn)) & METAROCE_QPN_MASK;
    probe.sqpn = load_be32(p + offsetof(metaroce_bth, sqpn)) & METAROCE_QPN_MASK;
    probe.psn = load_be32(p + offsetof(metaroce_bth, psn)) & METAROCE_PSN_MASK;
    probe.path = load_be16(p + offsetof(metaroce_bth, path));
    probe.ts = load_be32(p + offsetof(metaroce_bth, ts));
    return probe;
}

std::string_view to_string(ParseError error) {
    switch (error) {
        case ParseError::Truncated:
            return "Truncated";
        case ParseError::BadVersion:
            return "BadVersion";
        case ParseError::ReservedBitsSet:
            return "ReservedBitsSet";
        case ParseError::UnknownOpcode:
            return "UnknownOpcode";
        case ParseError::FlagNotAllowed:
            return "FlagNotAllowed";
        case ParseError::UnknownSyndrome:
            return "UnknownSyndrome";
        case ParseError::FieldMustBeZero:
            return "FieldMustBeZero";
        case ParseError::InconsistentHeader:
            return "InconsistentHeader";
        case ParseError::InconsistentFlags:
            return "InconsistentFlags";
        case ParseError::PayloadNotAllowed:
            return "PayloadNotAllowed";
        case ParseError::PayloadTooLong:
            return "PayloadTooLong";
        case ParseError::InconsistentLength:
            return "InconsistentLength";
        case ParseError::StreamNotZero:
            return "StreamNotZero";
    }
    return "ParseError(?)";
}

std::ostream& operator<<(std::ostream& os, ParseError error) { return os << to_string(error); }

}  // namespace metaroce
