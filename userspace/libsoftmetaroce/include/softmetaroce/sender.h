// The requester side of one connection (protocol.md sections 3.2, 7, 8, 10): segments work
// requests into PSNs, sprays them over paths, keeps the 256-PSN SACK window and the congestion
// window, detects losses (a count rule and a time rule once later packets were delivered,
// tail-loss probes, the retransmission timeout), retransmits exactly what the ACKs do not show
// received, recovers lost READ responses with re-reads, and completes work requests in order.
//
// Deterministic: the caller passes the time, calls on_timer() at next_timer(), and collects
// packets and completions with take_outbox() / take_completions(). Packets given to on_ack()
// and on_read_response() have been decoded, validated and addressed to this connection.
#pragma once

#include <rdma/metaroce_wire.h>

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "softmetaroce/completion.h"
#include "softmetaroce/congestion.h"
#include "softmetaroce/packet.h"
#include "softmetaroce/paths.h"
#include "softmetaroce/read_tracker.h"
#include "softmetaroce/reorder_tracker.h"
#include "softmetaroce/rtt_estimator.h"
#include "softmetaroce/time.h"
#include "softmetaroce/work_request.h"

namespace metaroce {

struct SenderConfig {
    std::uint32_t qpn = 0;
    std::uint32_t peer_qpn = 0;
    Psn initial_psn = 0;  // sq_psn
    // Added to every timestamp the sender puts on the wire: a secret per connection, so that
    // only who saw one of its packets can echo a timestamp in an ACK (section 12.1).
    std::uint32_t ts_offset = 0;
    std::uint32_t mtu = 1024;  // payload bytes per packet: a segment size (codec.h)
    unsigned num_paths = 8;
    std::uint8_t timeout = 14;         // verbs encoding: 4.096 us * 2^timeout; 0: wait forever
    std::uint8_t retry_cnt = 7;        // periods without progress tolerated
    std::uint8_t rnr_retry = 7;        // RNR NAKs tolerated per message; 7: infinite
    std::uint32_t max_rd_atomic = 16;  // READ_REQ parts outstanding at once
    std::uint32_t reorder_allowance =
        METAROCE_REORDER_ALLOWANCE;  // the count rule of loss detection
    std::uint32_t max_reorder_allowance = METAROCE_MAX_REORDER_ALLOWANCE;  // as it adapts
    TimeUs min_reorder_us = METAROCE_MIN_REORDER_US;  // the time rule: SRTT + max(SRTT / 2, this)
    unsigned max_tail_probes = METAROCE_MAX_PROBES;   // tail-loss probes in a row before the RTO
    // A READ is requested in parts (and re-read in runs) of at most this many response
    // packets (1..256); each part also fits the room left in the 256-PSN window.
    std::uint32_t max_read_packets = 64;
    RttConfig rtt;
    CongestionConfig congestion;
    PathConfig paths;
};

struct SenderCounters {
    std::uint64_t packets_sent = 0;  // every transmission, re-reads included
    std::uint64_t new_packets = 0;
    std::uint64_t retransmissions = 0;
    std::uint64_t reorder_losses = 0;  // packets declared lost by the count or time rule
    std::uint64_t rto_expiries = 0;
    std::uint64_t tail_probes = 0;
    std::uint64_t rereads = 0;
    std::uint64_t probes = 0;  // new packets sent on a SUSPECT or FAILED path to test it
    std::uint64_t acks = 0;
    std::uint64_t stale_acks = 0;
    std::uint64_t invalid_acks = 0;   // ACKs for PSNs never sent, NAKs for PSNs not outstanding
    std::uint64_t bad_echo_acks = 0;  // ACKs and NAKs whose ts_echo names no transmission
    std::uint64_t naks = 0;
    std::uint64_t rnr_naks = 0;
    std::uint64_t read_responses = 0;
    std::uint64_t duplicate_read_responses = 0;
    std::uint64_t unexpected_read_responses = 0;  // for no outstanding READ
    std::uint64_t bad_read_responses = 0;         // inconsistent with the READ they name
    std::uint64_t retries = 0;                    // transport timeout periods without progress
};

class Sender {
  public:
    explicit Sender(const SenderConfig& config);

    // Queues a work request. In the error state it completes at once with WR_FLUSH_ERR.
    void post(WorkRequest wr, TimeUs now);

    void on_ack(const Packet& ack, TimeUs now);
    // A READ_RESP or an ATOMIC_RESP.
    void on_read_response(const Packet& response, TimeUs now);

    std::optional<TimeUs> next_timer() const;
    void on_timer(TimeUs now);

    // Moves to the error state (for instance because the responder side failed): every
    // outstanding work request completes with WR_FLUSH_ERR.
    void enter_error() { fail(std::nullopt, WcStatus::WrFlushErr); }
    bool in_error() const { return error_; }

