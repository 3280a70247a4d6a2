#include "softmetaroce/receiver.h"

#include <algorithm>
#include <utility>

#include "softmetaroce/paths.h"

namespace metaroce {
namespace {

constexpr std::uint32_t kMaxCeCount = 0xffff;
Completion receive_completion(std::uint64_t wr_id, WcStatus status) {
    Completion c;
    c.wr_id = wr_id;
    c.status = status;
    c.opcode = WcOpcode::Recv;
    return c;
}

}  // namespace

Receiver::Receiver(const ReceiverConfig& config, MemoryModel& memory, FairShareTracker* fair_share,
                   const PathSet* paths)
    : config_(config),
      memory_(memory),
      fair_share_(fair_share),
      paths_(paths),
      window_(config.expected_psn) {
    if (!is_valid_segment(config_.mtu)) config_.mtu = segment_size(1024);
    config_.atomic_records = std::max(config_.atomic_records, config_.max_dest_rd_atomic);
    const unsigned count = std::clamp(config_.num_paths, 1u, PathSet::kMaxPaths);
    for (unsigned i = 0; i < count; ++i) entropies_.push_back(PathSet::entropy_for(config_.qpn, i));
}

bool Receiver::post_recv(ReceiveWqe wqe) {
    if (!memory_.valid_receive_buffer(wqe)) return false;
    if (error_) {
        completions_.push_back(receive_completion(wqe.wr_id, WcStatus::WrFlushErr));
        return true;
    }
    wqes_.push_back(PostedWqe{std::move(wqe), std::nullopt});
    return true;
}

void Receiver::on_packet(const Packet& packet, bool ce, TimeUs now) {
    if (error_) {
        ++counters_.dropped_in_error;
        return;
    }
    const Opcode op = packet.bth.opcode;
    if (op != Opcode::Send && op != Opcode::Write && op != Opcode::ReadRequest &&
        !is_atomic_request(op)) {
        ++counters_.unexpected_opcode;
        return;
    }
    ++counters_.packets;
    if (ce) {
        ++counters_.ce_marked;
        ce_since_ack_ = std::min(ce_since_ack_ + 1, kMaxCeCount);
    }
    // The latest packet is the one any ACK it triggers (now or later) echoes.
    echo_path_ = packet.bth.path;
    echo_ts_ = packet.bth.ts;
    if (fair_share_ != nullptr) fair_share_->note_activity(config_.qpn, now);

    if (op == Opcode::ReadRequest) {
        handle_read_request(packet, now);
    } else if (is_atomic_request(op)) {
        handle_atomic_request(packet, now);
    } else {
        handle_data(packet, now);
    }
}

void Receiver::handle_data(const Packet& packet, TimeUs now) {
    const Psn psn = packet.bth.psn;
    switch (window_.locate(psn)) {
        case WindowPosition::Duplicate:
            // Placement is idempotent but not redone; an ACK tells a sender that lost ACKs
            // where things stand.
            ++counters_.duplicates;
            send_ack(Syndrome::Ack, 0, 0, now);
            return;
        case WindowPosition::Beyond:
            ++counters_.out_of_window;
            return;
        case WindowPosition::New:
            break;
    }

    const Refusal refusal =
        packet.bth.opcode == Opcode::Send ? place_send(packet) : place_write(packet);
    if (refusal != Refusal::None) {
        refuse(packet, refusal, now);
        return;
    }
    ++counters_.placed;

    if (packet.bth.has(flag::kLast)) {
        const Deth& d = packet.deth();
        MessageKind kind = MessageKind::Write;
        if (packet.bth.opcode == Opcode::Send) {
            kind = MessageKind::Send;
        } else if (packet.bth.has(flag::kImm)) {
            kind = MessageKind::WriteWithImm;
        }
        std::optional<std::uint32_t> imm;
        if (packet.bth.has(flag::kImm)) imm = d.imm;
        // INV, with the key, comes with the last packet only (the codec checked).
        std::optional<std::uint32_t> invalidate_rkey;
        if (packet.bth.has(flag::kInv)) invalidate_rkey = d.imm;
        // IMM and SOLICITED come with the last packet (earlier ones may repeat them).
        message_end_at(psn) = MessageEnd{.kind = kind,
                                         .msn = d.msn,
                                         .msg_len = d.msg_len,
                                         .imm = imm,
                                         .invalidate_rkey = invalidate_rkey,
                                         .solicited = packet.bth.has(flag::kSolicited)};
    }
    const bool completed_wqe = accept(psn, now);
    if (error_) return;
    schedule_ack(packet.bth.has(flag::kAckReq) || completed_wqe, ahead_of_gap(psn), now);
}

Receiver::Refusal Receiver::place_write(const Packet& packet) {
    const Deth& d = packet.deth();
    // A zero-length WRITE names no memory: its key and address are not checked (IBA C9-88).
    const bool empty = packet.payload.empty();
    if (!empty && memory_.check(d.key, d.addr, packet.payload.size(), access::kRemoteWrite) !=
                      AccessResult::Ok) {
        return Refusal::RemoteAccess;
    }
    // A WRITE with immediate needs its receive WQE when its last packet arrives (it completes
    // into it); the data itself goes to the region.
    if (packet.bth.has(flag::kImm) && packet.bth.has(flag::kLast)) {
        const auto index = static_cast<std::int32_t>(d.msn - front_msn_);
        if (index < 0) return Refusal::InvalidRequest;
        if (static_cast<std::size_t>(index) >= wqes_.size()) return Refusal::Rnr;
    }
    if (!empty) memory_.write(d.key, d.addr, packet.payload, access::kRemoteWrite);
    return Refusal::None;
}

Receiver::Refusal Receiver::place_send(const Packet& packet) {
    const Deth& d = packet.deth();
    const auto index = static_cast<std::int32_t>(d.msn - front_msn_);
    if (index < 0) return Refusal::InvalidRequest;  // that WQE was consumed already
    if (static_cast<std::size_t>(index) >= wqes_.size()) return Refusal::Rnr;
    PostedWqe& posted = wqes_[static_cast<std::size_t>(index)];
    if (d.addr + packet.payload.size() > posted.wqe.total_length()) return Refusal::LengthError;
    if (posted.msg_len && *posted.msg_len != d.msg_len) return Refusal::InvalidRequest;
    // A SEND with invalidate must name a key a fast-registration region of this PD is valid
    // with now (section 6); the invalidation itself waits for the message to complete.
    if (packet.bth.has(flag::kInv) && !memory_.fast_reg_valid(d.imm)) {
        return Refusal::BadInvalidate;
    }
    posted.msg_len = d.msg_len;
    memory_.scatter(posted.wqe, d.addr, packet.payload);
    return Refusal::None;
}

void Receiver::refuse(const Packet& packet, Refusal refusal, TimeUs now) {
    const Psn psn = packet.bth.psn;
    switch (refusal) {
        case Refusal::None:
            return;
        case Refusal::Rnr:
            ++counters_.rnr_naks;
            send_ack(Syndrome::RnrNak, psn, config_.min_rnr_timer, now);
            return;
        case Refusal::RemoteAccess:
            ++counters_.access_naks;
            send_ack(Syndrome::RemoteAccess, psn, 0, now);
            fail(std::nullopt);
            return;
        case Refusal::InvalidRequest:
            ++counters_.invalid_naks;
            send_ack(Syndrome::InvalidRequest, psn, 0, now);
            fail(std::nullopt);
            return;
        case Refusal::LengthError:
            ++counters_.invalid_naks;
            send_ack(Syndrome::InvalidRequest, psn, 0, now);
            fail(FailedWqe{packet.deth().msn, WcStatus::LocLenErr});
            return;
        case Refusal::BadInvalidate:
            ++counters_.invalid_naks;
            ++counters_.invalidate_refused;
            send_ack(Syndrome::InvalidRequest, psn, 0, now);
            fail(FailedWqe{packet.deth().msn, WcStatus::RemInvReqErr});
            return;
    }
}

void Receiver::handle_read_request(const Packet& packet, TimeUs now) {
    const Psn psn = packet.bth.psn;
    const ReadReq& request = packet.rreq();
    PendingRead read;
    read.psn = psn;
    read.request = request;
    read.retx = packet.bth.has(flag::kRetx);
    const std::uint32_t packets = read_response_packets(request.len, config_.mtu);
    const Psn last = psn_add(psn, packets - 1);
    const Psn cum = window_.cum_psn();

    if (window_.locate(psn) == WindowPosition::Beyond ||
        psn_diff(last, cum) > static_cast<std::int32_t>(SackBitmap::kBits)) {
        ++counters_.out_of_window;  // the READ's PSNs do not fit the window
        return;
    }
    // Which of its PSNs are new? A re-read may cover PSNs received and PSNs not (a part whose
    // request was lost): accepting it marks every PSN it asks for (section 5).
    std::uint32_t fresh = 0;
    for (std::uint32_t k = 0; k < packets; ++k) {
        if (window_.locate(psn_add(psn, k)) == WindowPosition::New) ++fresh;
    }
    const bool started_behind = psn_before(psn, cum);  // the PSNs before it all arrived
    if (fresh < packets) {
        ++counters_.duplicates;
        ++counters_.duplicate_reads;
    }
    // Behind cum_psn only a READ accepted before is answered again, and only for PSNs it
    // covered (a forged one, or one asking more, gets nothing); never a NAK (section 5).
    if (started_behind && !read_remembered(psn, request, packets)) {
        ++counters_.duplicate_reads_unknown;
        return;
    }
    // A duplicate whose original still waits for cum_psn is answered by that original.
    if (fresh == 0 && !started_behind) {
        send_ack(Syndrome::Ack, 0, 0, now);
        return;
    }
    // A zero-length READ names no memory either: its key and address are not checked.
    if (request.len != 0 && memory_.check(request.rkey, request.va, request.len,
                                          access::kRemoteRead) != AccessResult::Ok) {
        if (started_behind) {
            ++counters_.duplicate_reads_unknown;
            return;
        }
        ++counters_.access_naks;
        send_ack(Syndrome::RemoteAccess, psn, 0, now);
        fail(std::nullopt);
        return;
    }
    if (fresh == 0) {
        // Reads are idempotent: the original ran already (cum_psn passed it), run it again.
        remember_read(psn, request, packets);
        execute_read(read, /*again=*/true, now);
        send_ack(Syndrome::Ack, 0, 0, now);
        return;
    }
    // Beyond the READs it can hold, a responder drops a READ_REQ without marking its PSNs; the
    // requester sends it again (section 8). Not one that can run at once (at or behind
    // cum_psn): it holds no slot, and the READs held may be waiting for exactly it (a
    // requester that declared their parts lost has sent others since), which would deadlock.
    if (pending_reads_.size() >= config_.max_dest_rd_atomic && psn != cum && !started_behind) {
        ++counters_.read_overflow;
        return;
    }

    if (fresh == packets) {
        message_end_at(last) = MessageEnd{.kind = MessageKind::Read,
                                          .msn = request.msn,
                                          .msg_len = request.len,
                                          .imm = std::nullopt,
                                          .invalidate_rkey = std::nullopt,
                                          .solicited = false};
    }
    pending_reads_.push_back(read);
    remember_read(psn, request, packets);
    bool completed_wqe = false;
    for (std::uint32_t k = 0; k < packets && !error_; ++k) {
        const Psn p = psn_add(psn, k);
        if (window_.locate(p) == WindowPosition::New) completed_wqe |= accept(p, now);
    }
    if (error_) return;
    execute_ready_reads(now);  // it may be ready although cum_psn did not move
    if (error_) return;
    schedule_ack(packet.bth.has(flag::kAckReq) || completed_wqe || fresh < packets,
                 ahead_of_gap(psn), now);
}

void Receiver::handle_atomic_request(const Packet& packet, TimeUs now) {
    const Psn psn = packet.bth.psn;
    const AtomicReq& request = packet.areq();
    switch (window_.locate(psn)) {
        case WindowPosition::Beyond:
            ++counters_.out_of_window;
            return;
        case WindowPosition::Duplicate:
            handle_duplicate_atomic(packet, now);
            return;
        case WindowPosition::New:
            break;
    }
    // Validated at arrival (section 6). The alignment first: it is a property of the request
    // alone, refused whatever the key names.
    if (request.va % METAROCE_ATOMIC_LEN != 0) {
        ++counters_.invalid_naks;
        send_ack(Syndrome::InvalidRequest, psn, 0, now);
        fail(std::nullopt);
        return;
    }
    if (!config_.remote_atomic || memory_.check(request.rkey, request.va, METAROCE_ATOMIC_LEN,
                                                access::kRemoteAtomic) != AccessResult::Ok) {
        ++counters_.access_naks;
        send_ack(Syndrome::RemoteAccess, psn, 0, now);
        fail(std::nullopt);
        return;
    }
    // An atomic holds one of the max_dest_rd_atomic slots READ parts hold, with the same
    // exception for one that can run at once.
    const Psn cum = window_.cum_psn();
    if (pending_reads_.size() >= config_.max_dest_rd_atomic && psn != cum) {
        ++counters_.read_overflow;
        return;
    }
    message_end_at(psn) = MessageEnd{.kind = MessageKind::Read,
                                     .msn = request.msn,
                                     .msg_len = METAROCE_ATOMIC_LEN,
                                     .imm = std::nullopt,
                                     .invalidate_rkey = std::nullopt,
                                     .solicited = false};
    PendingRead atomic;
    atomic.psn = psn;
    atomic.retx = packet.bth.has(flag::kRetx);
    atomic.opcode = packet.bth.opcode;
    atomic.atomic = request;
    pending_reads_.push_back(atomic);
    const bool completed_wqe = accept(psn, now);
    if (error_) return;
    schedule_ack(packet.bth.has(flag::kAckReq) || completed_wqe, ahead_of_gap(psn), now);
}

void Receiver::handle_duplicate_atomic(const Packet& packet, TimeUs now) {
    const Psn psn = packet.bth.psn;
    const AtomicReq& request = packet.areq();
    const Opcode op = packet.bth.opcode;
    ++counters_.duplicates;
    // Executed: a record with its PSN and every other field equal answers it, and memory is
    // not touched. No record is needed, nor matched, more than 512 PSNs behind cum_psn: a
    // requester only resends within its window, and PSNs wrap.
    const std::int32_t behind = psn_diff(window_.cum_psn(), psn);
    if (behind > 0 && behind <= static_cast<std::int32_t>(2 * METAROCE_SACK_BITS)) {
        for (const AtomicRecord& r : atomic_records_) {
            if (r.psn != psn) continue;
            if (r.opcode != op || r.request != request) break;
            ++counters_.duplicate_atomics;
            send_atomic_response(psn, r.request.msn, r.original, /*retx=*/true, now);
            send_ack(Syndrome::Ack, 0, 0, now);
            return;
        }
    }
    // Accepted, waiting for cum_psn: its response comes when it executes.
    const bool pending =
        std::any_of(pending_reads_.begin(), pending_reads_.end(), [&](const PendingRead& r) {
            return r.psn == psn && r.opcode == op && r.atomic == request;
        });
    if (pending) {
        ++counters_.duplicate_atomics;
        return;
    }
    // Forged, other operands or address, or forgotten: never NAKed, never an error.
    ++counters_.duplicate_atomics_unknown;
}

void Receiver::execute_atomic(const PendingRead& atomic, TimeUs now) {
    const AtomicReq& request = atomic.atomic;
    const AtomicOp op =
        atomic.opcode == Opcode::AtomicCmpSwp ? AtomicOp::CompareSwap : AtomicOp::FetchAdd;
    std::uint64_t original = 0;
    if (memory_.atomic(request.rkey, request.va, op, request.swap_add, request.compare,
                       access::kRemoteAtomic, original) != AccessResult::Ok) {
        // The region went away between acceptance and execution, as for a READ part.
        ++counters_.access_naks;
        send_ack(Syndrome::RemoteAccess, atomic.psn, 0, now);
        fail(std::nullopt);
        return;
    }
    ++counters_.atomics_executed;
    atomic_records_.push_back(AtomicRecord{atomic.psn, atomic.opcode, request, original});
    while (atomic_records_.size() > config_.atomic_records) atomic_records_.pop_front();
    send_atomic_response(atomic.psn, request.msn, original, atomic.retx, now);
}

void Receiver::send_atomic_response(Psn psn, std::uint32_t msn, std::uint64_t original, bool retx,
                                    TimeUs now) {
    std::uint16_t cursor = retx ? reexecution_cursor_++ : response_cursor_;
    const std::uint16_t path = take_path(cursor);
    if (!retx) response_cursor_ = cursor;
    Packet response;
    response.bth.opcode = Opcode::AtomicResponse;
    response.bth.flags = flag::kFirst | flag::kLast;
    if (retx) response.bth.flags |= flag::kRetx;
    response.bth.dqpn = config_.peer_qpn;
    response.bth.sqpn = config_.qpn;
    response.bth.psn = psn;
    response.bth.path = path;
    response.bth.ts = static_cast<std::uint32_t>(now);
    response.ext = Deth{.addr = 0, .key = 0, .msn = msn, .msg_len = METAROCE_ATOMIC_LEN, .imm = 0};
    // Big-endian on the wire, whatever the host's byte order.
    response.payload.resize(METAROCE_ATOMIC_LEN);
    for (std::size_t i = 0; i < METAROCE_ATOMIC_LEN; ++i) {
        response.payload[i] = static_cast<std::uint8_t>(original >> (8 * (7 - i)));
    }
    outbox_.push_back(OutboundPacket{std::move(response), entropies_[path]});
    ++counters_.atomic_responses;
}

bool Receiver::ahead_of_gap(Psn psn) const {
    // Still at or after cum_psn once accepted: some PSN before it is missing.
    return !psn_before(psn, window_.cum_psn());
}

bool Receiver::accept(Psn psn, TimeUs now) {
    const Psn old_cum = window_.cum_psn();
    if (window_.mark(psn) == 0) return false;
    return on_cum_advanced(old_cum, now);
}

bool Receiver::on_cum_advanced(Psn old_cum, TimeUs now) {
    bool completed_wqe = false;
    for (Psn p = old_cum; p != window_.cum_psn() && !error_; p = psn_next(p)) {
        std::optional<MessageEnd>& slot = message_end_at(p);
        if (!slot) continue;
        const MessageEnd end = *slot;
        slot.reset();
        completed_wqe |= complete_message(end, p, now);
    }
    if (!error_) execute_ready_reads(now);
    return completed_wqe;
}

bool Receiver::complete_message(const MessageEnd& end, Psn last_psn, TimeUs now) {
    ++completed_messages_;
    ++counters_.messages_completed;
    if (end.kind == MessageKind::Write || end.kind == MessageKind::Read) return false;

    // Messages complete in PSN order and the requester numbers them in PSN order, so the
    // message must be the one of the oldest WQE; anything else is a requester bug.
    if (wqes_.empty() || end.msn != front_msn_) {
        ++counters_.invalid_naks;
        send_ack(Syndrome::InvalidRequest, last_psn, 0, now);
        fail(std::nullopt);
        return false;
    }
    const PostedWqe posted = std::move(wqes_.front());
    wqes_.pop_front();
    ++front_msn_;
    // A SEND with invalidate ends the registration it names now, when it completes (every
    // earlier PSN has arrived, so no WRITE before it can still need the region), and only
    // now: a message completes once, whatever duplicates of it come later. If the consumer
    // ended the registration meanwhile, nothing more is done (section 6).
    if (end.invalidate_rkey) {
        if (memory_.invalidate(*end.invalidate_rkey)) {
            ++counters_.invalidations;
        } else {
            ++counters_.invalidations_ended_already;
        }
    }
    Completion c = receive_completion(posted.wqe.wr_id, WcStatus::Success);
    if (end.kind == MessageKind::WriteWithImm) c.opcode = WcOpcode::RecvRdmaWithImm;
    c.byte_len = end.msg_len;
    c.imm = end.imm;
    c.invalidated_rkey = end.invalidate_rkey;
    c.solicited = end.solicited;
    completions_.push_back(std::move(c));
    return true;
}

Receiver::ReadRun Receiver::read_run(Psn psn, const ReadReq& request, std::uint32_t packets) const {
    return ReadRun{.base = request.va - request.offset,
                   .rkey = request.rkey,
                   .msn = request.msn,
                   .psn0 = psn_add(psn, -static_cast<std::int64_t>(request.offset / config_.mtu)),
                   .first = psn,
                   .packets = packets};
}

namespace {
bool same_read(const auto& a, const auto& b) {
    return a.base == b.base && a.rkey == b.rkey && a.msn == b.msn && a.psn0 == b.psn0;
}
}  // namespace

void Receiver::remember_read(Psn psn, const ReadReq& request, std::uint32_t packets) {
    constexpr std::int64_t kKeep = 2 * METAROCE_SACK_BITS;  // as far back as re-reads go
    const ReadRun run = read_run(psn, request, packets);
    for (ReadRun& r : read_runs_) {
        if (!same_read(r, run)) continue;
        std::int64_t start = psn_diff(run.first, r.first);
        std::int64_t end = start + run.packets;
        if (start > r.packets || end < 0) continue;
        start = std::min<std::int64_t>(start, 0);
        end = std::max<std::int64_t>(end, r.packets);
        r.first = psn_add(r.first, start);
        if (end - start > kKeep) {
            r.first = psn_add(r.first, end - start - kKeep);
            start = end - kKeep;
        }
        r.packets = static_cast<std::uint32_t>(end - start);
        return;
    }
    ReadRun fresh = run;
    fresh.packets = static_cast<std::uint32_t>(std::min<std::int64_t>(fresh.packets, kKeep));
    if (read_runs_.size() < kReadHistory) {
        read_runs_.push_back(fresh);
        return;
    }
    // Replace the run that ended longest ago.
    const Psn cum = window_.cum_psn();
    auto oldest = std::min_element(read_runs_.begin(), read_runs_.end(),
                                   [cum](const ReadRun& a, const ReadRun& b) {
                                       return psn_diff(psn_add(a.first, a.packets), cum) <
                                              psn_diff(psn_add(b.first, b.packets), cum);
                                   });
    *oldest = fresh;
}

bool Receiver::read_remembered(Psn psn, const ReadReq& request, std::uint32_t packets) const {
    const std::int32_t behind = psn_diff(window_.cum_psn(), psn);
    if (behind <= 0 || behind > static_cast<std::int32_t>(2 * METAROCE_SACK_BITS)) return false;
    const ReadRun run =
        read_run(psn, request, std::min(packets, static_cast<std::uint32_t>(behind)));
    return std::any_of(read_runs_.begin(), read_runs_.end(), [&](const ReadRun& r) {
        const std::int32_t start = psn_diff(run.first, r.first);
        return same_read(r, run) && start >= 0 &&
               static_cast<std::int64_t>(start) + run.packets <= r.packets;
    });
}

void Receiver::execute_ready_reads(TimeUs now) {
    // A READ runs once cum_psn has passed its PSN, so it observes every earlier WRITE.
    // Run them in PSN order (they may have been accepted in any order).
    const Psn cum = window_.cum_psn();
    std::vector<PendingRead> ready;
    std::erase_if(pending_reads_, [&](const PendingRead& r) {
        if (!psn_before(r.psn, cum)) return false;
        ready.push_back(r);
        return true;
    });
    std::sort(ready.begin(), ready.end(), [cum](const PendingRead& a, const PendingRead& b) {
        return psn_diff(a.psn, cum) < psn_diff(b.psn, cum);
    });
    for (const PendingRead& r : ready) {
        if (error_) return;
        if (is_atomic_request(r.opcode)) {
            execute_atomic(r, now);
        } else {
            execute_read(r, /*again=*/false, now);
        }
    }
}

void Receiver::execute_read(const PendingRead& read, bool again, TimeUs now) {
    const ReadReq& request = read.request;
    std::vector<std::uint8_t> data;
    if (request.len != 0 && memory_.read(request.rkey, request.va, request.len, access::kRemoteRead,
                                         data) != AccessResult::Ok) {
        // The region went away between acceptance and execution: refused as for a bad key,
        // at the PSN of the response that would have carried it (section 6).
        ++counters_.access_naks;
        send_ack(Syndrome::RemoteAccess, read.psn, 0, now);
        fail(std::nullopt);
        return;
    }
    ++counters_.reads_executed;
    const std::uint32_t mtu = config_.mtu;
    const std::uint32_t packets = read_response_packets(request.len, mtu);
    std::uint16_t cursor = again ? reexecution_cursor_++ : response_cursor_;
    for (std::uint32_t k = 0; k < packets; ++k) {
        const std::uint32_t begin = k * mtu;
        const std::uint32_t end = std::min(request.len, begin + mtu);
        const std::uint16_t path = take_path(cursor);

        Packet response;
        response.bth.opcode = Opcode::ReadResponse;
        response.bth.dqpn = config_.peer_qpn;
        response.bth.sqpn = config_.qpn;
        response.bth.psn = psn_add(read.psn, k);
        response.bth.path = path;
        response.bth.ts = static_cast<std::uint32_t>(now);
        // FIRST and LAST mark the first and the last response of the part (section 3.2).
        if (k == 0) response.bth.flags |= flag::kFirst;
        if (k + 1 == packets) response.bth.flags |= flag::kLast;
        if (read.retx) response.bth.flags |= flag::kRetx;
        // The message length is where the request ends: the READ's end for a first request,
        // else the end of the part or re-read asked for (the responder keeps no READ state).
        response.ext = Deth{.addr = std::uint64_t{request.offset} + begin,
                            .key = 0,
                            .msn = request.msn,
                            .msg_len = request.offset + request.len,
                            .imm = 0};
        response.payload.assign(data.begin() + begin, data.begin() + end);
        outbox_.push_back(OutboundPacket{std::move(response), entropies_[path]});
        ++counters_.read_responses;
    }
    if (!again) response_cursor_ = cursor;
}

void Receiver::schedule_ack(bool immediate, bool ahead_of_gap, TimeUs now) {
    ++unacked_packets_;
    if (immediate || unacked_packets_ >= config_.ack_every ||
        (ahead_of_gap && unacked_packets_ >= METAROCE_ACK_AHEAD_OF_GAP)) {
        send_ack(Syndrome::Ack, 0, 0, now);
    } else if (!delayed_ack_at_) {
        delayed_ack_at_ = now + config_.delayed_ack_us;
    }
}

void Receiver::on_timer(TimeUs now) {
    if (delayed_ack_at_ && now >= *delayed_ack_at_) send_ack(Syndrome::Ack, 0, 0, now);
}

void Receiver::on_version_mismatch(const BthProbe& probe, TimeUs now) {
    ++counters_.version_naks;
    echo_path_ = probe.path;
    echo_ts_ = probe.ts;
    send_ack(Syndrome::Version, probe.psn, METAROCE_VERSION, now);
}

void Receiver::send_ack(Syndrome syndrome, Psn nak_psn, std::uint8_t nak_arg, TimeUs now) {
    // Reverse path: the ACK for a packet sent on the peer's path i goes on our path i (or the
    // next one, if that one is known dead).
    auto cursor = static_cast<std::uint16_t>(echo_path_ % entropies_.size());
    const std::uint16_t path = take_path(cursor);
    Packet ack;
    ack.bth.opcode = Opcode::Ack;
    ack.bth.dqpn = config_.peer_qpn;
    ack.bth.sqpn = config_.qpn;
    ack.bth.psn = window_.cum_psn();
    ack.bth.path = path;
    ack.bth.ts = static_cast<std::uint32_t>(now);
    ack.ext = Ack{.cum_psn = window_.cum_psn(),
                  .nak_psn = syndrome == Syndrome::Ack ? 0 : (nak_psn & kPsnMask),
                  .syndrome = syndrome,
                  .nak_arg = nak_arg,
                  .ce_count = static_cast<std::uint16_t>(ce_since_ack_),
                  .fair_share = fair_share_ != nullptr
                                    ? fair_share_->hint(now)
                                    : static_cast<std::uint16_t>(
                                          std::min<std::uint32_t>(config_.receive_budget, 0xffff)),
                  .echo_path = echo_path_,
                  .ts_echo = echo_ts_,
                  // The messages that consumed a receive WQE: the next message number due.
                  .msn = front_msn_,
                  .sack = window_.to_wire()};
    outbox_.push_back(OutboundPacket{std::move(ack), entropies_[path]});
    ++counters_.acks_sent;
    // Every ACK or NAK carries the full state and the CE count since the previous one.
    ce_since_ack_ = 0;
    unacked_packets_ = 0;
    delayed_ack_at_.reset();
}

void Receiver::fail(std::optional<FailedWqe> failed) {
    if (error_) return;
    error_ = true;
    std::uint32_t msn = front_msn_;
    for (PostedWqe& posted : wqes_) {
        WcStatus status = WcStatus::WrFlushErr;
        if (failed && failed->msn == msn) status = failed->status;
        completions_.push_back(receive_completion(posted.wqe.wr_id, status));
        ++msn;
    }
    wqes_.clear();
    pending_reads_.clear();
    read_runs_.clear();
    atomic_records_.clear();
    message_ends_.fill(std::nullopt);
    delayed_ack_at_.reset();
}

std::vector<OutboundPacket> Receiver::take_outbox() { return std::exchange(outbox_, {}); }

std::vector<Completion> Receiver::take_completions() { return std::exchange(completions_, {}); }

bool Receiver::path_failed(std::uint16_t index) const {
    return paths_ != nullptr && index < paths_->size() &&
           (*paths_)[index].state == PathState::Failed;
}

std::uint16_t Receiver::take_path(std::uint16_t& cursor) const {
    const auto n = static_cast<std::uint16_t>(entropies_.size());
    cursor %= n;
    std::uint16_t path = cursor;
    for (std::uint16_t k = 0; k < n; ++k) {
        const auto candidate = static_cast<std::uint16_t>((cursor + k) % n);
        if (!path_failed(candidate)) {
            path = candidate;
            break;
        }
    }
    cursor = static_cast<std::uint16_t>((path + 1) % n);
    return path;
}

}  // namespace metaroce
