// Codec round trips and one test per validation rule (ParseError), plus robustness on
// arbitrary and mutated byte strings.
#include "softmetaroce/codec.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "sample_packets.h"
#include "softmetaroce/sim/rng.h"

namespace metaroce {
namespace {

constexpr std::uint32_t kMtu = 256;

std::optional<ParseError> error_of(const std::vector<std::uint8_t>& bytes,
                                   std::uint32_t mtu = kMtu) {
    const auto r = decode(bytes, {mtu});
    if (r) return std::nullopt;
    return r.error();
}

std::optional<ParseError> error_of(const Packet& p, std::uint32_t mtu = kMtu) {
    return error_of(encode(p), mtu);
}

Packet base(Opcode op, std::uint8_t flags) {
    Packet p;
    p.bth.opcode = op;
    p.bth.flags = flags;
    p.bth.dqpn = 0x11;
    p.bth.sqpn = 0x22;
    p.bth.psn = 0x33;
    return p;
}

Packet single_send(std::uint32_t len = 10) {
    Packet p = base(Opcode::Send, flag::kFirst | flag::kLast);
    p.ext = Deth{0, 0, 1, len, 0};
    p.payload.assign(len, 0xab);
    return p;
}

Packet read_request() {
    Packet p = base(Opcode::ReadRequest, flag::kAckReq);
    p.ext = ReadReq{0x1000, 7, 1000, 0, 2};
    return p;
}

Packet plain_ack() {
    Packet p = base(Opcode::Ack, 0);
    Ack a;
    a.cum_psn = p.bth.psn;
    p.ext = a;
    return p;
}

TEST(Codec, SamplePacketsRoundTrip) {
    for (const Packet& p : fuzz::sample_packets()) {
        const std::vector<std::uint8_t> bytes = encode(p);
        EXPECT_EQ(bytes.size(), encoded_size(p));
        const auto decoded = decode(bytes, {kMtu});
        ASSERT_TRUE(decoded.ok()) << to_string(p.bth.opcode) << ": " << decoded.error();
        EXPECT_EQ(*decoded, p);
        EXPECT_EQ(encode(*decoded), bytes);
    }
}

TEST(Codec, PayloadOfExactlyMtuIsAllowed) {
    for (const std::uint32_t mtu : {256u, 512u, 1024u, 2048u, 4096u}) {
        Packet p = single_send(mtu);
        EXPECT_EQ(error_of(p, mtu), std::nullopt) << mtu;
        p = single_send(mtu + 1);
        EXPECT_EQ(error_of(p, mtu), ParseError::PayloadTooLong) << mtu;
    }
}

TEST(Codec, SegmentSizesOfPathMtus) {
    EXPECT_EQ(segment_size(256), 256u);
    EXPECT_EQ(segment_size(512), 512u);
    EXPECT_EQ(segment_size(1024), 1400u);  // the 1500-byte Ethernet class uses the whole frame
    EXPECT_EQ(segment_size(2048), 2048u);
    EXPECT_EQ(segment_size(4096), 4096u);
    for (const std::uint32_t mtu : {256u, 512u, 1024u, 2048u, 4096u})
        EXPECT_TRUE(is_valid_segment(segment_size(mtu))) << mtu;
    EXPECT_FALSE(is_valid_segment(0));
    EXPECT_FALSE(is_valid_segment(1401));
    EXPECT_FALSE(is_valid_segment(8192));
}

TEST(Codec, PacketsOfA1400ByteSegment) {
    const std::uint32_t seg = segment_size(1024);
    EXPECT_EQ(error_of(single_send(seg), seg), std::nullopt);
    EXPECT_EQ(error_of(single_send(seg + 1), seg), ParseError::PayloadTooLong);
    EXPECT_EQ(message_packets(3 * seg, seg), 3u);
    EXPECT_EQ(message_packets(3 * seg + 1, seg), 4u);
    EXPECT_EQ(read_response_packets(4096, seg), 3u);
}

TEST(Codec, Truncated) {
    const std::vector<std::uint8_t> send = encode(single_send(0));
    EXPECT_EQ(error_of(std::vector<std::uint8_t>{}), ParseError::Truncated);
    for (std::size_t n = 0; n < send.size(); ++n) {
        EXPECT_EQ(error_of(std::vector<std::uint8_t>(send.begin(), send.begin() + n)),
                  ParseError::Truncated)
            << n;
    }
    std::vector<std::uint8_t> ack = encode(plain_ack());
    ack.pop_back();
    EXPECT_EQ(error_of(ack), ParseError::Truncated);
}

TEST(Codec, BadVersion) {
    for (const std::uint8_t byte0 : {0x00, 0x20, 0x21, 0xf0}) {
        std::vector<std::uint8_t> bytes = encode(single_send());
        bytes[0] = byte0;
        EXPECT_EQ(error_of(bytes), ParseError::BadVersion) << int{byte0};
    }
    // Only the version needs to be readable to answer a newer version.
    std::vector<std::uint8_t> bytes = encode(single_send());
    bytes[0] = 0x20;
    const auto probe = probe_bth(bytes);
    ASSERT_TRUE(probe);
    EXPECT_EQ(probe->version, 2);
    EXPECT_EQ(probe->dqpn, 0x11u);
    EXPECT_EQ(probe->sqpn, 0x22u);
    EXPECT_EQ(probe->psn, 0x33u);
    EXPECT_FALSE(probe_bth(std::vector<std::uint8_t>(23, 0x10)));
}

TEST(Codec, ReservedBitsSet) {
    // Every reserved bit of the BTH, one at a time: byte 0 low nibble, the top bytes of the
    // 24-bit QPN/PSN fields, the reserved half-word.
    const std::size_t reserved_bytes[] = {4, 8, 12, 18, 19};
    for (const std::size_t at : reserved_bytes) {
        for (int bit = 0; bit < 8; ++bit) {
            std::vector<std::uint8_t> bytes = encode(single_send());
            bytes[at] ^= static_cast<std::uint8_t>(1 << bit);
            EXPECT_EQ(error_of(bytes), ParseError::ReservedBitsSet) << at << ":" << bit;
        }
    }
    for (int bit = 0; bit < 4; ++bit) {
        std::vector<std::uint8_t> bytes = encode(single_send());
        bytes[0] |= static_cast<std::uint8_t>(1 << bit);
        EXPECT_EQ(error_of(bytes), ParseError::ReservedBitsSet) << bit;
    }
    // 0x80 is the one undefined flag (0x40 is INV).
    Packet undefined_flag = single_send();
    undefined_flag.bth.flags |= 0x80;
    EXPECT_EQ(error_of(undefined_flag), ParseError::ReservedBitsSet);
    Packet ack = plain_ack();
    ack.ack().nak_psn = 0x01000000;
    EXPECT_EQ(error_of(ack), ParseError::ReservedBitsSet);
    ack = plain_ack();
    ack.ack().cum_psn |= 0x80000000u;
    EXPECT_EQ(error_of(ack), ParseError::ReservedBitsSet);
}

TEST(Codec, UnknownOpcode) {
    for (int op = 0; op < 256; ++op) {
        if (metaroce_ext_len(static_cast<std::uint8_t>(op)) >= 0) continue;
        std::vector<std::uint8_t> bytes = encode(single_send());
        bytes[1] = static_cast<std::uint8_t>(op);
        EXPECT_EQ(error_of(bytes), ParseError::UnknownOpcode) << op;
    }
}

TEST(Codec, FlagNotAllowed) {
    const auto with = [](Packet p, std::uint8_t extra) {
        p.bth.flags |= extra;
        return p;
    };
    EXPECT_EQ(error_of(with(read_request(), flag::kImm)), ParseError::FlagNotAllowed);
    EXPECT_EQ(error_of(with(read_request(), flag::kFirst)), ParseError::FlagNotAllowed);
    EXPECT_EQ(error_of(with(read_request(), flag::kSolicited)), ParseError::FlagNotAllowed);
    for (const std::uint8_t f : {flag::kFirst, flag::kLast, flag::kImm, flag::kSolicited,
                                 flag::kAckReq, flag::kRetx, flag::kInv}) {
        EXPECT_EQ(error_of(with(plain_ack(), f)), ParseError::FlagNotAllowed) << int{f};
    }
    Packet resp = base(Opcode::ReadResponse, flag::kFirst | flag::kLast | flag::kAckReq);
    resp.ext = Deth{0, 0, 1, 4, 0};
    resp.payload.assign(4, 1);
    EXPECT_EQ(error_of(resp), ParseError::FlagNotAllowed);
    resp.bth.flags = flag::kFirst | flag::kLast | flag::kImm;
    EXPECT_EQ(error_of(resp), ParseError::FlagNotAllowed);
    // WRITE may carry every defined flag but INV (SOLICITED means something only on a
    // message that consumes a receive WQE, but it is allowed).
    Packet write = base(Opcode::Write, flag::kFirst | flag::kLast | flag::kSolicited);
    write.ext = Deth{0x1000, 5, 0, 4, 0};
    write.payload.assign(4, 1);
    EXPECT_EQ(error_of(write), std::nullopt);
    write.bth.flags |= flag::kImm | flag::kAckReq | flag::kRetx;
    EXPECT_EQ(error_of(write), std::nullopt);
    Packet ud = base(Opcode::UdSend, flag::kFirst | flag::kLast | flag::kRetx);
    ud.ext = Deth{0, 0x1234, 0, 4, 0};
    ud.payload.assign(4, 1);
    EXPECT_EQ(error_of(ud), ParseError::FlagNotAllowed);
}

// INV (protocol.md sections 3 and 12): only on the last packet of a SEND, without IMM; the
// immediate field then holds the key to invalidate. Anything else is malformed.
TEST(Codec, SendWithInvalidateFlags) {
    using namespace flag;
    constexpr std::uint32_t kKey = 0x12345678;
    Packet send = single_send();
    send.bth.flags |= kInv | kAckReq;
    send.deth().imm = kKey;
    EXPECT_EQ(error_of(send), std::nullopt);
    const auto decoded = decode(encode(send), {kMtu});
    ASSERT_TRUE(decoded.ok());
    EXPECT_TRUE(decoded->bth.has(kInv));
    EXPECT_EQ(decoded->deth().imm, kKey);
    send.deth().imm = 0;  // any key, 0 too: whether it names a region is the responder's check
    EXPECT_EQ(error_of(send), std::nullopt);

    // The last packet of a 600-byte SEND at MTU 256, also retransmitted and solicited.
    const auto send_at = [](std::uint64_t offset, std::uint32_t len, std::uint8_t flags,
                            std::uint32_t imm) {
        Packet p = base(Opcode::Send, flags);
        p.ext = Deth{offset, 0, 1, 600, imm};
        p.payload.assign(len, 7);
        return p;
    };
    EXPECT_EQ(error_of(send_at(512, 88, kLast | kInv | kAckReq | kRetx | kSolicited, kKey)),
              std::nullopt);
    // INV before the last packet: the first, a middle one.
    EXPECT_EQ(error_of(send_at(0, 256, kFirst | kInv, kKey)), ParseError::InconsistentFlags);
    EXPECT_EQ(error_of(send_at(256, 256, kInv, kKey)), ParseError::InconsistentFlags);
    EXPECT_EQ(error_of(send_at(256, 256, kInv, 0)), ParseError::InconsistentFlags);
    // INV with IMM, on the last packet or a single one.
    EXPECT_EQ(error_of(send_at(512, 88, kLast | kInv | kImm, kKey)), ParseError::InconsistentFlags);
    Packet both = single_send();
    both.bth.flags |= kInv | kImm;
    both.deth().imm = kKey;
    EXPECT_EQ(error_of(both), ParseError::InconsistentFlags);
    // A SEND's immediate field without IMM or INV is still 0.
    EXPECT_EQ(error_of(send_at(512, 88, kLast, kKey)), ParseError::FieldMustBeZero);

    // INV on any other opcode.
    Packet write = base(Opcode::Write, kFirst | kLast | kInv);
    write.ext = Deth{0x1000, 5, 0, 4, kKey};
    write.payload.assign(4, 1);
    EXPECT_EQ(error_of(write), ParseError::FlagNotAllowed);
    write.deth().imm = 0;
    EXPECT_EQ(error_of(write), ParseError::FlagNotAllowed);
    Packet rreq = read_request();
    rreq.bth.flags |= kInv;
    EXPECT_EQ(error_of(rreq), ParseError::FlagNotAllowed);
    Packet resp = base(Opcode::ReadResponse, kFirst | kLast | kInv);
    resp.ext = Deth{0, 0, 1, 4, 0};
    resp.payload.assign(4, 1);
    EXPECT_EQ(error_of(resp), ParseError::FlagNotAllowed);
    Packet ud = base(Opcode::UdSend, kFirst | kLast | kInv);
    ud.ext = Deth{0, 0x1234, 0, 4, kKey};
    ud.payload.assign(4, 1);
    EXPECT_EQ(error_of(ud), ParseError::FlagNotAllowed);
}

TEST(Codec, StreamNotZero) {
    for (const int stream : {1, 7, 255}) {
        Packet p = single_send();
        p.bth.stream = static_cast<std::uint8_t>(stream);
        EXPECT_EQ(error_of(p), ParseError::StreamNotZero) << stream;
        Packet a = plain_ack();
        a.bth.stream = static_cast<std::uint8_t>(stream);
        EXPECT_EQ(error_of(a), ParseError::StreamNotZero) << stream;
    }
}

TEST(Codec, UnknownSyndrome) {
    for (int s = 6; s < 256; ++s) {
        std::vector<std::uint8_t> bytes = encode(plain_ack());
        bytes[24 + 8] = static_cast<std::uint8_t>(s);
        EXPECT_EQ(error_of(bytes), ParseError::UnknownSyndrome) << s;
    }
}

TEST(Codec, FieldMustBeZero) {
    Packet send = single_send();
    send.deth().key = 1;
    EXPECT_EQ(error_of(send), ParseError::FieldMustBeZero);
    send = single_send();
    send.deth().imm = 5;  // immediate without IMM
    EXPECT_EQ(error_of(send), ParseError::FieldMustBeZero);
    send.bth.flags |= flag::kImm;
    EXPECT_EQ(error_of(send), std::nullopt);

    Packet resp = base(Opcode::ReadResponse, flag::kFirst | flag::kLast);
    resp.ext = Deth{0, 9, 1, 4, 0};
    resp.payload.assign(4, 1);
    EXPECT_EQ(error_of(resp), ParseError::FieldMustBeZero);

    Packet ud = base(Opcode::UdSend, flag::kFirst | flag::kLast);
    ud.ext = Deth{8, 0x1234, 0, 4, 0};
    ud.payload.assign(4, 1);
    EXPECT_EQ(error_of(ud), ParseError::FieldMustBeZero);
    ud.deth().addr = 0;
    ud.deth().msn = 3;
    EXPECT_EQ(error_of(ud), ParseError::FieldMustBeZero);

    Packet ack = plain_ack();
    ack.ack().nak_psn = 4;
    EXPECT_EQ(error_of(ack), ParseError::FieldMustBeZero);
    ack = plain_ack();
    ack.ack().nak_arg = 1;
    EXPECT_EQ(error_of(ack), ParseError::FieldMustBeZero);
    for (const Syndrome s :
         {Syndrome::InvalidRequest, Syndrome::RemoteAccess, Syndrome::RemoteOperational}) {
        ack = plain_ack();
        ack.ack().syndrome = s;
        ack.ack().nak_psn = 0x33;
        EXPECT_EQ(error_of(ack), std::nullopt);
        ack.ack().nak_arg = 1;
        EXPECT_EQ(error_of(ack), ParseError::FieldMustBeZero);
    }
}

TEST(Codec, InconsistentHeader) {
    Packet ack = plain_ack();
    ack.ack().cum_psn = ack.bth.psn + 1;
    EXPECT_EQ(error_of(ack), ParseError::InconsistentHeader);
    ack = plain_ack();
    ack.ack().syndrome = Syndrome::RnrNak;
    ack.ack().nak_arg = 31;
    EXPECT_EQ(error_of(ack), std::nullopt);
    ack.ack().nak_arg = 32;
    EXPECT_EQ(error_of(ack), ParseError::InconsistentHeader);
    ack.ack().syndrome = Syndrome::Version;
    ack.ack().nak_arg = 200;  // the highest version the peer speaks: any value
    EXPECT_EQ(error_of(ack), std::nullopt);
}

TEST(Codec, InconsistentFlags) {
    // SEND of 600 bytes at MTU 256: packets at offsets 0, 256, 512.
    const auto send_at = [](std::uint64_t offset, std::uint32_t len, std::uint8_t flags) {
        Packet p = base(Opcode::Send, flags);
        p.ext = Deth{offset, 0, 1, 600, 0};
        p.payload.assign(len, 7);
        return p;
    };
    EXPECT_EQ(error_of(send_at(0, 256, flag::kFirst)), std::nullopt);
    EXPECT_EQ(error_of(send_at(0, 256, 0)), ParseError::InconsistentFlags);
    EXPECT_EQ(error_of(send_at(256, 256, flag::kFirst)), ParseError::InconsistentFlags);
    EXPECT_EQ(error_of(send_at(256, 256, flag::kLast)), ParseError::InconsistentFlags);
    EXPECT_EQ(error_of(send_at(512, 88, flag::kLast)), std::nullopt);
    EXPECT_EQ(error_of(send_at(512, 88, 0)), ParseError::InconsistentFlags);

    Packet ud = base(Opcode::UdSend, flag::kFirst);
    ud.ext = Deth{0, 1, 0, 4, 0};
    ud.payload.assign(4, 1);
    EXPECT_EQ(error_of(ud), ParseError::InconsistentFlags);

    // READ_RESP: FIRST and LAST delimit the READ_REQ part answered, whose end is msg_len; the
    // first response of a part after the first is not at offset 0. At offset 0 it is FIRST.
    const auto resp_at = [](std::uint64_t offset, std::uint32_t len, std::uint32_t msg_len,
                            std::uint8_t flags) {
        Packet p = base(Opcode::ReadResponse, flags);
        p.ext = Deth{offset, 0, 1, msg_len, 0};
        p.payload.assign(len, 7);
        return p;
    };
    EXPECT_EQ(error_of(resp_at(0, 256, 1024, flag::kFirst)), std::nullopt);
    EXPECT_EQ(error_of(resp_at(0, 256, 1024, 0)), ParseError::InconsistentFlags);
    EXPECT_EQ(error_of(resp_at(512, 256, 1024, flag::kFirst)), std::nullopt);
    EXPECT_EQ(error_of(resp_at(512, 256, 1024, flag::kFirst | flag::kRetx)), std::nullopt);
    EXPECT_EQ(error_of(resp_at(512, 256, 1024, 0)), std::nullopt);
    EXPECT_EQ(error_of(resp_at(768, 256, 1024, flag::kLast)), std::nullopt);
    EXPECT_EQ(error_of(resp_at(768, 256, 1024, 0)), ParseError::InconsistentFlags);
    EXPECT_EQ(error_of(resp_at(512, 256, 1024, flag::kLast)), ParseError::InconsistentFlags);
    EXPECT_EQ(error_of(resp_at(512, 100, 612, flag::kFirst | flag::kLast)), std::nullopt);

    // A first WRITE packet that holds the whole message must be the last one too.
    Packet write = base(Opcode::Write, flag::kFirst);
    write.ext = Deth{0x1000, 5, 0, 100, 0};
    write.payload.assign(100, 1);
    EXPECT_EQ(error_of(write), ParseError::InconsistentFlags);
}

TEST(Codec, PayloadNotAllowed) {
    Packet rreq = read_request();
    rreq.payload = {1};
    EXPECT_EQ(error_of(rreq), ParseError::PayloadNotAllowed);
    Packet ack = plain_ack();
    ack.payload = {1, 2, 3};
    EXPECT_EQ(error_of(ack), ParseError::PayloadNotAllowed);
}

TEST(Codec, PayloadTooLong) {
    Packet write = base(Opcode::Write, flag::kFirst | flag::kLast);
    write.ext = Deth{0x1000, 5, 0, 300, 0};
    write.payload.assign(300, 1);
    EXPECT_EQ(error_of(write, 256), ParseError::PayloadTooLong);
    EXPECT_EQ(error_of(write, 512), std::nullopt);
}

TEST(Codec, InconsistentLength) {
    const auto send = [](std::uint64_t offset, std::uint32_t len, std::uint32_t msg_len,
                         std::uint8_t flags) {
        Packet p = base(Opcode::Send, flags);
        p.ext = Deth{offset, 0, 1, msg_len, 0};
        p.payload.assign(len, 7);
        return p;
    };
    using flag::kFirst;
    using flag::kLast;
    EXPECT_EQ(error_of(send(0, 20, 10, kFirst | kLast)), ParseError::InconsistentLength);
    EXPECT_EQ(error_of(send(0, 100, 600, kFirst)), ParseError::InconsistentLength);  // short
    EXPECT_EQ(error_of(send(100, 256, 600, 0)), ParseError::InconsistentLength);     // unaligned
    EXPECT_EQ(error_of(send(512, 0, 512, kLast)), ParseError::InconsistentLength);   // empty tail
    EXPECT_EQ(error_of(send(0, 0, 5, kFirst | kLast)), ParseError::InconsistentLength);
    EXPECT_EQ(error_of(send(0xffffffffffffff00ull, 256, 600, 0)), ParseError::InconsistentLength);
    EXPECT_EQ(error_of(send(768, 0, 600, kLast)), ParseError::InconsistentLength);  // past the end

    const auto write = [](std::uint32_t len, std::uint32_t msg_len, std::uint8_t flags) {
        Packet p = base(Opcode::Write, flags);
        p.ext = Deth{0x5000, 5, 0, msg_len, 0};
        p.payload.assign(len, 7);
        return p;
    };
    EXPECT_EQ(error_of(write(256, 600, 0)), std::nullopt);                    // middle
    EXPECT_EQ(error_of(write(256, 512, 0)), ParseError::InconsistentLength);  // no room for it
    EXPECT_EQ(error_of(write(100, 600, 0)), ParseError::InconsistentLength);  // short middle
    EXPECT_EQ(error_of(write(88, 600, kLast)), std::nullopt);
    EXPECT_EQ(error_of(write(100, 600, kLast)), ParseError::InconsistentLength);  // unaligned
    EXPECT_EQ(error_of(write(0, 512, kLast)), ParseError::InconsistentLength);
    EXPECT_EQ(error_of(write(200, 100, kLast)), ParseError::InconsistentLength);
    EXPECT_EQ(error_of(write(100, 100, kLast)), ParseError::InconsistentLength);  // offset 0

    Packet rreq = read_request();
    rreq.rreq().offset = 100;
    EXPECT_EQ(error_of(rreq), ParseError::InconsistentLength);
    rreq = read_request();
    rreq.rreq().offset = 0xffffff00u;
    rreq.rreq().len = 0x1000;
    EXPECT_EQ(error_of(rreq), ParseError::InconsistentLength);
    rreq = read_request();
    rreq.rreq().len = 0x80000001u;  // past the largest message, 2^31
    EXPECT_EQ(error_of(rreq), ParseError::InconsistentLength);
    rreq = read_request();
    rreq.rreq().len = 0x80000000u;  // exactly the largest message
    EXPECT_EQ(error_of(rreq), std::nullopt);
    rreq = read_request();
    rreq.rreq().va = 0xfffffffffffff000ull;
    rreq.rreq().len = 0x2000;
    EXPECT_EQ(error_of(rreq), ParseError::InconsistentLength);

    Packet ud = base(Opcode::UdSend, kFirst | kLast);
    ud.ext = Deth{0, 1, 0, 5, 0};
    ud.payload.assign(4, 1);
    EXPECT_EQ(error_of(ud), ParseError::InconsistentLength);
}

Packet atomic_request(Opcode op = Opcode::AtomicCmpSwp) {
    Packet p = base(op, flag::kAckReq);
    p.ext = AtomicReq{0x1008, 7, 2, 5, op == Opcode::AtomicCmpSwp ? 3u : 0u};
    return p;
}

Packet atomic_response() {
    Packet p = base(Opcode::AtomicResponse, flag::kFirst | flag::kLast);
    p.ext = Deth{0, 0, 2, 8, 0};
    p.payload.assign(8, 0x5a);
    return p;
}

// Section 12 for atomics: the flags per opcode, FETCH_ADD's compare, the response's fixed
// DETH and its 8 bytes.
TEST(Codec, AtomicsRoundTrip) {
    for (const Packet& p : {atomic_request(Opcode::AtomicCmpSwp),
                            atomic_request(Opcode::AtomicFetchAdd), atomic_response()}) {
        const std::vector<std::uint8_t> bytes = encode(p);
        const auto d = decode(bytes, {kMtu});
        ASSERT_TRUE(d.ok()) << to_string(p.bth.opcode) << " " << d.error();
        EXPECT_EQ(*d, p);
        EXPECT_EQ(encoded_size(p), bytes.size());
    }
    EXPECT_EQ(encode(atomic_request()).size(), 24u + 32u);
    Packet retx = atomic_request(Opcode::AtomicFetchAdd);
    retx.bth.flags |= flag::kRetx;
    EXPECT_FALSE(error_of(retx));
    // A misaligned address is the responder's to refuse (INVALID_REQUEST), not malformed.
    Packet misaligned = atomic_request();
    misaligned.areq().va = 0x1004;
    EXPECT_FALSE(error_of(misaligned));
    // CMP_SWP may compare with anything.
    Packet any_compare = atomic_request();
    any_compare.areq().compare = ~0ull;
    EXPECT_FALSE(error_of(any_compare));
}

TEST(Codec, AtomicFlagsNotAllowed) {
    for (const Opcode op : {Opcode::AtomicCmpSwp, Opcode::AtomicFetchAdd}) {
        for (const std::uint8_t f :
             {flag::kFirst, flag::kLast, flag::kImm, flag::kSolicited, flag::kInv}) {
            Packet p = atomic_request(op);
            p.bth.flags |= f;
            EXPECT_EQ(error_of(p), ParseError::FlagNotAllowed) << to_string(op) << " " << int{f};
        }
    }
    for (const std::uint8_t f : {flag::kImm, flag::kSolicited, flag::kAckReq, flag::kInv}) {
        Packet p = atomic_response();
        p.bth.flags |= f;
        EXPECT_EQ(error_of(p), ParseError::FlagNotAllowed) << int{f};
    }
    Packet retx = atomic_response();
    retx.bth.flags |= flag::kRetx;
    EXPECT_FALSE(error_of(retx));
}

TEST(Codec, FetchAddWithCompareIsMalformed) {
    Packet p = atomic_request(Opcode::AtomicFetchAdd);
    p.areq().compare = 1;
    EXPECT_EQ(error_of(p), ParseError::FieldMustBeZero);
    p.areq().compare = 1ull << 63;
    EXPECT_EQ(error_of(p), ParseError::FieldMustBeZero);
}

TEST(Codec, AtomicRequestWithPayloadOrTruncated) {
    std::vector<std::uint8_t> bytes = encode(atomic_request());
    bytes.push_back(0);
    EXPECT_EQ(error_of(bytes), ParseError::PayloadNotAllowed);
    bytes.resize(24 + 31);
    EXPECT_EQ(error_of(bytes), ParseError::Truncated);
    // A READ_REQ's 24 bytes under an atomic opcode: too short for an AREQ.
    std::vector<std::uint8_t> rreq = encode(read_request());
    rreq[1] = METAROCE_OP_ATOMIC_CMP_SWP;
    EXPECT_EQ(error_of(rreq), ParseError::Truncated);
}

TEST(Codec, AtomicResponseMustCarryEightBytes) {
    for (const std::size_t n : {0u, 4u, 7u, 9u, 16u}) {
        Packet p = atomic_response();
        p.payload.assign(n, 1);
        EXPECT_EQ(error_of(p), ParseError::InconsistentLength) << n;
        p.deth().msg_len = static_cast<std::uint32_t>(n);
        EXPECT_EQ(error_of(p), ParseError::InconsistentLength) << n;
    }
}

TEST(Codec, AtomicResponseDethRow) {
    Packet p = atomic_response();
    p.deth().addr = 8;
    EXPECT_EQ(error_of(p), ParseError::FieldMustBeZero);
    p = atomic_response();
    p.deth().key = 1;
    EXPECT_EQ(error_of(p), ParseError::FieldMustBeZero);
    p = atomic_response();
    p.deth().imm = 1;
    EXPECT_EQ(error_of(p), ParseError::FieldMustBeZero);
    p = atomic_response();
    p.deth().msg_len = 16;
    EXPECT_EQ(error_of(p), ParseError::InconsistentLength);
    for (const std::uint8_t f : {flag::kFirst, flag::kLast, std::uint8_t{0}}) {
        p = atomic_response();
        p.bth.flags = f;
        EXPECT_EQ(error_of(p), ParseError::InconsistentFlags) << int{f};
    }
}

TEST(Codec, ParseErrorNames) {
    for (std::size_t i = 0; i < kParseErrorCount; ++i) {
        EXPECT_NE(to_string(static_cast<ParseError>(i)), "ParseError(?)");
    }
}

// Any byte string: no crash (the sanitizer builds check for UB), and whatever decodes
// re-encodes to itself.
TEST(Codec, RandomAndMutatedInputs) {
    sim::SimRng rng(7);
    std::vector<std::vector<std::uint8_t>> samples;
    for (const Packet& p : fuzz::sample_packets()) samples.push_back(encode(p));
    int valid = 0;
    for (int i = 0; i < 20000; ++i) {
        std::vector<std::uint8_t> bytes;
        if (i % 4 == 0) {
            bytes.resize(rng.below(400));
            for (auto& b : bytes) b = static_cast<std::uint8_t>(rng.next());
        } else {
            bytes = samples[rng.below(samples.size())];
            const unsigned edits = 1 + static_cast<unsigned>(rng.below(3));
            for (unsigned e = 0; e < edits && !bytes.empty(); ++e) {
                bytes[rng.below(bytes.size())] ^= static_cast<std::uint8_t>(1u << rng.below(8));
            }
        }
        for (const std::uint32_t mtu : {256u, 4096u}) {
            const auto decoded = decode(bytes, {mtu});
            if (!decoded) continue;
            ++valid;
            ASSERT_EQ(encode(*decoded), bytes);
        }
    }
    EXPECT_GT(valid, 100);
}

}  // namespace
}  // namespace metaroce
