#include "softmetaroce/queue_pair.h"

#include <rdma/metaroce_wire.h>

namespace metaroce {

QpConfig make_qp_config(std::uint32_t qpn, std::uint32_t peer_qpn, Psn sq_psn, Psn rq_psn,
                        std::uint32_t mtu, unsigned num_paths) {
    QpConfig config;
    config.sender.qpn = qpn;
    config.sender.peer_qpn = peer_qpn;
    config.sender.initial_psn = sq_psn;
    config.sender.mtu = mtu;
    config.sender.num_paths = num_paths;
    config.receiver.qpn = qpn;
    config.receiver.peer_qpn = peer_qpn;
    config.receiver.expected_psn = rq_psn;
    config.receiver.mtu = mtu;
    config.receiver.num_paths = num_paths;
    return config;
}

QueuePair::QueuePair(const QpConfig& config, MemoryModel& memory, FairShareTracker* fair_share)
    : config_(config),
      sender_(config.sender),
      receiver_(config.receiver, memory, fair_share, &sender_.paths()) {}

void QueuePair::post_send(WorkRequest wr, TimeUs now) {
    sender_.post(std::move(wr), now);
    sync_error_state();
}

bool QueuePair::post_recv(ReceiveWqe wqe) { return receiver_.post_recv(std::move(wqe)); }

void QueuePair::on_datagram(std::span<const std::uint8_t> bytes, bool ce, TimeUs now) {
    ++counters_.datagrams;
    Result<Packet, ParseError> decoded = decode(bytes, DecodeOptions{config_.receiver.mtu});
    if (!decoded) {
        ++counters_.malformed[static_cast<std::size_t>(decoded.error())];
        // A newer version addressed to this connection is answered (section 13); anything
        // else malformed is only counted.
        const std::optional<BthProbe> probe = probe_bth(bytes);
        if (decoded.error() == ParseError::BadVersion && probe &&
            probe->version > METAROCE_VERSION && probe->dqpn == qpn() &&
            probe->sqpn == config_.sender.peer_qpn && !in_error()) {
            receiver_.on_version_mismatch(*probe, now);
        }
        return;
    }
    const Packet& packet = *decoded;
    if (packet.bth.dqpn != qpn()) {
        ++counters_.wrong_qp;
        return;
    }
    if (packet.bth.sqpn != config_.sender.peer_qpn) {
        ++counters_.wrong_peer;
        return;
    }
    if (in_error()) {
        ++counters_.dropped_in_error;
        return;
    }
    switch (packet.bth.opcode) {
        case Opcode::Send:
        case Opcode::Write:
        case Opcode::ReadRequest:
        case Opcode::AtomicCmpSwp:
        case Opcode::AtomicFetchAdd:
            receiver_.on_packet(packet, ce, now);
            break;
        case Opcode::Ack:
            sender_.on_ack(packet, now);
            break;
        case Opcode::ReadResponse:
        case Opcode::AtomicResponse:
            sender_.on_read_response(packet, now);
            break;
        case Opcode::UdSend:
            ++counters_.wrong_type;
            break;
    }
    sync_error_state();
}

std::optional<TimeUs> QueuePair::next_timer() const {
    const std::optional<TimeUs> a = sender_.next_timer();
    const std::optional<TimeUs> b = receiver_.next_timer();
    if (a && b) return std::min(*a, *b);
    return a ? a : b;
}

void QueuePair::on_timer(TimeUs now) {
    receiver_.on_timer(now);
    sender_.on_timer(now);
    sync_error_state();
}

std::vector<Datagram> QueuePair::take_outgoing() {
    std::vector<Datagram> out;
    const auto append = [&out](std::vector<OutboundPacket> packets) {
        for (const OutboundPacket& p : packets) {
            out.push_back(Datagram{.bytes = encode(p.packet),
                                   .udp_src_port = static_cast<std::uint16_t>(
                                       METAROCE_ENTROPY_BASE | (p.entropy & METAROCE_ENTROPY_MASK)),
                                   .ect = p.ect(),
                                   .ce = false});
        }
    };
    append(receiver_.take_outbox());
    append(sender_.take_outbox());
    return out;
}

std::vector<Completion> QueuePair::poll_send_cq() { return sender_.take_completions(); }

std::vector<Completion> QueuePair::poll_recv_cq() { return receiver_.take_completions(); }

void QueuePair::sync_error_state() {
    if (sender_.in_error() && !receiver_.in_error()) receiver_.enter_error();
    if (receiver_.in_error() && !sender_.in_error()) sender_.enter_error();
}

}  // namespace metaroce
