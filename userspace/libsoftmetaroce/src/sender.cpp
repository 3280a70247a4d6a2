#include "softmetaroce/sender.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "softmetaroce/codec.h"
#include "softmetaroce/ib_timers.h"
#include "softmetaroce/sack_bitmap.h"

namespace metaroce {
namespace {

constexpr std::uint8_t kInfiniteRnrRetry = 7;
// An echoed timestamp further back than this is not a plausible RTT sample.

constexpr std::uint32_t kWindowPsns = METAROCE_SACK_BITS;

WcOpcode wc_opcode_for(const WorkRequest& wr) {
    if (wr.opcode == WrOpcode::AtomicCmpSwp) return WcOpcode::CompSwap;
    if (wr.opcode == WrOpcode::AtomicFetchAdd) return WcOpcode::FetchAdd;
    if (wr.is_read()) return WcOpcode::RdmaRead;
    if (wr.is_write()) return WcOpcode::RdmaWrite;
    return WcOpcode::Send;
}

}  // namespace

std::uint32_t Sender::WrState::length() const {
    if (wr.is_atomic()) return METAROCE_ATOMIC_LEN;
    return wr.is_read() ? wr.read_length : static_cast<std::uint32_t>(wr.data.size());
}

bool Sender::WrState::complete() const {
    return fully_issued && undelivered_psns == 0 && (!read || read->done());
}

Sender::Sender(const SenderConfig& config)
    : config_(config),
      transport_timeout_(transport_timeout_us(config.timeout)),
      paths_(config.qpn, config.num_paths, config.paths),
      congestion_(config.congestion),
      rtt_(config.rtt),
      reorder_(config.reorder_allowance, config.max_reorder_allowance),
      snd_una_(config.initial_psn & kPsnMask),
      snd_nxt_(config.initial_psn & kPsnMask),
      reorder_decay_psn_(psn_add(config.initial_psn & kPsnMask, kWindowPsns)) {
    if (!is_valid_segment(config_.mtu)) config_.mtu = segment_size(1024);
    config_.max_read_packets = std::clamp<std::uint32_t>(config_.max_read_packets, 1, kWindowPsns);
    config_.max_rd_atomic = std::max<std::uint32_t>(config_.max_rd_atomic, 1);
}

// ---------------------------------------------------------------------------------------------
// Bookkeeping helpers

Sender::PsnSlot* Sender::slot_at(Psn psn) {
    if (!psn_in_range(psn, snd_una_, static_cast<std::uint32_t>(psn_diff(snd_nxt_, snd_una_)))) {
        return nullptr;
    }
    std::optional<PsnSlot>& slot = slots_[psn % kWindowPsns];
    return slot ? &*slot : nullptr;
}

const Sender::PsnSlot* Sender::slot_at(Psn psn) const {
    return const_cast<Sender*>(this)->slot_at(psn);
}

Sender::WrState* Sender::find_wr(std::uint64_t seq) {
    if (wrs_.empty() || seq < wrs_.front().seq) return nullptr;
    const std::uint64_t index = seq - wrs_.front().seq;
    return index < wrs_.size() ? &wrs_[index] : nullptr;
}

bool Sender::known_delivered(Psn psn) const {
    if (psn_before(psn, snd_una_)) return true;
    const PsnSlot* slot = slot_at(psn);
    return slot != nullptr && slot->state == SlotState::Delivered;
}

std::vector<OutboundPacket> Sender::take_outbox() { return std::exchange(outbox_, {}); }

std::vector<Completion> Sender::take_completions() { return std::exchange(completions_, {}); }

// ---------------------------------------------------------------------------------------------
// Posting and sending

void Sender::post(WorkRequest wr, TimeUs now) {
    WrState state;
    state.seq = next_wr_seq_++;
    state.wr = std::move(wr);
    if (error_) {
        completions_.push_back(completion_for(state, WcStatus::WrFlushErr));
        return;
    }
    if (state.wr.is_read()) {
        state.read.emplace(read_response_packets(state.wr.read_length, config_.mtu),
                           config_.reorder_allowance, response_order_);
        state.read_data.assign(state.wr.read_length, 0);
    } else if (state.wr.is_atomic()) {
        // An atomic is a READ of one response (section 8): the same tracker recovers it.
        state.read.emplace(1, config_.reorder_allowance, response_order_);
    }
    // Waiting for progress starts when work becomes outstanding.
    if (wrs_.empty()) {
        restart_retries(now);
    }
    wrs_.push_back(std::move(state));
    pump(now);
}

void Sender::pump(TimeUs now) {
    if (error_ || rnr_until_) return;
    send_retransmissions(now);
    send_rereads(now);
    send_new(now);
    force_retransmission_ = false;
}

void Sender::send_retransmissions(TimeUs now) {
    for (Psn psn = snd_una_; psn != snd_nxt_; psn = psn_next(psn)) {
        PsnSlot* slot = slot_at(psn);
        if (slot == nullptr || !slot->on_wire() || slot->state != SlotState::Lost) continue;
        if (!force_retransmission_ && window_use() >= window()) return;
        transmit(*slot, /*retransmission=*/true, now);
        force_retransmission_ = false;
    }
}

void Sender::send_rereads(TimeUs now) {
    // Re-reads wait for room in the window as retransmissions do (a forced one goes anyway),
    // and each takes a read credit as a part does.
    for (WrState& wr : wrs_) {
        if (!wr.read) continue;
        while (read_use().requests < config_.max_rd_atomic) {
            const std::uint32_t use = window_use();
            std::uint32_t room = use < window() ? window() - use : 0;
            if (force_retransmission_) room = std::max<std::uint32_t>(room, 1);
            const auto runs = wr.read->take_lost_runs(config_.max_read_packets, room, 1);
            if (runs.empty()) break;
            send_reread(wr, runs.front(), now);
            force_retransmission_ = false;
        }
    }
}

Packet Sender::atomic_request(const WrState& wr) const {
    Packet pkt;
    pkt.bth.opcode =
        wr.wr.opcode == WrOpcode::AtomicCmpSwp ? Opcode::AtomicCmpSwp : Opcode::AtomicFetchAdd;
    pkt.bth.flags = flag::kAckReq;  // as every READ_REQ (section 8)
    pkt.bth.dqpn = config_.peer_qpn;
    pkt.bth.sqpn = config_.qpn;
    pkt.bth.psn = wr.first_psn;
    pkt.ext = AtomicReq{.va = wr.wr.remote_addr,
                        .rkey = wr.wr.rkey,
                        .msn = wr.msn,
                        .swap_add = wr.wr.swap_add,
                        .compare = wr.wr.opcode == WrOpcode::AtomicCmpSwp ? wr.wr.compare : 0};
    return pkt;
}

void Sender::send_reread(WrState& wr, ReadTracker::Range range, TimeUs now) {
    Packet pkt;
    if (wr.wr.is_atomic()) {
        // A lost atomic response is asked for again with the same request, same PSN and
        // fields, and RETX: the responder answers it from its record and never executes the
        // atomic twice (sections 5 and 8).
        pkt = atomic_request(wr);
        pkt.bth.flags |= flag::kRetx;
    } else {
        // The re-read repeats the READ's message number with the PSN and offset of the first
        // response it asks for (section 3.2). Its PSNs are acknowledged already, so it has no
        // slot: the READ's tracker counts its responses in the window, and the READ's timer
        // recovers it if it is lost.
        const std::uint32_t offset = range.first * config_.mtu;
        const std::uint32_t len = std::min(range.size() * config_.mtu, wr.length() - offset);
        pkt.bth.opcode = Opcode::ReadRequest;
        pkt.bth.flags = flag::kRetx | flag::kAckReq;
        pkt.bth.dqpn = config_.peer_qpn;
        pkt.bth.sqpn = config_.qpn;
        pkt.bth.psn = psn_add(wr.first_psn, range.first);
        pkt.ext = ReadReq{.va = wr.wr.remote_addr + offset,
                          .rkey = wr.wr.rkey,
                          .len = len,
                          .offset = offset,
                          .msn = wr.msn};
    }
    // On another path than the request it replaces.
    const PathChoice choice = paths_.choose(now, wr.read->path_of(range.first),
                                            /*allow_probe=*/false, rtt_.rto());
    pkt.bth.path = choice.index;
    pkt.bth.ts = wire_ts(now);
    outbox_.push_back(OutboundPacket{std::move(pkt), paths_[choice.index].entropy});
    ++counters_.packets_sent;
    ++counters_.rereads;
    rereads_[nr_rereads_++ % rereads_.size()] =
        Reread{pkt.bth.psn, wr.wr.is_atomic() ? 1U : range.size()};
    resent_in_period_ = true;
    wr.read->on_reread(range, now);
    wr.read->set_request_path(choice.index);
}

Sender::ReadUse Sender::read_use() const {
    ReadUse use;
    for (const WrState& wr : wrs_) {
        if (wr.seq > next_issue_seq_) break;  // nothing of it (or after it) requested yet
        if (!wr.read) continue;
        use.responses += wr.read->in_flight();
        use.requests += wr.read->requests_in_flight();
    }
    return use;
}

std::uint32_t Sender::window_use() const {
    // A READ_REQ in flight is one of its part's responses, counted by its tracker.
    return inflight_ - read_requests_inflight_ + read_use().responses;
}

Psn Sender::window_base() const {
    Psn base = snd_una_;
    for (const WrState& wr : wrs_) {
        if (wr.read && wr.started && !wr.read->done() && psn_before(wr.first_psn, base)) {
            base = wr.first_psn;
        }
    }
    return base;
}

bool Sender::window_fits(std::uint32_t psns) const {
    // Every PSN in flight must stay within 256 of the oldest outstanding one, so that the
    // SACK bitmap names it and the responder still remembers a READ to re-read (section 8).
    const std::int32_t span = psn_diff(psn_add(snd_nxt_, psns - 1), window_base());
    return span >= 0 && static_cast<std::uint32_t>(span) < kWindowPsns;
}

bool Sender::blocked_by_fence(const WrState& wr) const {
    if (!wr.wr.fence) return false;
    for (const WrState& earlier : wrs_) {
        if (earlier.seq == wr.seq) return false;
        if (earlier.wr.has_responses() && !earlier.complete()) return true;
    }
    return false;
}

void Sender::send_new(TimeUs now) {
    for (std::uint32_t use = window_use(); use < window(); use = window_use()) {
        WrState* wr = find_wr(next_issue_seq_);
        if (wr == nullptr || blocked_by_fence(*wr)) return;
        if (wr->wr.has_responses()) {
            if (read_use().requests >= config_.max_rd_atomic) return;
            const auto span = static_cast<std::uint32_t>(psn_diff(snd_nxt_, window_base()));
            if (span >= kWindowPsns) return;
            // Each response asked for counts against the window until it arrives.
            issue_read_part(*wr, std::min(kWindowPsns - span, window() - use), now);
        } else {
            if (!window_fits(1)) return;
            issue_data_packet(*wr, now);
        }
        if (wr->fully_issued) ++next_issue_seq_;
    }
}

void Sender::issue_data_packet(WrState& wr, TimeUs now) {
    const WorkRequest& req = wr.wr;
    if (!wr.started) {
        // Message numbers count the messages that consume a receive WQE (the k-th selects the
        // k-th WQE); a plain WRITE or a READ carries the number of the next such message.
        wr.msn = req.consumes_receive_wqe() ? next_msn_++ : next_msn_;
        wr.first_psn = snd_nxt_;
        wr.started = true;
    }
    const std::uint32_t size = wr.length();
    const std::uint32_t offset = wr.issued_bytes;
    const std::uint32_t len = std::min(config_.mtu, size - offset);
    const bool first = offset == 0;
    const bool last = offset + len == size;

    // Every packet of a message carries its MSN and length (section 3.1); IMM with the
    // immediate value, INV with the key to invalidate, and SOLICITED go on the last packet
    // only (section 3), which also asks for an ACK (section 8).
    const bool with_imm = last && req.has_imm();
    const bool with_inv = last && req.has_inv();
    Packet pkt;
    pkt.bth.opcode = req.is_send() ? Opcode::Send : Opcode::Write;
    if (first) pkt.bth.flags |= flag::kFirst;
    if (last) pkt.bth.flags |= flag::kLast | flag::kAckReq;
    if (with_imm) pkt.bth.flags |= flag::kImm;
    if (with_inv) pkt.bth.flags |= flag::kInv;
    if (last && req.solicited && req.consumes_receive_wqe()) pkt.bth.flags |= flag::kSolicited;
    pkt.bth.dqpn = config_.peer_qpn;
    pkt.bth.sqpn = config_.qpn;
    pkt.bth.psn = snd_nxt_;
    pkt.ext = Deth{.addr = req.is_write() ? req.remote_addr + offset : offset,
                   .key = req.is_write() ? req.rkey : 0,
                   .msn = wr.msn,
                   .msg_len = size,
                   .imm = with_imm ? req.imm : (with_inv ? req.invalidate_rkey : 0)};
    pkt.payload.assign(req.data.begin() + offset, req.data.begin() + offset + len);

    wr.issued_bytes += len;
    if (last) wr.fully_issued = true;
    ++wr.undelivered_psns;

    std::optional<PsnSlot>& slot = slots_[snd_nxt_ % kWindowPsns];
    slot = PsnSlot{};
    slot->kind = SlotKind::Data;
    slot->wr_seq = wr.seq;
    slot->packet = std::move(pkt);
    snd_nxt_ = psn_next(snd_nxt_);
    ++counters_.new_packets;
    transmit(*slot, /*retransmission=*/false, now);
}

void Sender::issue_read_part(WrState& wr, std::uint32_t room, TimeUs now) {
    const WorkRequest& req = wr.wr;
    if (!wr.started) {
        wr.msn = next_msn_;
        wr.first_psn = snd_nxt_;
        wr.first_sent_at = now;
        wr.started = true;
    }
    // The next part: as many response packets as allowed, taking their PSNs now.
    const std::uint32_t count =
        std::min({wr.read->packets() - wr.read->issued(), config_.max_read_packets, room});
    const ReadTracker::Range part = wr.read->issue_part(count);
    const std::uint32_t offset = part.first * config_.mtu;

    Packet pkt;
    if (req.is_atomic()) {
        pkt = atomic_request(wr);
    } else {
        pkt.bth.opcode = Opcode::ReadRequest;
        pkt.bth.flags = flag::kAckReq;  // every READ_REQ asks for an ACK (section 8)
        pkt.bth.dqpn = config_.peer_qpn;
        pkt.bth.sqpn = config_.qpn;
        pkt.bth.psn = snd_nxt_;
        pkt.ext = ReadReq{.va = req.remote_addr + offset,
                          .rkey = req.rkey,
                          .len = std::min(part.size() * config_.mtu, wr.length() - offset),
                          .offset = offset,
                          .msn = wr.msn};
    }

    if (wr.read->all_issued()) wr.fully_issued = true;
    wr.undelivered_psns += part.size();
    PsnSlot* request = nullptr;
    for (std::uint32_t k = 0; k < part.size(); ++k) {
        std::optional<PsnSlot>& slot = slots_[psn_add(snd_nxt_, k) % kWindowPsns];
        slot = PsnSlot{};
        slot->kind = k == 0 ? SlotKind::ReadRequest : SlotKind::ReadSpan;
        slot->wr_seq = wr.seq;
        slot->read_index = part.first + k;
        slot->first_sent_at = now;
        if (k == 0) {
            slot->packet = std::move(pkt);
            request = &*slot;
        }
    }
    snd_nxt_ = psn_add(snd_nxt_, part.size());
    ++counters_.new_packets;
    transmit(*request, /*retransmission=*/false, now);
    wr.read->set_request_path(request->path);
}

void Sender::transmit(PsnSlot& slot, bool retransmission, TimeUs now) {
    std::optional<std::uint16_t> avoid;
    if (retransmission) avoid = slot.path;  // resend on another path than the lost copy's
    const PathChoice choice = paths_.choose(now, avoid, /*allow_probe=*/!retransmission,
                                            rtt_.srtt().value_or(rtt_.rto()));

    Packet pkt = slot.packet;
    pkt.bth.path = choice.index;
    pkt.bth.ts = wire_ts(now);
    // ACK_REQ: the last packet of a message and every READ_REQ (already set), and every
    // retransmission (section 8).
    if (retransmission) {
        pkt.bth.flags |= flag::kRetx | flag::kAckReq;
        resent_in_period_ = true;
    }

    // The quiet clock of tail-loss probes starts with the first transmission (probes in a row
    // are counted until something is delivered).
    if (inflight_ == 0) last_delivery_ = now;
    slot.state = SlotState::InFlight;
    slot.path = choice.index;
    slot.sent_at = now;
    if (slot.transmissions == 0) slot.first_sent_at = now;
    slot.tx_order = next_tx_order_++;
    ++slot.transmissions;
    ++inflight_;
    if (slot.kind == SlotKind::ReadRequest) {
        ++read_requests_inflight_;
        if (WrState* wr = find_wr(slot.wr_seq); retransmission && wr != nullptr && wr->read)
            wr->read->on_part_request_resent(slot.read_index);
    }
    paths_.on_sent(choice.index, choice, now);

    outbox_.push_back(OutboundPacket{std::move(pkt), paths_[choice.index].entropy});
    ++counters_.packets_sent;
    if (retransmission) ++counters_.retransmissions;
    if (choice.probe) ++counters_.probes;
}

// ---------------------------------------------------------------------------------------------
// ACKs and NAKs

void Sender::on_ack(const Packet& packet, TimeUs now) {
    if (error_) return;
    const Ack& ack = packet.ack();
    ++counters_.acks;

    // An ACK for PSNs never sent is dropped (section 12): cum_psn past snd_nxt, or a SACK bit
    // for a PSN at or after snd_nxt.
    const std::int32_t unsent_from = psn_diff(snd_nxt_, ack.cum_psn);
    if (unsent_from < 0) {
        ++counters_.invalid_acks;
        return;
    }
    const SackBitmap sack = SackBitmap::from_wire(ack.cum_psn, ack.sack);
    for (unsigned i = static_cast<unsigned>(std::max(0, unsent_from - 1)); i < SackBitmap::kBits;
         ++i) {
        if (sack.bit(i)) {
            ++counters_.invalid_acks;
            return;
        }
    }

    // Nothing outstanding: an old ACK, with nothing to tell. A NAK may still refuse a READ
    // response due behind every PSN acknowledged (section 12.1), and is checked below.
    const bool responses_due = std::any_of(wrs_.begin(), wrs_.end(), [](const WrState& wr) {
        return wr.read && wr.started && !wr.read->done();
    });
    if (snd_una_ == snd_nxt_ && !(ack.is_nak() && responses_due)) return;
    const std::optional<TimeUs> rtt = check_injection(ack, now);
    if (!rtt) return;

    reorder_.begin_ack();
    // An ACK behind the newest one carries nothing new except its NAK and ECN fields.
    const bool stale = highest_cum_ && psn_before(ack.cum_psn, *highest_cum_);
    if (stale) {
        ++counters_.stale_acks;
        congestion_.on_ack(0, ack.ce_count);
    } else {
        highest_cum_ = ack.cum_psn;
        fair_share_ = ack.fair_share;
        rtt_.on_sample(*rtt);
        paths_.on_echo(ack.echo_path, *rtt, ack.ce_count);
        const std::uint32_t newly_acked = apply_sack(ack, now);
        congestion_.on_ack(newly_acked, ack.ce_count);
        detect_losses(now);
    }
    if (ack.is_nak()) handle_nak(ack, now);
    if (error_) return;
    advance_una();
    complete_ready();
    pump(now);
}

std::optional<TimeUs> Sender::check_injection(const Ack& ack, TimeUs now) {
    if (ack.is_nak()) {
        // A responder refuses a READ part (or an atomic) it accepted when the region is
        // revoked before its turn (section 6): behind cum_psn, with its response still due.
        const PsnSlot* slot = slot_at(ack.nak_psn);
        const bool refusable = slot != nullptr && slot->state != SlotState::Delivered &&
                               !psn_before(ack.nak_psn, ack.cum_psn);
        if (!refusable && awaiting_response(ack.nak_psn) == nullptr && !names_reread(ack)) {
            ++counters_.invalid_acks;
            return std::nullopt;
        }
    }
    // The oldest packet outstanding: at snd_una_, or a request whose responses are still due.
    const PsnSlot* oldest = slot_at(snd_una_);
    TimeUs since_oldest = oldest != nullptr ? now - oldest->first_sent_at : 0;
    for (const WrState& wr : wrs_) {
        if (wr.read && wr.started && !wr.read->done()) {
            since_oldest = std::max(since_oldest, now - wr.first_sent_at);
        }
    }
    const TimeUs age = static_cast<std::uint32_t>(wire_ts(now) - ack.ts_echo);
    if (age > std::min<TimeUs>(since_oldest, METAROCE_MAX_RTO_US)) {
        ++counters_.bad_echo_acks;
        return std::nullopt;
    }
    return age;
}

std::uint32_t Sender::apply_sack(const Ack& ack, TimeUs now) {
    const SackBitmap sack = SackBitmap::from_wire(ack.cum_psn, ack.sack);
    std::uint32_t newly_acked = 0;
    bool progress = false;
    for (Psn psn = snd_una_; psn != snd_nxt_; psn = psn_next(psn)) {
        PsnSlot* slot = slot_at(psn);
        if (slot == nullptr || slot->state == SlotState::Delivered || !sack.received(psn)) {
            continue;
        }
        if (slot->on_wire()) ++newly_acked;
        mark_delivered(*slot, now);
        progress = true;
    }
    if (progress) on_progress(now);
    return newly_acked;
}

void Sender::mark_delivered(PsnSlot& slot, TimeUs now) {
    if (slot.on_wire()) {
        if (slot.state == SlotState::InFlight) {
            --inflight_;
            if (slot.kind == SlotKind::ReadRequest) --read_requests_inflight_;
            // Credit the path only when the delivered copy is unambiguous.
            if (slot.transmissions == 1) {
                paths_.on_delivered(slot.path);
            } else {
                paths_.on_withdrawn(slot.path);
            }
        }
        reorder_.on_delivered(slot.tx_order, slot.transmissions == 1);
        if (!latest_delivered_tx_ || slot.tx_order > *latest_delivered_tx_) {
            latest_delivered_tx_ = slot.tx_order;
        }
    }
    slot.state = SlotState::Delivered;
    WrState* wr = find_wr(slot.wr_seq);
    if (wr == nullptr) return;
    --wr->undelivered_psns;
    wr->rnr_naks = 0;  // the message progresses
    if (wr->read) wr->read->on_accepted(slot.read_index, now);
}

TimeUs Sender::reorder_window() const {
    const std::optional<TimeUs> srtt = rtt_.srtt();
    if (!srtt) return config_.rtt.initial_rto_us;
    return *srtt + response_gap();
}

TimeUs Sender::response_gap() const {
    return std::max(rtt_.srtt().value_or(0) / 2, config_.min_reorder_us);
}

void Sender::detect_losses(TimeUs now) {
    // Once a transmission after it was delivered, a packet is lost when a transmission at least
    // `reorder_allowance` after it was (the count rule), or when it has been out longer than
    // the reordering window (the time rule).
    if (!latest_delivered_tx_) return;
    const std::optional<std::uint64_t> threshold = reorder_.loss_threshold();
    const TimeUs window = reorder_window();
    for (Psn psn = snd_una_; psn != snd_nxt_; psn = psn_next(psn)) {
        PsnSlot* slot = slot_at(psn);
        if (slot == nullptr || !slot->on_wire() || slot->state != SlotState::InFlight) continue;
        if (slot->tx_order >= *latest_delivered_tx_) continue;
        if ((threshold && slot->tx_order < *threshold) || now >= slot->sent_at + window) {
            declare_lost(*slot, /*by_network=*/true, now);
            ++counters_.reorder_losses;
        }
    }
}

std::optional<TimeUs> Sender::reorder_deadline() const {
    if (!latest_delivered_tx_) return std::nullopt;
    std::optional<TimeUs> oldest;
    for (Psn psn = snd_una_; psn != snd_nxt_; psn = psn_next(psn)) {
        const PsnSlot* slot = slot_at(psn);
        if (slot == nullptr || !slot->on_wire() || slot->state != SlotState::InFlight) continue;
        if (slot->tx_order >= *latest_delivered_tx_) continue;
        if (!oldest || slot->sent_at < *oldest) oldest = slot->sent_at;
    }
    if (!oldest) return std::nullopt;
    return *oldest + reorder_window();
}

void Sender::declare_lost(PsnSlot& slot, bool by_network, TimeUs now) {
    slot.state = SlotState::Lost;
    --inflight_;
    if (slot.kind == SlotKind::ReadRequest) {
        --read_requests_inflight_;
        // Responses never asked for (as far as we know) free their room in the window.
        if (WrState* wr = find_wr(slot.wr_seq); wr != nullptr && wr->read)
            wr->read->on_part_request_lost(slot.read_index);
    }
    if (by_network) {
        paths_.on_lost(slot.path, now);
    } else {
        paths_.on_withdrawn(slot.path);
    }
}

void Sender::on_progress(TimeUs now) {
    restart_retries(now);
    rtt_.on_progress();
    last_delivery_ = now;
    tail_probes_ = 0;
}

void Sender::handle_nak(const Ack& ack, TimeUs now) {
    ++counters_.naks;
    switch (ack.syndrome) {
        case Syndrome::Ack:
            return;
        case Syndrome::RnrNak: {
            ++counters_.rnr_naks;
            PsnSlot* slot = slot_at(ack.nak_psn);
            // Already waiting (the other packets of the message are refused too), or a stale
            // NAK for a PSN since delivered: nothing to do.
            if (rnr_until_ || slot == nullptr || slot->state == SlotState::Delivered) return;
            WrState* wr = find_wr(slot->wr_seq);
            if (wr == nullptr) return;
            if (++wr->rnr_naks > config_.rnr_retry && config_.rnr_retry != kInfiniteRnrRetry) {
                fail(wr->seq, WcStatus::RnrRetryExcErr);
                return;
            }
            if (slot->on_wire() && slot->state == SlotState::InFlight) {
                declare_lost(*slot, /*by_network=*/false, now);
            }
            rnr_until_ = now + rnr_timer_us(ack.nak_arg);
            rnr_psn_ = ack.nak_psn;
            // The responder is alive: an RNR NAK is progress for the transport timer.
            restart_retries(now);
            return;
        }
        case Syndrome::RemoteAccess:
            fail_at(ack.nak_psn, WcStatus::RemAccessErr);
            return;
        case Syndrome::InvalidRequest:
            fail_at(ack.nak_psn, WcStatus::RemInvReqErr);
            return;
        case Syndrome::RemoteOperational:
            fail_at(ack.nak_psn, WcStatus::RemOpErr);
            return;
        case Syndrome::Version:
            // The peer does not speak our version: nothing we send can succeed.
            fail_at(ack.nak_psn, WcStatus::RemInvReqErr);
            return;
    }
}

void Sender::end_rnr_wait(TimeUs now) {
    rnr_until_.reset();
    // Resend from the refused PSN: whatever is still in flight after it was refused too.
    if (!psn_before(rnr_psn_, snd_una_)) {
        for (Psn psn = rnr_psn_; psn != snd_nxt_; psn = psn_next(psn)) {
            PsnSlot* slot = slot_at(psn);
            if (slot != nullptr && slot->on_wire() && slot->state == SlotState::InFlight) {
                declare_lost(*slot, /*by_network=*/false, now);
            }
        }
    }
    force_retransmission_ = true;
    restart_retries(now);
}

// ---------------------------------------------------------------------------------------------
// READ responses

void Sender::on_read_response(const Packet& packet, TimeUs now) {
    if (error_) return;
    const Psn psn = packet.bth.psn;
    WrState* wr = nullptr;
    for (WrState& candidate : wrs_) {
        if (candidate.read && psn_in_range(psn, candidate.first_psn, candidate.read->issued())) {
            wr = &candidate;
            break;
        }
    }
    if (wr == nullptr) {
        ++counters_.unexpected_read_responses;  // e.g. a late copy for a completed READ
        return;
    }

    // Response k carries the READ's bytes [k * MTU, ...) and the message length of the request
    // it answers: the READ's end, or an MTU boundary where a part or a re-read ends.
    const auto k = static_cast<std::uint32_t>(psn_diff(psn, wr->first_psn));
    const std::uint32_t offset = k * config_.mtu;
    const std::uint32_t expected_len = std::min(config_.mtu, wr->length() - offset);
    const Deth& d = packet.deth();
    // An atomic is answered by an ATOMIC_RESP (the codec checked its fixed fields), a READ
    // by READ_RESPs.
    const bool atomic_response = packet.bth.opcode == Opcode::AtomicResponse;
    if (atomic_response != wr->wr.is_atomic() || d.addr != offset || d.msn != wr->msn ||
        packet.payload.size() != expected_len || d.msg_len > wr->length() ||
        (d.msg_len != wr->length() && d.msg_len % config_.mtu != 0)) {
        ++counters_.bad_read_responses;
        return;
    }
    ++counters_.read_responses;

    // A response proves the responder accepted the request for its part, whatever happened
    // to the ACK.
    const ReadTracker::Range part = wr->read->part_containing(k);
    std::uint32_t newly_acked = 0;
    reorder_.begin_ack();
    for (std::uint32_t i = part.first; i < part.end; ++i) {
        PsnSlot* slot = slot_at(psn_add(wr->first_psn, i));
        if (slot == nullptr || slot->state == SlotState::Delivered) continue;
        if (slot->on_wire()) ++newly_acked;
        mark_delivered(*slot, now);
    }
    if (newly_acked != 0) congestion_.on_ack(newly_acked, 0);

    wr->read->set_reorder_allowance(reorder_.allowance());
    const ReadTracker::Arrival arrival = wr->read->on_response(k, now, response_gap());
    // The response may follow responses of earlier READs the responder sent before it.
    for (WrState& other : wrs_) {
        if (!other.read || &other == wr) continue;
        other.read->set_reorder_allowance(reorder_.allowance());
        other.read->detect_losses(now, response_gap());
    }
    if (arrival.is_new) {
        if (atomic_response) {
            // Big-endian on the wire; the requester keeps it in its own byte order.
            std::uint64_t value = 0;
            for (const std::uint8_t byte : packet.payload) value = value << 8 | byte;
            wr->atomic_value = value;
        } else {
            std::copy(packet.payload.begin(), packet.payload.end(), wr->read_data.begin() + offset);
        }
        on_progress(now);
    } else {
        ++counters_.duplicate_read_responses;
    }

    advance_una();
    complete_ready();
    pump(now);
}

// ---------------------------------------------------------------------------------------------
// Timers

void Sender::restart_retries(TimeUs now) {
    last_progress_ = now;
    retries_ = 0;
    periods_ = 0;
    resent_in_period_ = false;
}

std::optional<TimeUs> Sender::progress_deadline() const {
    if (!transport_timeout_ || wrs_.empty() || rnr_until_) return std::nullopt;
    return last_progress_ + (std::uint64_t{periods_} + 1) * *transport_timeout_;
}

std::optional<TimeUs> Sender::read_deadline(const WrState& wr) const {
    if (!wr.read) return std::nullopt;
    return wr.read->deadline(within_transport_timeout(rtt_.rto()),
                             within_transport_timeout(config_.rtt.max_rto_us));
}

TimeUs Sender::within_transport_timeout(TimeUs wait) const {
    return transport_timeout_ ? std::min(wait, *transport_timeout_) : wait;
}

TimeUs Sender::tail_probe_timeout() const {
    const std::optional<TimeUs> srtt = rtt_.srtt();
    if (!srtt) return within_transport_timeout(config_.rtt.initial_rto_us);
    // A jittery path (a large RTTVAR) waits longer before a spurious probe.
    return within_transport_timeout(std::max(
        {2 * *srtt, *srtt + 4 * rtt_.rttvar().value_or(0), TimeUs{METAROCE_MIN_PROBE_US}}));
}

std::optional<TimeUs> Sender::quiet_deadline() const {
    if (inflight_ == 0 && read_use().responses == 0) return std::nullopt;
    if (tail_probes_ < config_.max_tail_probes) {
        return (tail_probes_ == 0 ? last_delivery_ : last_tail_probe_) + tail_probe_timeout();
    }
    // After the probes: the RTO, once nothing was delivered for an RTO and some packet has
    // been out that long.
    std::optional<TimeUs> oldest;
    for (Psn psn = snd_una_; psn != snd_nxt_; psn = psn_next(psn)) {
        const PsnSlot* slot = slot_at(psn);
        if (slot == nullptr || !slot->on_wire() || slot->state != SlotState::InFlight) continue;
        if (!oldest || slot->sent_at < *oldest) oldest = slot->sent_at;
    }
    if (!oldest) return std::nullopt;
    return std::max(last_delivery_, *oldest) + within_transport_timeout(rtt_.rto());
}

std::optional<TimeUs> Sender::next_timer() const {
    if (error_) return std::nullopt;
    if (rnr_until_) return rnr_until_;
    std::optional<TimeUs> next;
    const auto consider = [&next](std::optional<TimeUs> t) {
        if (t && (!next || *t < *next)) next = t;
    };
    consider(progress_deadline());
    consider(reorder_deadline());
    consider(quiet_deadline());
    const TimeUs gap = response_gap();
    for (const WrState& wr : wrs_) {
        consider(read_deadline(wr));
        if (wr.read) consider(wr.read->reorder_deadline(gap));
    }
    return next;
}

void Sender::on_timer(TimeUs now) {
    if (error_) return;
    if (rnr_until_) {
        if (now < *rnr_until_) return;
        end_rnr_wait(now);
    }

    // Transport timeout: each period without progress in which something was resent is one
    // retry (section 8).
    for (std::optional<TimeUs> deadline = progress_deadline(); deadline && now >= *deadline;
         deadline = progress_deadline()) {
        ++periods_;
        if (!resent_in_period_) continue;
        resent_in_period_ = false;
        ++retries_;
        ++counters_.retries;
        if (retries_ > config_.retry_cnt) {
            fail(wrs_.front().seq, WcStatus::RetryExcErr);
            return;
        }
    }

    detect_losses(now);
    on_quiet(now);

    const TimeUs gap = response_gap();
    for (WrState& wr : wrs_) {
        if (!wr.read) continue;
        wr.read->set_reorder_allowance(reorder_.allowance());
        wr.read->detect_losses(now, gap);
        const std::optional<TimeUs> deadline = read_deadline(wr);
        if (deadline && now >= *deadline) wr.read->on_timeout(now);
    }
    pump(now);
}

void Sender::on_quiet(TimeUs now) {
    const std::optional<TimeUs> deadline = quiet_deadline();
    if (!deadline || now < *deadline) return;
    if (tail_probes_ < config_.max_tail_probes) {
        send_tail_probe(now);
    } else {
        on_rto(now);
    }
}

void Sender::send_tail_probe(TimeUs now) {
    // Nothing delivered for a while: perhaps the last packets were lost and nothing after them
    // can reveal it. Resending the newest packet in flight draws a SACK that does. The loss is
    // not held against its path.
    // A READ response asked for is a packet in flight too (section 8): the newest may be one,
    // and then it is re-read.
    ++tail_probes_;
    last_tail_probe_ = now;
    PsnSlot* newest_slot = nullptr;
    Psn newest_slot_psn = snd_nxt_;
    while (newest_slot == nullptr && newest_slot_psn != snd_una_) {
        newest_slot_psn = psn_add(newest_slot_psn, -1);
        PsnSlot* slot = slot_at(newest_slot_psn);
        if (slot != nullptr && slot->on_wire() && slot->state == SlotState::InFlight) {
            newest_slot = slot;
        }
    }
    // Work requests take their PSNs in posting order: the newest response in flight is in the
    // last READ that has one.
    WrState* read = nullptr;
    std::optional<std::uint32_t> index;
    for (auto wr = wrs_.rbegin(); wr != wrs_.rend() && !index; ++wr) {
        if (wr->read && (index = wr->read->newest_in_flight())) read = &*wr;
    }
    if (index && (newest_slot == nullptr ||
                  psn_diff(psn_add(read->first_psn, *index), newest_slot_psn) > 0)) {
        read->read->on_probe(*index);
    } else if (newest_slot != nullptr) {
        declare_lost(*newest_slot, /*by_network=*/false, now);
    } else {
        return;
    }
    ++counters_.tail_probes;
    force_retransmission_ = true;
}

void Sender::on_rto(TimeUs now) {
    // Every packet out longer than the RTO is presumed lost (not held against the paths: a
    // timeout hits them all); the oldest goes out first, even if the halved window is full.
    // The next timeout is a full, backed-off RTO away.
    const TimeUs rto = within_transport_timeout(rtt_.rto());
    bool any = false;
    for (Psn psn = snd_una_; psn != snd_nxt_; psn = psn_next(psn)) {
        PsnSlot* slot = slot_at(psn);
        if (slot != nullptr && slot->on_wire() && slot->state == SlotState::InFlight &&
            now >= slot->sent_at + rto) {
            declare_lost(*slot, /*by_network=*/false, now);
            any = true;
        }
    }
    if (!any) return;
    ++counters_.rto_expiries;
    rtt_.on_timeout();
    congestion_.on_rto();
    last_delivery_ = now;
    force_retransmission_ = true;
}

// ---------------------------------------------------------------------------------------------
// Completion and failure

void Sender::advance_una() {
    while (snd_una_ != snd_nxt_) {
        std::optional<PsnSlot>& slot = slots_[snd_una_ % kWindowPsns];
        if (slot && slot->state != SlotState::Delivered) break;
        slot.reset();
        snd_una_ = psn_next(snd_una_);
    }
    // Once per window of data the count rule's allowance falls back by an eighth.
    if (!psn_before(snd_una_, reorder_decay_psn_)) {
        reorder_.decay();
        reorder_decay_psn_ = psn_add(snd_una_, kWindowPsns);
    }
}

Completion Sender::completion_for(const WrState& wr, WcStatus status) const {
    Completion c;
    c.wr_id = wr.wr.wr_id;
    c.status = status;
    c.opcode = wc_opcode_for(wr.wr);
    c.byte_len = wr.length();
    if (status == WcStatus::Success && wr.wr.is_read()) c.read_data = wr.read_data;
    if (status == WcStatus::Success && wr.wr.is_atomic() && wr.atomic_value) {
        c.atomic_value = wr.atomic_value;
        c.read_data.resize(sizeof(std::uint64_t));
        std::memcpy(c.read_data.data(), &*wr.atomic_value, sizeof(std::uint64_t));
    }
    return c;
}

void Sender::complete_ready() {
    while (!wrs_.empty() && wrs_.front().complete()) {
        const WrState& wr = wrs_.front();
        if (wr.wr.signaled) completions_.push_back(completion_for(wr, WcStatus::Success));
        wrs_.pop_front();
    }
    if (wrs_.empty()) next_issue_seq_ = next_wr_seq_;
}

bool Sender::names_reread(const Ack& ack) const {
    if (ack.syndrome == Syndrome::RnrNak) return false;
    return std::any_of(rereads_.begin(), rereads_.end(), [&](const Reread& r) {
        const std::int32_t k = psn_diff(ack.nak_psn, r.psn);
        return k >= 0 && static_cast<std::uint32_t>(k) < r.npkts;
    });
}

const Sender::WrState* Sender::awaiting_response(Psn psn) const {
    for (const WrState& wr : wrs_) {
        if (!wr.read || !wr.started || !psn_in_range(psn, wr.first_psn, wr.read->issued())) {
            continue;
        }
        const auto index = static_cast<std::uint32_t>(psn_diff(psn, wr.first_psn));
        return wr.read->received(index) ? nullptr : &wr;
    }
    return nullptr;
}

void Sender::fail_at(Psn psn, WcStatus status) {
    const PsnSlot* slot = slot_at(psn);
    const WrState* awaiting = awaiting_response(psn);
    // A late fatal NAK (section 12.1) may name a PSN of a work request that has finished: it
    // refuses the first one after it that has not.
    const WrState* unfinished = nullptr;
    if (slot != nullptr) {
        for (const WrState& wr : wrs_) {
            if (wr.seq >= slot->wr_seq && !wr.complete()) {
                unfinished = &wr;
                break;
            }
        }
    }
    if (unfinished != nullptr) {
        fail(unfinished->seq, status);
    } else if (awaiting != nullptr) {
        fail(awaiting->seq, status);
    } else if (!wrs_.empty()) {
        fail(wrs_.front().seq, status);
    } else {
        fail(std::nullopt, status);
    }
}

void Sender::fail(std::optional<std::uint64_t> failed_seq, WcStatus status) {
    if (error_) return;
    error_ = true;
    // Completions stay in posting order: finished work before the failed request succeeds,
    // unfinished work is flushed, the failed request carries the error.
    for (const WrState& wr : wrs_) {
        WcStatus s = WcStatus::WrFlushErr;
        if (failed_seq && wr.seq == *failed_seq) {
            s = status;
        } else if (failed_seq && wr.seq < *failed_seq && wr.complete()) {
            s = WcStatus::Success;
        }
        if (s != WcStatus::Success || wr.wr.signaled) completions_.push_back(completion_for(wr, s));
    }
    wrs_.clear();
    slots_.fill(std::nullopt);
    snd_una_ = snd_nxt_;
    inflight_ = 0;
    read_requests_inflight_ = 0;
    next_issue_seq_ = next_wr_seq_;
    rnr_until_.reset();
}

}  // namespace metaroce
