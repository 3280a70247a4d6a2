#include "softmetaroce/v2/wire.h"

#include <algorithm>
#include <limits>

#include "byte_order.h"

namespace softmetaroce::v2 {

namespace {

using metaroce::detail::load_be16;
using metaroce::detail::load_be32;
using metaroce::detail::load_be64;
using metaroce::detail::store_be16;
using metaroce::detail::store_be32;
using metaroce::detail::store_be64;

constexpr uint32_t kRethLen = 16, kImmLen = 4, kAtomicLen = 32, kDethLen = 8, kNakLen = 8,
                   kAckLen = 48;
constexpr uint16_t kMaxFloorDelta = 254;  // section 5.1
constexpr uint32_t kAtomicMsgLen = 8;

enum Ext : uint8_t { kNone, kReth, kAtomic, kDeth, kNak, kAck };

// One row of section 7's per-opcode table.
struct OpRow {
    bool known = false;
    Ext ext = kNone;      // at most one of RETH, ATOMIC, DETH, NAK, ACK ...
    bool imm = false;     // ... then IMM
    bool seg = false;     // SEG: sequenced on a path, a segment of a stream
    bool data = false;    // carries payload
    bool remote = false;  // a request: its length is the remote message's, not this packet's
};

constexpr OpRow row(uint8_t opcode) {
    switch (opcode) {
        case 0x01:  // SEND
        case 0x07:  // READ_RESP
        case 0x0a:  // ATOMIC_RESP
            return {true, kNone, false, true, true, false};
        case 0x02:  // SEND_IMM
        case 0x03:  // SEND_INV
            return {true, kNone, true, true, true, false};
        case 0x04:  // WRITE
            return {true, kReth, false, true, true, false};
        case 0x05:  // WRITE_IMM
            return {true, kReth, true, true, true, false};
        case 0x06:  // READ_REQ
            return {true, kReth, false, true, false, true};
        case 0x08:  // CMP_SWP
        case 0x09:  // FETCH_ADD
            return {true, kAtomic, false, true, false, true};
        case 0x0b:  // NAK
            return {true, kNak, false, true, false, false};
        case kOpUdSend:
            return {true, kDeth, false, false, true, false};
        case kOpUdSendImm:
            return {true, kDeth, true, false, true, false};
        case kOpAck:
            return {true, kAck, false, false, false, false};
        default:
            return {};
    }
}

constexpr uint32_t ext_len(Ext e) {
    switch (e) {
        case kReth:
            return kRethLen;
        case kAtomic:
            return kAtomicLen;
        case kDeth:
            return kDethLen;
        case kNak:
            return kNakLen;
        case kAck:
            return kAckLen;
        case kNone:
            break;
    }
    return 0;
}

constexpr uint32_t length_of(const OpRow& r) {
    return kTransportHeaderLen + ext_len(r.ext) + (r.imm ? kImmLen : 0);
}

// [va, va + len) passes 2^64. A range that ends exactly at 2^64 does not wrap.
constexpr bool wraps(uint64_t va, uint64_t len) {
    return len != 0 && va > std::numeric_limits<uint64_t>::max() - (len - 1);
}

uint8_t map_byte(const std::array<uint64_t, 4>& bits, uint32_t j) {
    return static_cast<uint8_t>(bits[j / 8] >> (8 * (j % 8)));
}

void decode_ext(const OpRow& r, const uint8_t* e, WirePacket& p) {
    switch (r.ext) {
        case kReth:
            p.va = load_be64(e);
            p.rkey = load_be32(e + 8);
            break;
        case kAtomic:
            p.va = load_be64(e);
            p.rkey = load_be32(e + 8);
            p.swap_add = load_be64(e + 16);
            p.compare = load_be64(e + 24);
            break;
        case kDeth:
            p.qkey = load_be32(e);
            p.src_qpn = load_be32(e + 4);
            break;
        case kNak:
            p.syndrome = e[0];
            p.rnr_timer = e[1];
            p.nak_ssn = load_be32(e + 4);
            break;
        case kAck:
            p.ack_cum = load_be32(e);
            // The map is bitwise, not a big-endian number: bit i is bit i % 8 of byte i / 8.
            for (uint32_t j = 0; j < 32; ++j) {
                p.ack_bits[j / 8] |= uint64_t{e[4 + j]} << (8 * (j % 8));
            }
            p.ack_delay_us = load_be16(e + 36);
            p.ack_ce = load_be16(e + 38);
            p.share = load_be16(e + 40);
            p.capacity_mbps = load_be32(e + 44);
            break;
        case kNone:
            break;
    }
    if (r.imm) p.imm = load_be32(e + ext_len(r.ext));
}

// The extension's reserved fields and the NAK syndrome, in byte order.
WireError check_ext(const OpRow& r, const uint8_t* e, const WirePacket& p) {
    switch (r.ext) {
        case kReth:
        case kAtomic:
            if (load_be32(e + 12) != 0) return WireError::Reserved;
            break;
        case kNak:
            if (p.syndrome < kSyndromeRnr || p.syndrome > kSyndromeRemoteOperation) {
                return WireError::Syndrome;
            }
            if (load_be16(e + 2) != 0) return WireError::Reserved;
            break;
        case kAck:
            if (load_be16(e + 42) != 0) return WireError::Reserved;
            break;
        case kDeth:
        case kNone:
            break;
    }
    return WireError::Ok;
}

// Section 7's bounds rules; every one gives the same reason, so their order is free.
bool in_bounds(const OpRow& r, const WirePacket& p, uint64_t payload) {
    if (r.data) {
        if (p.offset + payload > p.msg_len) return false;  // offset + payload passes length
        if (payload == 0 && p.msg_len != 0) return false;  // no bytes of a message with some
        if (!r.seg && p.msg_len != payload) return false;  // a datagram is its payload
    } else {
        if (p.offset != 0) return false;                // an offset on no bytes
        if (!r.remote && p.msg_len != 0) return false;  // a NAK: a message of no bytes
    }
    // An atomic request and its response are 8 bytes long.
    if ((r.ext == kAtomic || p.opcode == 0x0a) && p.msg_len != kAtomicMsgLen) return false;
    if (r.ext == kReth && wraps(p.va, p.msg_len)) return false;
    if (r.ext == kAtomic && wraps(p.va, kAtomicMsgLen)) return false;
    return true;
}

}  // namespace

uint32_t header_length(uint8_t opcode) {
    const OpRow r = row(opcode);
    return r.known ? length_of(r) : 0;
}

WireError parse(std::span<const uint8_t> bytes, WirePacket& out) {
    out = WirePacket{};
    if (bytes.size() < kTransportHeaderLen) return WireError::Short;
    const uint8_t* b = bytes.data();
    out.flags = b[0] & 0x0f;
    out.opcode = b[1];
    out.path = b[2];
    out.conn = load_be32(b + 4);
    out.seq = load_be32(b + 8);
    out.floor_delta = load_be16(b + 12);
    out.stream = load_be16(b + 14);
    out.ssn = load_be32(b + 16);
    out.msn = load_be32(b + 20);
    out.offset = load_be32(b + 24);
    out.msg_len = load_be32(b + 28);

    if ((b[0] >> 4) != kWireVersion) return WireError::Version;
    const OpRow r = row(out.opcode);
    if (!r.known) return WireError::Opcode;
    const uint32_t hlen = length_of(r);
    if (bytes.size() < hlen) return WireError::Short;
    decode_ext(r, b + kTransportHeaderLen, out);
    const uint64_t payload = bytes.size() - hlen;
    out.payload_offset = hlen;
    out.payload_len =
        static_cast<uint32_t>(std::min<uint64_t>(payload, std::numeric_limits<uint32_t>::max()));

    // The transport header's fields, in byte order. ACKs and datagrams are not sequenced, so
    // they use no sequence, floor, stream, SSN or MSN; an ACK has no flags, offset or length.
    const bool ack = r.ext == kAck;
    const bool unsequenced = !r.seg;
    if (ack && out.flags != 0) return WireError::Reserved;
    // ACK_REQ, RETX and EARLY are about sequences: a datagram has none (settled by the
    // differential test, protocol-v2.md section 7).
    if (unsequenced && (out.flags & (kFlagAckReq | kFlagRetx | kFlagEarly))) {
        return WireError::Reserved;
    }
    if (out.path >= kMaxPaths) return WireError::Path;
    if (b[3] != 0) return WireError::Reserved;
    if (unsequenced && out.seq != 0) return WireError::Reserved;
    if (unsequenced && out.floor_delta != 0) return WireError::Reserved;
    if (out.floor_delta > kMaxFloorDelta) return WireError::Floor;
    if (unsequenced && (out.stream != 0 || out.ssn != 0 || out.msn != 0)) {
        return WireError::Reserved;
    }
    if (ack && (out.offset != 0 || out.msg_len != 0)) return WireError::Reserved;

    if (const WireError e = check_ext(r, b + kTransportHeaderLen, out); e != WireError::Ok) {
        return e;
    }
    if (!r.data && payload != 0) return WireError::Payload;
    if (!in_bounds(r, out, payload)) return WireError::Bounds;
    return WireError::Ok;
}

std::optional<std::vector<uint8_t>> build_headers(const WirePacket& p) {
    const OpRow r = row(p.opcode);
    if (!r.known) return std::nullopt;
    std::vector<uint8_t> v(length_of(r), 0);
    uint8_t* b = v.data();
    b[0] = static_cast<uint8_t>((kWireVersion << 4) | (p.flags & 0x0f));
    b[1] = p.opcode;
    b[2] = p.path;
    store_be32(b + 4, p.conn);
    store_be32(b + 8, p.seq);
    store_be16(b + 12, p.floor_delta);
    store_be16(b + 14, p.stream);
    store_be32(b + 16, p.ssn);
    store_be32(b + 20, p.msn);
    store_be32(b + 24, p.offset);
    store_be32(b + 28, p.msg_len);

    uint8_t* e = b + kTransportHeaderLen;
    const auto sat16 = [](uint32_t x) { return static_cast<uint16_t>(std::min(x, 0xffffu)); };
    switch (r.ext) {
        case kReth:
            store_be64(e, p.va);
            store_be32(e + 8, p.rkey);
            break;
        case kAtomic:
            store_be64(e, p.va);
            store_be32(e + 8, p.rkey);
            store_be64(e + 16, p.swap_add);
            store_be64(e + 24, p.compare);
            break;
        case kDeth:
            store_be32(e, p.qkey);
            store_be32(e + 4, p.src_qpn);
            break;
        case kNak:
            e[0] = p.syndrome;
            e[1] = p.rnr_timer;
            store_be32(e + 4, p.nak_ssn);
            break;
        case kAck:
            store_be32(e, p.ack_cum);
            for (uint32_t j = 0; j < 32; ++j) e[4 + j] = map_byte(p.ack_bits, j);
            store_be16(e + 36, sat16(p.ack_delay_us));
            store_be16(e + 38, sat16(p.ack_ce));
            store_be16(e + 40, p.share);
            store_be32(e + 44, p.capacity_mbps);
            break;
        case kNone:
            break;
    }
    if (r.imm) store_be32(e + ext_len(r.ext), p.imm);
    return v;
}

}  // namespace softmetaroce::v2