    std::vector<OutboundPacket> take_outbox();
    std::vector<Completion> take_completions();

    // Introspection, for tests and statistics.
    const SenderConfig& config() const { return config_; }
    // The count rule's allowance as it stands (section 8).
    std::uint32_t reorder_allowance() const { return reorder_.allowance(); }
    const SenderCounters& counters() const { return counters_; }
    const PathSet& paths() const { return paths_; }
    const CongestionControl& congestion() const { return congestion_; }
    const RttEstimator& rtt() const { return rtt_; }
    Psn next_psn() const { return snd_nxt_; }
    Psn oldest_unacked() const { return snd_una_; }
    std::uint32_t inflight() const { return window_use(); }
    std::uint32_t window() const { return congestion_.window(fair_share_); }
    std::uint16_t fair_share() const { return fair_share_; }
    std::size_t outstanding_wrs() const { return wrs_.size(); }
    bool waiting_rnr() const { return rnr_until_.has_value(); }
    // Whether the ACKs (or a READ's responses) showed this PSN received.
    bool known_delivered(Psn psn) const;

  private:
    enum class SlotKind : std::uint8_t {
        Data,         // a SEND or WRITE packet
        ReadRequest,  // the READ_REQ of a part of a READ: its first PSN
        ReadSpan,     // the other PSNs of the part: never sent, acknowledged with the request
    };
    enum class SlotState : std::uint8_t { InFlight, Lost, Delivered };

    // One PSN in [snd_una_, snd_nxt_).
    struct PsnSlot {
        SlotKind kind = SlotKind::Data;
        SlotState state = SlotState::InFlight;
        std::uint64_t wr_seq = 0;
        std::uint32_t read_index = 0;  // ReadRequest, ReadSpan: response index in the READ
        Packet packet;                 // Data, ReadRequest: what goes on the wire (path, ts aside)
        std::uint16_t path = 0;        // of the latest transmission
        TimeUs sent_at = 0;            // the latest transmission
        TimeUs first_sent_at = 0;      // the first (ReadSpan: its request's)
        std::uint64_t tx_order = 0;
        std::uint32_t transmissions = 0;

        bool on_wire() const { return kind != SlotKind::ReadSpan; }
    };

    struct WrState {
        std::uint64_t seq = 0;
        WorkRequest wr;
        bool started = false;
        bool fully_issued = false;
        std::uint32_t msn = 0;
        Psn first_psn = 0;
        std::uint32_t issued_bytes = 0;  // SEND, WRITE
        std::uint32_t undelivered_psns = 0;
        std::uint32_t rnr_naks = 0;       // consecutive, for this message
        std::optional<ReadTracker> read;  // a READ's, or an atomic's (one response)
        std::vector<std::uint8_t> read_data;
        std::optional<std::uint64_t> atomic_value;  // from the ATOMIC_RESP
        TimeUs first_sent_at = 0;                   // READ, atomic: its first request's

        std::uint32_t length() const;
        bool complete() const;
    };

    PsnSlot* slot_at(Psn psn);
    const PsnSlot* slot_at(Psn psn) const;
    WrState* find_wr(std::uint64_t seq);

    void pump(TimeUs now);
    TimeUs reorder_window() const;
    // How long after the newest READ response missing earlier ones are lost (section 8).
    TimeUs response_gap() const;
    TimeUs tail_probe_timeout() const;
    void send_retransmissions(TimeUs now);
    void send_rereads(TimeUs now);
    void send_reread(WrState& wr, ReadTracker::Range range, TimeUs now);
    // An atomic's request: the same every time it is sent, but for RETX (section 8).
    Packet atomic_request(const WrState& wr) const;
    void send_new(TimeUs now);
    bool window_fits(std::uint32_t psns) const;
    // Packets in flight against the congestion window: data packets and READ requests sent,
    // and READ responses asked for, neither acknowledged (or arrived) nor declared lost.
    std::uint32_t window_use() const;
    // What the READs issued so far hold: responses in flight (against the window), and
    // requests, parts and re-reads, with responses in flight (the read credits in use).
    struct ReadUse {
        std::uint32_t responses = 0;
        std::uint32_t requests = 0;
    };
    ReadUse read_use() const;
    bool blocked_by_fence(const WrState& wr) const;
    void issue_data_packet(WrState& wr, TimeUs now);
    void issue_read_part(WrState& wr, std::uint32_t room, TimeUs now);
    void transmit(PsnSlot& slot, bool retransmission, TimeUs now);

