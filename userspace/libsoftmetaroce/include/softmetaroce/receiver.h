// The responder side of one connection (protocol.md sections 5, 6, 11): tracks the PSN window,
// places SEND and WRITE payloads on arrival, accepts and executes READ requests and atomics
// (each atomic exactly once, repeats answered from a record of those executed), completes
// messages in order as the cumulative PSN passes them, and generates ACKs and NAKs.
//
// Deterministic: the caller passes the time and collects what the receiver produced (packets to
// send, completions) with take_outbox() / take_completions(). Packets given to on_packet() have
// already been decoded and validated (codec.h) and addressed to this connection.
//
// Messages complete when the connection's cum_psn passes their last PSN (section 6), so
// completions are in order. Version 1 has a single stream (0) per connection (section 9); the
// codec drops packets of any other stream.
#pragma once

#include <rdma/metaroce_wire.h>

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "softmetaroce/codec.h"
#include "softmetaroce/completion.h"
#include "softmetaroce/fair_share.h"
#include "softmetaroce/memory.h"
#include "softmetaroce/packet.h"
#include "softmetaroce/paths.h"
#include "softmetaroce/sack_bitmap.h"
#include "softmetaroce/time.h"

namespace metaroce {

struct ReceiverConfig {
    std::uint32_t qpn = 0;
    std::uint32_t peer_qpn = 0;
    Psn expected_psn = 0;                   // the peer's sq_psn: our rq_psn
    std::uint32_t mtu = 1024;               // payload bytes per packet: a segment size (codec.h)
    unsigned num_paths = 8;                 // our own paths, for ACKs and READ responses
    std::uint8_t min_rnr_timer = 1;         // IB encoding, sent in RNR NAKs (1: 10 us)
    std::uint32_t max_dest_rd_atomic = 16;  // READ parts and atomics accepted, not yet executed
    // The QP allows remote atomics (IBV_ACCESS_REMOTE_ATOMIC in its access flags).
    bool remote_atomic = true;
    // Executed atomics remembered to answer repeats (section 5): at least max_dest_rd_atomic
    // (it is raised to that), the soft-NIC's 128 by default.
    std::uint32_t atomic_records = 128;
    std::uint32_t ack_every = METAROCE_ACK_EVERY;  // data packets per ACK without other triggers
    TimeUs delayed_ack_us = METAROCE_DELAYED_ACK_US;
    // Fair-share budget when no tracker is shared.
    std::uint32_t receive_budget = METAROCE_RX_BUDGET;
};

struct ReceiverCounters {
    std::uint64_t packets = 0;  // SEND, WRITE, READ_REQ and atomic request packets handled
    std::uint64_t placed = 0;
    std::uint64_t duplicates = 0;
    std::uint64_t duplicate_reads = 0;
    // READ_REQs behind cum_psn that repeat no READ accepted: dropped unanswered (section 5).
    std::uint64_t duplicate_reads_unknown = 0;
    std::uint64_t out_of_window = 0;
    std::uint64_t read_overflow = 0;  // READ_REQ or atomic dropped: max_dest_rd_atomic reached
    std::uint64_t ce_marked = 0;
    std::uint64_t acks_sent = 0;
    std::uint64_t rnr_naks = 0;
    std::uint64_t access_naks = 0;
    std::uint64_t invalid_naks = 0;
    std::uint64_t operational_naks = 0;
    std::uint64_t version_naks = 0;
    std::uint64_t reads_executed = 0;
    std::uint64_t read_responses = 0;
    std::uint64_t atomics_executed = 0;
    std::uint64_t atomic_responses = 0;  // sent, those from the record included
    // Repeats of an atomic (in duplicates): answered from the record, or dropped because the
    // original waits for cum_psn; and those matching neither, dropped unanswered
    // (rx_duplicate_atomic_unknown, section 5).
    std::uint64_t duplicate_atomics = 0;
    std::uint64_t duplicate_atomics_unknown = 0;
    std::uint64_t messages_completed = 0;
    // SENDs with invalidate: refused at arrival for a key no fast-registration region is
    // valid with (INVALID_REQUEST NAK, also counted in invalid_naks); completed and their key
    // invalidated; completed when the region was no longer valid with the key.
    std::uint64_t invalidate_refused = 0;
    std::uint64_t invalidations = 0;
    std::uint64_t invalidations_ended_already = 0;
    std::uint64_t dropped_in_error = 0;
    std::uint64_t unexpected_opcode = 0;
};

class Receiver {
  public:
    // `paths`, when given, is the path table of the QP's own requester side: its packets
    // take the same routes as our ACKs and READ responses, so we avoid the paths it found
    // FAILED (the requester does not acknowledge READ responses, so we cannot learn that).
    Receiver(const ReceiverConfig& config, MemoryModel& memory,
             FairShareTracker* fair_share = nullptr, const PathSet* paths = nullptr);

