#include "packet_gen.h"

#include <cstdio>
#include <cstring>
#include <limits>

#include "softmetaroce/codec.h"

namespace metaroce::fuzz {
namespace {

constexpr std::uint64_t k2p32 = std::uint64_t{1} << 32;
constexpr std::size_t kDataHdr = METAROCE_BTH_LEN + METAROCE_DETH_LEN;

std::uint64_t be64_at(const std::vector<std::uint8_t>& b, std::size_t off) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 8; ++i) v = (v << 8) | b[off + i];
    return v;
}

std::uint32_t be32_at(const std::vector<std::uint8_t>& b, std::size_t off) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | b[off + i];
    return v;
}

std::string hex(std::uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace

const char* to_string(KnownBug bug) {
    switch (bug) {
        case KnownBug::None:
            return "none";
        case KnownBug::WrappedOffset:
            return "finding-1 (SEND/READ_RESP offset + payload wraps 2^64)";
        case KnownBug::ReadBehindCum:
            return "finding-2 (spoofed READ_REQ, duplicate behind cum)";
    }
    return "?";
}

KnownBug classify(const std::vector<std::uint8_t>& b, bool spoofed_in_window) {
    if (b.size() < METAROCE_BTH_LEN || (b[0] >> 4) != METAROCE_VERSION) return KnownBug::None;
    const std::uint8_t op = b[1];
    if ((op == METAROCE_OP_SEND || op == METAROCE_OP_READ_RESP) && b.size() > kDataHdr) {
        const std::uint64_t addr = be64_at(b, METAROCE_BTH_LEN);
        const std::uint64_t payload = b.size() - kDataHdr;
        if (addr + payload < addr) return KnownBug::WrappedOffset;
    }
    if (op == METAROCE_OP_READ_REQ && spoofed_in_window) return KnownBug::ReadBehindCum;
    return KnownBug::None;
}

std::string describe_bytes(const std::vector<std::uint8_t>& b) {
    std::string s = "len=" + std::to_string(b.size());
    if (b.size() < METAROCE_BTH_LEN) return s + " (shorter than a BTH)";
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  " ver=%u op=0x%02x flags=0x%02x stream=%u dqpn=0x%x sqpn=0x%x psn=0x%x",
                  b[0] >> 4, b[1], b[2], b[3], be32_at(b, 4), be32_at(b, 8), be32_at(b, 12));
    s += buf;
    const std::size_t x = METAROCE_BTH_LEN;
    switch (b[1]) {
        case METAROCE_OP_SEND:
        case METAROCE_OP_WRITE:
        case METAROCE_OP_READ_RESP:
        case METAROCE_OP_UD_SEND:
            if (b.size() < kDataHdr) break;
            std::snprintf(buf, sizeof buf, " addr=%s key=0x%x msn=%u msg_len=%u payload=%zu",
                          hex(be64_at(b, x)).c_str(), be32_at(b, x + 8), be32_at(b, x + 12),
                          be32_at(b, x + 16), b.size() - kDataHdr);
            s += buf;
            break;
        case METAROCE_OP_READ_REQ:
            if (b.size() < x + METAROCE_RREQ_LEN) break;
            std::snprintf(buf, sizeof buf, " va=%s rkey=0x%x len=%u offset=%u msn=%u",
                          hex(be64_at(b, x)).c_str(), be32_at(b, x + 8), be32_at(b, x + 12),
                          be32_at(b, x + 16), be32_at(b, x + 20));
            s += buf;
            break;
        case METAROCE_OP_ACK:
            if (b.size() < x + METAROCE_ACK_LEN) break;
            std::snprintf(buf, sizeof buf,
                          " cum=0x%x nak_psn=0x%x syndrome=%u arg=%u msn=%u sack0=%08x",
                          be32_at(b, x), be32_at(b, x + 4), b[x + 8], b[x + 9], be32_at(b, x + 20),
                          be32_at(b, x + 24));
            s += buf;
            break;
        default:
            break;
    }
    return s;
}

