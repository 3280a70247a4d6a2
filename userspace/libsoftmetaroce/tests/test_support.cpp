#include "test_support.h"

#include "softmetaroce/sack_bitmap.h"

namespace metaroce::test {

std::vector<std::uint8_t> pattern_bytes(std::size_t n, std::uint32_t seed) {
    std::vector<std::uint8_t> bytes(n);
    std::uint32_t x = seed * 2654435761u + 12345;
    for (auto& b : bytes) {
        x = x * 1103515245u + 12345u;
        b = static_cast<std::uint8_t>(x >> 16);
    }
    return bytes;
}

Packet through_wire(const Packet& packet, std::uint32_t mtu) {
    const std::vector<std::uint8_t> bytes = encode(packet);
    const auto decoded = decode(bytes, {mtu});
    EXPECT_TRUE(decoded.ok()) << "invalid " << to_string(packet.bth.opcode)
                              << " psn=" << packet.bth.psn << ": " << decoded.error();
    if (!decoded) return packet;
    EXPECT_EQ(*decoded, packet);
    return *decoded;
}

std::vector<Packet> through_wire(const std::vector<OutboundPacket>& packets, std::uint32_t mtu) {
    std::vector<Packet> out;
    for (const OutboundPacket& p : packets) out.push_back(through_wire(p.packet, mtu));
    return out;
}

Packet data_packet(Opcode op, Psn psn, std::uint8_t flags, const Deth& deth,
                   std::vector<std::uint8_t> payload) {
    Packet p;
    p.bth.opcode = op;
    p.bth.flags = flags;
    p.bth.dqpn = kQpB;
    p.bth.sqpn = kQpA;
    p.bth.psn = psn;
    p.ext = deth;
    p.payload = std::move(payload);
    return p;
}

Packet read_request(Psn psn, std::uint64_t va, std::uint32_t rkey, std::uint32_t len,
                    std::uint32_t msn, std::uint32_t offset, std::uint8_t flags) {
    Packet p;
    p.bth.opcode = Opcode::ReadRequest;
    p.bth.flags = flags;
    p.bth.dqpn = kQpB;
    p.bth.sqpn = kQpA;
    p.bth.psn = psn;
    p.ext = ReadReq{va, rkey, len, offset, msn};
    return p;
}

Packet atomic_request(Opcode op, Psn psn, std::uint64_t va, std::uint32_t rkey,
                      std::uint64_t swap_add, std::uint64_t compare, std::uint32_t msn,
                      std::uint8_t flags) {
    Packet p;
    p.bth.opcode = op;
    p.bth.flags = flags;
    p.bth.dqpn = kQpB;
    p.bth.sqpn = kQpA;
    p.bth.psn = psn;
    p.ext = AtomicReq{va, rkey, msn, swap_add, compare};
    return p;
}

Packet atomic_response(Psn psn, std::uint32_t msn, std::uint64_t value, std::uint8_t flags) {
    Packet p;
    p.bth.opcode = Opcode::AtomicResponse;
    p.bth.flags = flags;
    p.bth.dqpn = kQpA;
    p.bth.sqpn = kQpB;
    p.bth.psn = psn;
    p.ext = Deth{0, 0, msn, 8, 0};
    for (int i = 7; i >= 0; --i) p.payload.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
    return p;
}

std::uint64_t atomic_value(const Packet& response) {
    std::uint64_t v = 0;
    for (const std::uint8_t b : response.payload) v = v << 8 | b;
    return v;
}

Packet ack_packet(Psn cum, std::initializer_list<Psn> sacked, std::uint16_t ce,
                  std::uint32_t ts_echo, std::uint16_t echo_path) {
    SackBitmap bitmap(cum);
    for (const Psn p : sacked) bitmap.mark(p);
    Packet p;
    p.bth.opcode = Opcode::Ack;
    p.bth.dqpn = kQpA;
    p.bth.sqpn = kQpB;
    p.bth.psn = cum;
    Ack a;
    a.cum_psn = cum;
    a.ce_count = ce;
    a.ts_echo = ts_echo;
    a.echo_path = echo_path;
    a.sack = bitmap.to_wire();
    p.ext = a;
    return p;
}

Packet nak_packet(Syndrome syndrome, Psn cum, Psn nak_psn, std::uint8_t nak_arg) {
    Packet p = ack_packet(cum);
    p.ack().syndrome = syndrome;
    p.ack().nak_psn = nak_psn;
    p.ack().nak_arg = nak_arg;
    return p;
}

std::vector<Packet> of_opcode(const std::vector<Packet>& packets, Opcode op) {
    std::vector<Packet> out;
    for (const Packet& p : packets) {
        if (p.bth.opcode == op) out.push_back(p);
    }
    return out;
}

WorkRequest send_wr(std::uint64_t wr_id, std::vector<std::uint8_t> data) {
    WorkRequest wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::Send;
    wr.data = std::move(data);
    return wr;
}

WorkRequest write_wr(std::uint64_t wr_id, std::vector<std::uint8_t> data, std::uint64_t addr,
                     std::uint32_t rkey) {
    WorkRequest wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::Write;
    wr.data = std::move(data);
    wr.remote_addr = addr;
    wr.rkey = rkey;
    return wr;
}

WorkRequest read_wr(std::uint64_t wr_id, std::uint64_t addr, std::uint32_t rkey,
                    std::uint32_t length) {
    WorkRequest wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::Read;
    wr.remote_addr = addr;
    wr.rkey = rkey;
    wr.read_length = length;
    return wr;
}

WorkRequest send_with_inv_wr(std::uint64_t wr_id, std::vector<std::uint8_t> data,
                             std::uint32_t invalidate_rkey) {
    WorkRequest wr = send_wr(wr_id, std::move(data));
    wr.opcode = WrOpcode::SendWithInv;
    wr.invalidate_rkey = invalidate_rkey;
    return wr;
}

SimPair::SimPair(const SimPairOptions& options) : net(options.seed) {
    QpConfig config_a =
        make_qp_config(kQpA, kQpB, options.a_sq_psn, options.b_sq_psn, options.mtu, options.paths);
    QpConfig config_b =
        make_qp_config(kQpB, kQpA, options.b_sq_psn, options.a_sq_psn, options.mtu, options.paths);
    // Each requester's secret timestamp offset (section 12.1), different per seed.
    config_a.sender.ts_offset = static_cast<std::uint32_t>(options.seed * 0x9e3779b97f4a7c15ull);
    config_b.sender.ts_offset = static_cast<std::uint32_t>(options.seed * 0xc2b2ae3d27d4eb4full);
    if (options.tune) options.tune(config_a, config_b);
    a = std::make_unique<QueuePair>(config_a, mem_a);
    b = std::make_unique<QueuePair>(config_b, mem_b);
    node_a = std::make_unique<sim::QpNode>(*a);
    node_b = std::make_unique<sim::QpNode>(*b);
    id_a = net.add_node(*node_a);
    id_b = net.add_node(*node_b);
    node_a->set_peer(id_b);
    node_b->set_peer(id_a);
    net.connect(id_a, id_b, options.a_to_b, options.b_to_a);
}

void SimPair::collect() {
    const auto move_into = [](std::vector<Completion>& to, std::vector<Completion> from) {
        for (Completion& c : from) to.push_back(std::move(c));
    };
    move_into(send_cq_a, a->poll_send_cq());
    move_into(recv_cq_a, a->poll_recv_cq());
    move_into(send_cq_b, b->poll_send_cq());
    move_into(recv_cq_b, b->poll_recv_cq());
}

bool SimPair::run_until(const std::function<bool()>& done, TimeUs deadline) {
    collect();
    return net.run_until(
        [&] {
            collect();
            return done();
        },
        deadline);
}

void SimPair::run_for(TimeUs duration) {
    run_until([] { return false; }, net.now() + duration);
}

}  // namespace metaroce::test