    // Posts a receive WQE: the k-th one posted is consumed by the k-th SEND (or WRITE with
    // immediate) of the connection, the message with MSN k. Returns false, posting nothing, if
    // the scatter list does not name locally writable memory. In the error state the WQE
    // completes at once with WR_FLUSH_ERR.
    bool post_recv(ReceiveWqe wqe);

    // A SEND, WRITE, READ_REQ or atomic request for this connection. `ce`: the IP header was
    // CE-marked.
    void on_packet(const Packet& packet, bool ce, TimeUs now);
    // A packet of a higher protocol version for this connection: answer with a VERSION NAK.
    void on_version_mismatch(const BthProbe& probe, TimeUs now);

    std::optional<TimeUs> next_timer() const { return delayed_ack_at_; }
    void on_timer(TimeUs now);

    // Moves to the error state (for instance because the requester side failed): every
    // posted WQE completes with WR_FLUSH_ERR and packets are dropped from now on.
    void enter_error() { fail(std::nullopt); }
    bool in_error() const { return error_; }

    std::vector<OutboundPacket> take_outbox();
    std::vector<Completion> take_completions();

    const SackBitmap& window() const { return window_; }
    const ReceiverCounters& counters() const { return counters_; }
    const ReceiverConfig& config() const { return config_; }
    std::size_t posted_wqes() const { return wqes_.size(); }
    std::uint32_t completed_messages() const { return completed_messages_; }
    // READ parts and atomics accepted and not yet executed.
    std::size_t pending_reads() const { return pending_reads_.size(); }
    std::size_t atomic_records() const { return atomic_records_.size(); }

  private:
    struct PostedWqe {
        ReceiveWqe wqe;
        std::optional<std::uint32_t> msg_len;  // from the first packet placed in it
    };

    enum class MessageKind : std::uint8_t { Send, Write, WriteWithImm, Read };

    // Recorded at the last PSN of a message; the message completes when cum_psn passes it.
    struct MessageEnd {
        MessageKind kind = MessageKind::Write;
        std::uint32_t msn = 0;
        std::uint32_t msg_len = 0;
        std::optional<std::uint32_t> imm;
        std::optional<std::uint32_t> invalidate_rkey;  // a SEND with invalidate
        bool solicited = false;
    };

    // A run of response PSNs of one READ accepted (section 5): the READ is named by its
    // rkey, MSN, the address of its byte 0 and the PSN of its response 0.
    struct ReadRun {
        std::uint64_t base = 0;  // va - offset
        std::uint32_t rkey = 0;
        std::uint32_t msn = 0;
        Psn psn0 = 0;  // psn - offset / mtu
        Psn first = 0;
        std::uint32_t packets = 0;
    };
    // READs remembered, as the kernel responder does.
    static constexpr std::size_t kReadHistory = 128;

    // A READ part, or an atomic (opcode, atomic), waiting for cum_psn.
    struct PendingRead {
        Psn psn = 0;
        ReadReq request;
        bool retx = false;
        Opcode opcode = Opcode::ReadRequest;
        AtomicReq atomic;
    };

    // An atomic executed (section 5): its request and the value it returned.
    struct AtomicRecord {
        Psn psn = 0;
        Opcode opcode = Opcode::AtomicCmpSwp;
        AtomicReq request;
        std::uint64_t original = 0;
    };

    // Why a packet was refused, and what the responder does about it.
    enum class Refusal : std::uint8_t {
        None,
        Rnr,             // RNR NAK, packet dropped, no state change
        InvalidRequest,  // INVALID_REQUEST NAK, QP to error
        RemoteAccess,    // REMOTE_ACCESS NAK, QP to error
        LengthError,     // INVALID_REQUEST NAK, WQE completes with LOC_LEN_ERR, QP to error
        // A SEND with invalidate of a key no fast-registration region is valid with:
        // INVALID_REQUEST NAK, WQE completes with REM_INV_REQ_ERR, QP to error.
        BadInvalidate,
    };