Psn PacketGen::pick_psn(Psn base) {
    switch (rng_.below(12)) {
        case 0:
        case 1:
        case 2:
            return base;  // at the window's start
        case 3:
            return psn_add(base, rng_.range(1, 8));  // just ahead
        case 4:
            return psn_add(base, rng_.range(-8, -1));  // just behind
        case 5:
            return psn_add(base, rng_.pick<std::int64_t>({255, 256, 257, 511, 512}));
        case 6:
            return psn_add(base, rng_.pick<std::int64_t>({-255, -256, -257, -1024}));
        case 7:
            return psn_add(base, rng_.pick<std::int64_t>({1 << 23, (1 << 23) - 1, -(1 << 23)}));
        case 8:
            return rng_.pick<Psn>({0, 1, kPsnMask, kPsnMask - 1});  // across the wrap
        case 9:
            return psn_add(base, rng_.range(-4096, 4096));
        default:
            return rng_.u32() & kPsnMask;
    }
}

std::uint32_t PacketGen::pick_len(const Target& t) {
    const std::uint32_t seg = t.seg, mr = t.mr_len ? t.mr_len : 65536;
    switch (rng_.below(10)) {
        case 0:
            return rng_.pick<std::uint32_t>({0, 1, 7, 8});
        case 1:
            return seg + static_cast<std::uint32_t>(rng_.range(-1, 1));
        case 2:
            return 2 * seg + static_cast<std::uint32_t>(rng_.range(-1, 1));
        case 3:
            return mr + static_cast<std::uint32_t>(rng_.range(-1, 1));
        case 4:
            return t.recv_len + static_cast<std::uint32_t>(rng_.range(-1, 1));
        case 5:
            return rng_.pick<std::uint32_t>({0x7fffffff, 0x80000000, 0xffffffff, 0xfffffffe});
        case 6:
            return 0xffffffffu - seg + static_cast<std::uint32_t>(rng_.range(-1, 1));
        case 7:
            return static_cast<std::uint32_t>(rng_.below(4 * seg));
        default:
            return rng_.u32();
    }
}

std::uint64_t PacketGen::pick_addr(const Target& t, std::uint32_t payload) {
    const std::uint64_t base = t.mr_addr, end = t.mr_addr + t.mr_len;
    const std::uint64_t seg = t.seg ? t.seg : 1400;
    switch (rng_.below(12)) {
        case 0:
            return base + rng_.below(t.mr_len + 1);  // inside
        case 1:
            return end - payload + static_cast<std::uint64_t>(rng_.range(-2, 2));  // the end
        case 2:
            return base - static_cast<std::uint64_t>(rng_.range(1, 64));  // before
        case 3:
            return k2p32 + static_cast<std::uint64_t>(rng_.range(-4096, 4096));  // 2^32
        case 4:
            return 0 - static_cast<std::uint64_t>(rng_.range(1, 8192));  // 2^64
        case 5: {
            // An offset aligned to the segment (mod 2^32) whose end wraps 2^64.
            const std::uint64_t low = k2p32 - (k2p32 % seg) - seg * rng_.below(2);
            return 0xffffffff00000000ull | low;
        }
        case 6:
            return rng_.pick<std::uint64_t>({0, seg, 2 * seg, seg - 1, seg + 1});
        case 7:
            return seg * rng_.below(64);  // a SEND offset
        case 8:
            return base + seg * rng_.below(8);
        case 9:
            return 0x7fffffffffffffffull - rng_.below(4096);
        default:
            return rng_.next();
    }
}

std::uint8_t PacketGen::pick_flags() {
    // Every combination of the defined flags (flag::kAll), or any byte.
    if (rng_.chance(40)) return static_cast<std::uint8_t>(rng_.below(flag::kAll + 1));
    if (rng_.chance(20)) return static_cast<std::uint8_t>(rng_.below(256));  // undefined bits
    return rng_.pick<std::uint8_t>({flag::kFirst | flag::kLast, flag::kFirst, flag::kLast, 0,
                                    flag::kFirst | flag::kLast | flag::kImm | flag::kAckReq,
                                    flag::kFirst | flag::kLast | flag::kInv | flag::kAckReq,
                                    flag::kLast | flag::kInv, flag::kFirst | flag::kInv});
}

std::vector<std::uint8_t> PacketGen::payload(std::uint32_t n) {
    std::vector<std::uint8_t> p(n);
    rng_.fill(p.data(), p.size());
    return p;
}

