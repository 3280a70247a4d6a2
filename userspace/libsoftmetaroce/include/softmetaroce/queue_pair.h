// One connected MetaRoCE QP: a Sender (its send queue, requester) and a Receiver (its receive
// queue and memory, responder) behind a datagram interface. Incoming bytes are decoded and
// validated here, addressed to the right half, and the halves share the QP's error state.
// This is the unit the simulator (sim/) and a UDP soft endpoint drive.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "softmetaroce/codec.h"
#include "softmetaroce/completion.h"
#include "softmetaroce/datagram.h"
#include "softmetaroce/fair_share.h"
#include "softmetaroce/memory.h"
#include "softmetaroce/receiver.h"
#include "softmetaroce/sender.h"
#include "softmetaroce/time.h"
#include "softmetaroce/work_request.h"

namespace metaroce {

struct QpConfig {
    SenderConfig sender;
    ReceiverConfig receiver;
};

// The configuration of a QP connected to `peer_qpn`: we send from `sq_psn`, the peer from
// `rq_psn` (its sq_psn). Tune the returned fields further as needed.
QpConfig make_qp_config(std::uint32_t qpn, std::uint32_t peer_qpn, Psn sq_psn, Psn rq_psn,
                        std::uint32_t mtu = 1024, unsigned num_paths = 8);

struct QpCounters {
    std::uint64_t datagrams = 0;
    std::array<std::uint64_t, kParseErrorCount> malformed{};  // by ParseError
    std::uint64_t wrong_qp = 0;                               // not addressed to this QP
    std::uint64_t wrong_peer = 0;                             // not from the connected peer QP
    std::uint64_t wrong_type = 0;                             // UD_SEND on a connected QP
    std::uint64_t dropped_in_error = 0;
};

class QueuePair {
  public:
    QueuePair(const QpConfig& config, MemoryModel& memory, FairShareTracker* fair_share = nullptr);

    std::uint32_t qpn() const { return config_.sender.qpn; }

    void post_send(WorkRequest wr, TimeUs now);
    bool post_recv(ReceiveWqe wqe);

    // A UDP payload arrived for this QP; `ce`: its IP header was CE-marked.
    void on_datagram(std::span<const std::uint8_t> bytes, bool ce, TimeUs now);
    std::optional<TimeUs> next_timer() const;
    void on_timer(TimeUs now);

    // Encoded packets to send, in the order they were produced.
    std::vector<Datagram> take_outgoing();
    std::vector<Completion> poll_send_cq();
    std::vector<Completion> poll_recv_cq();

    bool in_error() const { return sender_.in_error() || receiver_.in_error(); }
    Sender& sender() { return sender_; }
    const Sender& sender() const { return sender_; }
    Receiver& receiver() { return receiver_; }
    const Receiver& receiver() const { return receiver_; }
    const QpCounters& counters() const { return counters_; }

  private:
    // Either half failing moves the whole QP to the error state.
    void sync_error_state();

    QpConfig config_;
    Sender sender_;
    Receiver receiver_;
    QpCounters counters_;
};

}  // namespace metaroce