    struct FailedWqe {
        std::uint32_t msn;
        WcStatus status;
    };

    void handle_data(const Packet& packet, TimeUs now);
    void handle_read_request(const Packet& packet, TimeUs now);
    void handle_atomic_request(const Packet& packet, TimeUs now);
    void handle_duplicate_atomic(const Packet& packet, TimeUs now);
    void execute_atomic(const PendingRead& atomic, TimeUs now);
    void send_atomic_response(Psn psn, std::uint32_t msn, std::uint64_t original, bool retx,
                              TimeUs now);
    Refusal place_write(const Packet& packet);
    Refusal place_send(const Packet& packet);
    void refuse(const Packet& packet, Refusal refusal, TimeUs now);

    // Marks `psn` received; completes messages and runs READs that cum_psn passed.
    // Returns whether a message that consumed a receive WQE completed.
    bool accept(Psn psn, TimeUs now);
    bool on_cum_advanced(Psn old_cum, TimeUs now);
    bool complete_message(const MessageEnd& end, Psn last_psn, TimeUs now);
    ReadRun read_run(Psn psn, const ReadReq& request, std::uint32_t packets) const;
    // Records an accepted READ_REQ's run, joined with one of the same READ it overlaps.
    void remember_read(Psn psn, const ReadReq& request, std::uint32_t packets);
    // Whether the PSNs of a READ_REQ behind cum_psn that are behind it lie in one run.
    bool read_remembered(Psn psn, const ReadReq& request, std::uint32_t packets) const;
    void execute_ready_reads(TimeUs now);
    // `again`: a duplicate request for a READ that already ran (a re-read).
    void execute_read(const PendingRead& read, bool again, TimeUs now);

    // `immediate`: ACK_REQ, or a message that consumed a receive WQE completed.
    // `ahead_of_gap`: the packet is still ahead of cum_psn.
    void schedule_ack(bool immediate, bool ahead_of_gap, TimeUs now);
    bool ahead_of_gap(Psn psn) const;
    void send_ack(Syndrome syndrome, Psn nak_psn, std::uint8_t nak_arg, TimeUs now);
    void fail(std::optional<FailedWqe> failed);

    std::optional<MessageEnd>& message_end_at(Psn psn) {
        return message_ends_[psn % message_ends_.size()];
    }
    // The path at or after `cursor` that is not known FAILED; moves the cursor past it.
    std::uint16_t take_path(std::uint16_t& cursor) const;
    bool path_failed(std::uint16_t index) const;

    ReceiverConfig config_;
    MemoryModel& memory_;
    FairShareTracker* fair_share_;
    const PathSet* paths_;
    std::vector<std::uint16_t> entropies_;  // of our own paths
    // READ responses are sprayed round-robin. Re-executions start one path further each
    // time, so a re-read's first response (the one that keeps being lost) changes path.
    std::uint16_t response_cursor_ = 0;
    std::uint16_t reexecution_cursor_ = 0;

    SackBitmap window_;
    bool error_ = false;
    std::deque<PostedWqe> wqes_;
    std::uint32_t front_msn_ = 0;  // message number of wqes_.front()
    std::uint32_t completed_messages_ = 0;
    // Indexed by PSN modulo 512: every recorded end lies in [cum_psn, cum_psn + 256].
    std::array<std::optional<MessageEnd>, 2 * METAROCE_SACK_BITS> message_ends_{};
    std::vector<PendingRead> pending_reads_;
    std::vector<ReadRun> read_runs_;
    std::deque<AtomicRecord> atomic_records_;  // oldest first

    // ACK generation state.
    std::uint32_t unacked_packets_ = 0;
    std::optional<TimeUs> delayed_ack_at_;
    std::uint32_t ce_since_ack_ = 0;
    std::uint16_t echo_path_ = 0;
    std::uint32_t echo_ts_ = 0;

    std::vector<OutboundPacket> outbox_;
    std::vector<Completion> completions_;
    ReceiverCounters counters_;
};

}  // namespace metaroce