Shot PacketGen::valid_write(Target& t) {
    const std::uint32_t n = 1 + static_cast<std::uint32_t>(rng_.below(t.seg));
    const std::uint64_t half = t.mr_len / 2;
    Packet p;
    p.bth.opcode = Opcode::Write;
    p.bth.flags = flag::kFirst | flag::kLast | (rng_.chance(30) ? flag::kAckReq : 0);
    p.bth.dqpn = t.dqpn;
    p.bth.sqpn = t.sqpn;
    p.bth.psn = t.rq_psn;
    p.ext = Deth{t.mr_addr + rng_.below(half > n ? half - n : 1), t.mr_rkey, t.msn, n, 0};
    p.payload = payload(n);
    Shot s{encode(p),    static_cast<std::uint16_t>(rng_.below(8)), true, false, KnownBug::None,
           "valid WRITE"};
    t.rq_psn = psn_next(t.rq_psn);
    return s;
}

Shot PacketGen::valid_send(Target& t) {
    const std::uint32_t n = static_cast<std::uint32_t>(rng_.below(std::min(t.seg, t.recv_len) + 1));
    Packet p;
    p.bth.opcode = Opcode::Send;
    p.bth.flags = flag::kFirst | flag::kLast | flag::kAckReq;
    p.bth.dqpn = t.dqpn;
    p.bth.sqpn = t.sqpn;
    p.bth.psn = t.rq_psn;
    p.ext = Deth{0, 0, t.msn, n, 0};
    p.payload = payload(n);
    Shot s{encode(p), 0, true, false, KnownBug::None, "valid SEND"};
    t.rq_psn = psn_next(t.rq_psn);
    t.msn++;
    return s;
}

Shot PacketGen::data_packet(Target& t) {
    Packet p;
    p.bth.opcode = rng_.pick({Opcode::Send, Opcode::Write, Opcode::ReadResponse, Opcode::UdSend});
    p.bth.flags = pick_flags();
    p.bth.dqpn = t.dqpn;
    p.bth.sqpn = t.sqpn;
    p.bth.psn = pick_psn(p.bth.opcode == Opcode::ReadResponse ? t.sq_psn : t.rq_psn);
    p.bth.path = static_cast<std::uint16_t>(rng_.below(16));
    std::uint32_t n;
    switch (rng_.below(6)) {
        case 0:
            n = 0;
            break;
        case 1:
            n = t.seg;
            break;
        case 2:
            n = t.seg + static_cast<std::uint32_t>(rng_.range(-1, 1));
            break;
        case 3:
            n = 4096 + static_cast<std::uint32_t>(rng_.range(-8, 8));
            break;
        default:
            n = static_cast<std::uint32_t>(rng_.below(t.seg + 1));
            break;
    }
    Deth d;
    d.addr = pick_addr(t, n);
    d.key = rng_.chance(60) ? t.mr_rkey
                            : rng_.pick<std::uint32_t>(
                                  {0, t.mr_rkey ^ 1, t.mr_rkey + 0x100, rng_.u32(), 0x80010000});
    d.msn = rng_.chance(60) ? t.msn + static_cast<std::uint32_t>(rng_.range(-1, 2)) : rng_.u32();
    // A message length consistent with the offset more often than not.
    if (rng_.chance(60)) {
        const std::uint64_t end = d.addr + n;
        d.msg_len = end <= 0xffffffffull ? static_cast<std::uint32_t>(end) : pick_len(t);
        if (rng_.chance(30)) d.msg_len = std::max(d.msg_len, pick_len(t));
    } else {
        d.msg_len = pick_len(t);
    }
    d.imm = rng_.u32();
    p.ext = d;
    p.payload = payload(n);
    return Shot{encode(p), p.bth.path,     false,
                false,     KnownBug::None, "data " + std::string(to_string(p.bth.opcode))};
}