    // The checks of section 12.1 after those of section 12: a NAK refuses a PSN outstanding;
    // the ACK echoes a timestamp of a transmission no older than the oldest PSN outstanding
    // and the RTO's ceiling. Returns the echoed transmission's age (an RTT sample), or nullopt
    // (and counts) when the ACK must be dropped.
    std::optional<TimeUs> check_injection(const Ack& ack, TimeUs now);
    // The READ or atomic that asked for a response at `psn` and still waits for it: its PSN
    // is outstanding even once an ACK passed it (section 12.1).
    const WrState* awaiting_response(Psn psn) const;
    // Whether a fatal NAK names a PSN one of the latest re-reads asked for: the responder
    // refuses a re-read at its turn when the region was revoked meanwhile, and what it asked
    // for may have arrived from the first reading by then (section 12.1).
    bool names_reread(const Ack& ack) const;
    // The oldest PSN outstanding: snd_una_, or the first of a READ or atomic whose responses
    // are still due (its PSNs stay in the window until they arrive, section 8).
    Psn window_base() const;
    std::uint32_t wire_ts(TimeUs now) const {
        return static_cast<std::uint32_t>(now) + config_.ts_offset;
    }
    std::uint32_t apply_sack(const Ack& ack, TimeUs now);
    void mark_delivered(PsnSlot& slot, TimeUs now);
    void detect_losses(TimeUs now);
    std::optional<TimeUs> reorder_deadline() const;
    void declare_lost(PsnSlot& slot, bool by_network, TimeUs now);
    void on_progress(TimeUs now);
    void handle_nak(const Ack& ack, TimeUs now);
    // Nothing delivered for a while: a tail-loss probe, or after the probes the RTO.
    std::optional<TimeUs> quiet_deadline() const;
    void on_quiet(TimeUs now);
    void send_tail_probe(TimeUs now);
    void on_rto(TimeUs now);
    void end_rnr_wait(TimeUs now);
    void advance_una();
    void complete_ready();
    void fail_at(Psn psn, WcStatus status);
    void fail(std::optional<std::uint64_t> failed_seq, WcStatus status);
    Completion completion_for(const WrState& wr, WcStatus status) const;
    std::optional<TimeUs> progress_deadline() const;
    // Progress (or an RNR NAK, or the first work outstanding): the retry count starts again,
    // and a retry period with it.
    void restart_retries(TimeUs now);
    // Neither the probe timeout nor the RTO waits longer than the QP's local ACK timeout.
    TimeUs within_transport_timeout(TimeUs wait) const;
    std::optional<TimeUs> read_deadline(const WrState& wr) const;

    SenderConfig config_;
    std::optional<TimeUs> transport_timeout_;
    PathSet paths_;
    CongestionControl congestion_;
    RttEstimator rtt_;
    ReorderTracker reorder_;
    // Where the responses of all this sender's READs stand in the responder's sending order.
    std::shared_ptr<ResponseOrder> response_order_ = std::make_shared<ResponseOrder>();

    std::deque<WrState> wrs_;  // posted, not yet completed, in posting order
    std::uint64_t next_wr_seq_ = 0;
    std::uint64_t next_issue_seq_ = 0;  // first work request not fully segmented
    // The message number of the next SEND or WRITE with immediate.
    std::uint32_t next_msn_ = 0;

    Psn snd_una_;            // oldest PSN not known delivered
    Psn snd_nxt_;            // next PSN to assign
    Psn reorder_decay_psn_;  // the allowance decays when snd_una_ reaches it
    std::array<std::optional<PsnSlot>, METAROCE_SACK_BITS> slots_{};
    std::uint32_t inflight_ = 0;                // wire packets in flight
    std::uint32_t read_requests_inflight_ = 0;  // READ_REQs among them
    std::uint64_t next_tx_order_ = 0;
    std::optional<std::uint64_t> latest_delivered_tx_;  // newest transmission known delivered

    std::optional<Psn> highest_cum_;  // newest cum_psn seen, to ignore stale ACKs
    std::uint16_t fair_share_ = 0;
    bool error_ = false;
    bool force_retransmission_ = false;  // after an RTO the oldest loss goes even if cwnd is full

    // Tail-loss probes and the RTO: the quiet clock starts at the last delivery (or the first
    // transmission with nothing in flight); probes count those sent since.
    TimeUs last_delivery_ = 0;
    TimeUs last_tail_probe_ = 0;
    unsigned tail_probes_ = 0;
    std::optional<TimeUs> rnr_until_;
    Psn rnr_psn_ = 0;
    TimeUs last_progress_ = 0;
    std::uint32_t retries_ = 0;      // periods with a resend, without progress
    std::uint32_t periods_ = 0;      // retry periods since the last progress
    bool resent_in_period_ = false;  // something was resent in the current period
    // The latest re-reads sent (names_reread()); the oldest is overwritten.
    struct Reread {
        Psn psn = 0;
        std::uint32_t npkts = 0;
    };
    std::array<Reread, METAROCE_REREAD_HISTORY> rereads_{};
    std::uint32_t nr_rereads_ = 0;

    std::vector<OutboundPacket> outbox_;
    std::vector<Completion> completions_;
    SenderCounters counters_;
};

}  // namespace metaroce
