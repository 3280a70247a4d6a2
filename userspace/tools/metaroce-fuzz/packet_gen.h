// The packet fuzzer's generator: structure-aware MetaRoCE packets for one target QP, built
// with the libsoftmetaroce codec and then, sometimes, damaged at the byte level. Pure (no
// sockets, no verbs), so it is tested on the host: the same seed gives the same packets.
//
// Values cluster at the boundaries the receive path computes with: addresses near 2^32 and
// 2^64 (including segment-aligned offsets whose end wraps 2^64), lengths near the segment and
// memory region sizes and near 2^32, PSNs behind, at, ahead of and far from the receiver's
// window and across the 24-bit wrap, every opcode byte with every flag combination, ACKs and
// NAKs with odd syndromes, SACK bitmaps and cum_psns, truncated packets, bad versions,
// reserved bits and streams.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rng.h"
#include "softmetaroce/packet.h"
#include "softmetaroce/psn.h"

namespace metaroce::fuzz {

// What the fuzzer knows about the QP it aims at.
struct Target {
    enum class Kind : std::uint8_t {
        Own,          // a QP the fuzzer created and connected to a peer it plays
        Transfer,     // a QP of a real transfer: in-window garbage from its peer's address allowed
        Protected,    // a QP of a real transfer that must survive: never spoofed in its window
        Unconnected,  // a QPN with no connected QP behind it (or a UD/GSI QP)
    };
    Kind kind = Kind::Unconnected;
    std::uint32_t dqpn = 0;     // the DUT's QPN
    std::uint32_t sqpn = 0;     // the peer QPN the DUT's QP is connected to
    Psn rq_psn = 0;             // where the fuzzer thinks the DUT's receive window starts
    Psn sq_psn = 0;             // where it thinks the DUT's send PSNs are (for ACKs)
    std::uint64_t mr_addr = 0;  // a remotely writable and readable region, if known
    std::uint32_t mr_rkey = 0;
    std::uint32_t mr_len = 0;
    std::uint32_t recv_len = 0;  // the size of the receives posted (Own)
    std::uint32_t seg = 1400;    // payload bytes per packet of the DUT QP
    std::uint32_t msn = 0;       // messages the fuzzer completed on it (Own)
};

// Inputs that reach bugs already known (docs/fuzzing.md): generated unless avoided.
enum class KnownBug : std::uint8_t {
    None,
    WrappedOffset,  // finding 1: SEND / READ_RESP whose offset + payload wraps 2^64
    ReadBehindCum,  // finding 2: a spoofed READ_REQ the responder may take as a duplicate
};
const char* to_string(KnownBug bug);

// One datagram to send.
struct Shot {
    std::vector<std::uint8_t> bytes;
    std::uint16_t path = 0;
    bool valid = false;         // a well-formed in-window packet that advances rq_psn (Own only)
    bool wrong_source = false;  // to be sent from the alternative address (off-path)
    KnownBug known = KnownBug::None;
    std::string what;  // one line: which mutation, the header fields
};

struct GenOptions {
    bool avoid_known = false;  // never produce a Shot with known != None
    std::uint32_t max_datagram = 4200;
};

class PacketGen {
  public:
    PacketGen(std::uint64_t seed, GenOptions options) : rng_(seed), options_(options) {}

    // The next packet for `t` (may update t.rq_psn / t.msn when it sends a valid one).
    Shot next(Target& t);
    Rng& rng() { return rng_; }

  private:
    Psn pick_psn(Psn base);
    std::uint64_t pick_addr(const Target& t, std::uint32_t payload);
    std::uint32_t pick_len(const Target& t);
    std::uint8_t pick_flags();
    std::vector<std::uint8_t> payload(std::uint32_t n);
    Shot valid_write(Target& t);
    Shot valid_send(Target& t);
    Shot data_packet(Target& t);
    Shot edge_placement(Target& t);
    Shot read_request(Target& t);
    Shot ack(Target& t);
    void damage(Shot& s);

    Rng rng_;
    GenOptions options_;
};

// What a datagram (as sent) would make the receive path do that is known to be wrong, read
// from the bytes at the version-1 offsets whatever else is wrong with them.
KnownBug classify(const std::vector<std::uint8_t>& bytes, bool spoofed_in_window);

// One line describing a datagram: opcode, flags, QPNs, PSN and extension fields.
std::string describe_bytes(const std::vector<std::uint8_t>& bytes);

}  // namespace metaroce::fuzz