// A SEND (or, at the send PSNs, a READ response) that passes every header check the receive
// path makes before it places data: at the window start, the expected MSN, one segment of
// payload at a segment-aligned offset, a message length the offset and payload add up to, but
// with the offset at an edge (near 2^32, near 2^64, wrapping 2^64, past the receive).
Shot PacketGen::edge_placement(Target& t) {
    const bool resp = rng_.chance(25);
    const std::uint64_t seg = t.seg;
    Packet p;
    p.bth.opcode = resp ? Opcode::ReadResponse : Opcode::Send;
    p.bth.flags =
        rng_.pick<std::uint8_t>({flag::kFirst | flag::kLast, flag::kLast, 0, flag::kFirst});
    p.bth.dqpn = t.dqpn;
    p.bth.sqpn = t.sqpn;
    p.bth.psn = resp ? psn_add(t.sq_psn, rng_.range(0, 3)) : t.rq_psn;
    std::uint64_t addr;
    switch (rng_.below(4)) {
        case 0:
            addr = 0xffffffff00000000ull | (k2p32 - k2p32 % seg);
            break;  // end wraps 2^64
        case 1:
            addr = k2p32 - k2p32 % seg - seg;
            break;  // end just below 2^32
        case 2:
            addr = seg * (1 + rng_.below(8));
            break;  // past the receive
        default:
            addr = (rng_.next() / seg) * seg;
            break;
    }
    Deth d;
    d.addr = addr;
    d.msn = t.msn;
    const std::uint64_t end = addr + seg;
    d.msg_len =
        end <= 0xffffffffull ? static_cast<std::uint32_t>(end) : static_cast<std::uint32_t>(seg);
    p.ext = d;
    p.payload = payload(static_cast<std::uint32_t>(seg));
    return Shot{encode(p),      0,
                false,          false,
                KnownBug::None, std::string("edge placement ") + (resp ? "READ_RESP" : "SEND")};
}

Shot PacketGen::read_request(Target& t) {
    Packet p;
    p.bth.opcode = Opcode::ReadRequest;
    p.bth.flags = rng_.chance(70) ? flag::kAckReq : pick_flags();
    p.bth.dqpn = t.dqpn;
    p.bth.sqpn = t.sqpn;
    p.bth.psn = pick_psn(t.rq_psn);
    ReadReq r;
    r.len = pick_len(t);
    r.va = pick_addr(t, r.len);
    r.rkey = rng_.chance(60) ? t.mr_rkey : rng_.u32();
    r.offset = rng_.chance(60) ? 0 : static_cast<std::uint32_t>(pick_addr(t, 0));
    r.msn = rng_.chance(50) ? t.msn : rng_.u32();
    p.ext = r;
    return Shot{encode(p), 0, false, false, KnownBug::None, "READ_REQ"};
}

Shot PacketGen::ack(Target& t) {
    Packet p;
    p.bth.opcode = Opcode::Ack;
    p.bth.flags = rng_.chance(80) ? 0 : pick_flags();
    p.bth.dqpn = t.dqpn;
    p.bth.sqpn = t.sqpn;
    Ack a;
    a.cum_psn = pick_psn(t.sq_psn);
    p.bth.psn = rng_.chance(80) ? a.cum_psn : pick_psn(a.cum_psn);
    a.syndrome = static_cast<Syndrome>(rng_.chance(70) ? rng_.below(6) : rng_.below(256));
    a.nak_psn = a.syndrome == Syndrome::Ack && rng_.chance(70) ? 0 : pick_psn(a.cum_psn);
    a.nak_arg = static_cast<std::uint8_t>(rng_.below(256));
    a.ce_count = static_cast<std::uint16_t>(rng_.chance(50) ? 0 : rng_.u32());
    a.fair_share = static_cast<std::uint16_t>(rng_.chance(50) ? 0 : rng_.u32());
    a.echo_path = static_cast<std::uint16_t>(rng_.below(32));
    a.ts_echo = rng_.u32();
    a.msn = rng_.chance(50) ? t.msn : rng_.u32();
    switch (rng_.below(5)) {
        case 0:
            break;  // no SACK
        case 1:
            a.sack.fill(0xffffffffu);
            break;
        case 2:
            a.sack[rng_.below(METAROCE_SACK_WORDS)] = 1u << rng_.below(32);
            break;
        case 3:
            a.sack[0] = 0x80000000u;
            a.sack[7] = 1;
            break;
        default:
            for (auto& w : a.sack) w = rng_.u32();
            break;
    }
    p.ext = a;
    return Shot{encode(p), 0, false, false, KnownBug::None, a.is_nak() ? "NAK" : "ACK"};
}

