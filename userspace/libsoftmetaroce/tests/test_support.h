// Shared test helpers: packet builders, a wire round trip that validates every packet a
// component emits, and a two-QP simulated connection.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "softmetaroce/codec.h"
#include "softmetaroce/memory.h"
#include "softmetaroce/packet.h"
#include "softmetaroce/queue_pair.h"
#include "softmetaroce/sim/qp_node.h"
#include "softmetaroce/sim/sim_network.h"

namespace metaroce::test {

inline constexpr std::uint32_t kQpA = 0x000a11;  // requester in the unit tests
inline constexpr std::uint32_t kQpB = 0x000b22;  // responder in the unit tests

std::vector<std::uint8_t> pattern_bytes(std::size_t n, std::uint32_t seed);

// Encodes and decodes the packet at `mtu`, failing the test if it does not decode to itself:
// every packet the model produces must be valid on the wire.
Packet through_wire(const Packet& packet, std::uint32_t mtu);
std::vector<Packet> through_wire(const std::vector<OutboundPacket>& packets, std::uint32_t mtu);

// Requester-to-responder packets as a sender at kQpA would build them for kQpB.
Packet data_packet(Opcode op, Psn psn, std::uint8_t flags, const Deth& deth,
                   std::vector<std::uint8_t> payload);
Packet read_request(Psn psn, std::uint64_t va, std::uint32_t rkey, std::uint32_t len,
                    std::uint32_t msn, std::uint32_t offset = 0,
                    std::uint8_t flags = flag::kAckReq);
// An atomic request (kQpA to kQpB); FETCH_ADD with `compare` 0.
Packet atomic_request(Opcode op, Psn psn, std::uint64_t va, std::uint32_t rkey,
                      std::uint64_t swap_add, std::uint64_t compare, std::uint32_t msn,
                      std::uint8_t flags = flag::kAckReq);
// An ATOMIC_RESP from kQpB to kQpA.
Packet atomic_response(Psn psn, std::uint32_t msn, std::uint64_t value,
                       std::uint8_t flags = flag::kFirst | flag::kLast);
// The value an ATOMIC_RESP carries (big-endian).
std::uint64_t atomic_value(const Packet& response);
// An ACK from kQpB to kQpA: cum_psn and the PSNs after it that arrived.
Packet ack_packet(Psn cum, std::initializer_list<Psn> sacked = {}, std::uint16_t ce = 0,
                  std::uint32_t ts_echo = 0, std::uint16_t echo_path = 0);
Packet nak_packet(Syndrome syndrome, Psn cum, Psn nak_psn, std::uint8_t nak_arg = 0);

std::vector<Packet> of_opcode(const std::vector<Packet>& packets, Opcode op);

// Work requests.
WorkRequest send_wr(std::uint64_t wr_id, std::vector<std::uint8_t> data);
WorkRequest write_wr(std::uint64_t wr_id, std::vector<std::uint8_t> data, std::uint64_t addr,
                     std::uint32_t rkey);
WorkRequest read_wr(std::uint64_t wr_id, std::uint64_t addr, std::uint32_t rkey,
                    std::uint32_t length);
// A SEND with invalidate of the responder's key `invalidate_rkey`.
WorkRequest send_with_inv_wr(std::uint64_t wr_id, std::vector<std::uint8_t> data,
                             std::uint32_t invalidate_rkey);

// Two QPs (A, B) connected through a SimNetwork, each with its own memory; completions are
// collected after every event.
struct SimPairOptions {
    std::uint64_t seed = 1;
    std::uint32_t mtu = 1024;
    unsigned paths = 8;
    Psn a_sq_psn = 0x000100;
    Psn b_sq_psn = 0x200000;
    sim::LinkConfig a_to_b;
    sim::LinkConfig b_to_a;
    std::function<void(QpConfig& a, QpConfig& b)> tune;
};

class SimPair {
  public:
    explicit SimPair(const SimPairOptions& options);

    bool run_until(const std::function<bool()>& done, TimeUs deadline);
    void run_for(TimeUs duration);
    TimeUs now() const { return net.now(); }

    MemoryModel mem_a;
    MemoryModel mem_b;
    std::unique_ptr<QueuePair> a;
    std::unique_ptr<QueuePair> b;
    std::unique_ptr<sim::QpNode> node_a;
    std::unique_ptr<sim::QpNode> node_b;
    sim::SimNetwork net;
    sim::NodeId id_a = 0;
    sim::NodeId id_b = 0;

    std::vector<Completion> send_cq_a, recv_cq_a, send_cq_b, recv_cq_b;

  private:
    void collect();
};

}  // namespace metaroce::test