void PacketGen::damage(Shot& s) {
    auto& b = s.bytes;
    switch (rng_.below(10)) {
        case 0:
            b.resize(rng_.below(b.size()));
            s.what += " truncated";
            break;
        case 1:
            b[0] =
                static_cast<std::uint8_t>(rng_.pick<unsigned>({0x00, 0x20, 0xf0, 0x11, 0x10 | 1}));
            s.what += " bad version";
            break;
        case 2:
            if (b.size() > 1)
                b[1] = static_cast<std::uint8_t>(
                    rng_.pick<unsigned>({0, 6, 7, 0x0f, 0x11, 0x80, 0xff}));
            s.what += " unknown opcode";
            break;
        case 3:
            if (b.size() > 3) b[3] = static_cast<std::uint8_t>(1 + rng_.below(255));
            s.what += " stream";
            break;
        case 4:
            if (b.size() > 12)
                b[4 + 4 * rng_.below(3)] = static_cast<std::uint8_t>(1 + rng_.below(255));
            s.what += " reserved top byte";
            break;
        case 5:
            if (b.size() > 22)
                b[20 + rng_.below(2)] ^= static_cast<std::uint8_t>(1 + rng_.below(255));
            s.what += " reserved BTH";
            break;
        case 6: {
            const std::size_t extra = 1 + rng_.below(64);
            for (std::size_t i = 0; i < extra && b.size() < options_.max_datagram; ++i)
                b.push_back(static_cast<std::uint8_t>(rng_.u32()));
            s.what += " trailing bytes";
            break;
        }
        default:
            for (int i = 0, n = 1 + static_cast<int>(rng_.below(4)); i < n && !b.empty(); ++i)
                b[rng_.below(b.size())] ^= static_cast<std::uint8_t>(1u << rng_.below(8));
            s.what += " bit flips";
            break;
    }
}

Shot PacketGen::next(Target& t) {
    const bool connected = t.kind == Target::Kind::Own || t.kind == Target::Kind::Transfer;
    for (int attempt = 0;; ++attempt) {
        Shot s;
        const unsigned roll = static_cast<unsigned>(rng_.below(100));
        if (t.kind == Target::Kind::Own && roll < 25) {
            s = rng_.chance(50) || t.recv_len == 0 ? valid_write(t) : valid_send(t);
            s.what += ": " + describe_bytes(s.bytes);
            return s;
        }
        if (roll < 30) {
            s = edge_placement(t);
        } else if (roll < 55) {
            s = data_packet(t);
        } else if (roll < 70) {
            s = read_request(t);
        } else {
            s = ack(t);
        }
        if (rng_.chance(25)) damage(s);
        // A tenth of what goes to connected QPs comes from elsewhere: the off-path spoofer,
        // who does not know the peer's address, or knows it but not its QPN.
        if (connected && rng_.chance(10)) {
            if (rng_.chance(50)) {
                s.wrong_source = true;
                s.what += " [from the wrong address]";
            } else if (s.bytes.size() >= 12) {
                s.bytes[11] ^= static_cast<std::uint8_t>(1 + rng_.below(255));
                s.what += " [wrong source QPN]";
            }
        }
        if (t.kind == Target::Kind::Protected && !s.wrong_source && s.bytes.size() >= 12 &&
            (be32_at(s.bytes, 8) & METAROCE_QPN_MASK) == t.sqpn) {
            // Never in a protected QP's window from its peer: the peer's QPN is always wrong.
            s.bytes[11] ^= 0x5a;
            s.what += " [wrong source QPN: protected]";
        }
        const bool spoofed = connected && !s.wrong_source && s.bytes.size() >= 12 &&
                             (be32_at(s.bytes, 8) & METAROCE_QPN_MASK) == t.sqpn;
        s.known = classify(s.bytes, spoofed);
        if (options_.avoid_known && s.known != KnownBug::None && attempt < 64) continue;
        if (options_.avoid_known && s.known != KnownBug::None) {
            // Give up on this one: an ACK never reaches the known bugs.
            s = ack(t);
            s.known = KnownBug::None;
        }
        s.what += ": " + describe_bytes(s.bytes);
        return s;
    }
}

}  // namespace metaroce::fuzz
