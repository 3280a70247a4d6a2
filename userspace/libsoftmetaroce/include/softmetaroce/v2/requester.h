// Sections 8.1 and 9: the requesting end of one stream. Work requests leave in posting order, cut
// into segments the stream numbers; READs and atomics wait for max_rd_atomic and fences wait for
// them; responses are matched by the request's SSN; work requests complete in posting order.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "softmetaroce/v2/stream_segment.h"
#include "softmetaroce/v2/stream_sender.h"

namespace softmetaroce::v2 {

constexpr uint32_t kMaxRdAtomic = 128;  // section 9.1: the most requests a QP may have unanswered

// Section 7: SEND* and WRITE* carry payload; READ and the atomics are requests that answer.
constexpr bool carries_payload(Op op) {
    return op == Op::Send || op == Op::SendImm || op == Op::SendInv || op == Op::Write ||
           op == Op::WriteImm;
}

// One new segment to send, or (local) a local operation to run now. A local operation has no
// opcode (op is 0), consumes no SSN (ssn is the stream's next) and carries length as msg_len.
struct SegmentOut {
    uint32_t wr;
    bool local;
    Op op;
    uint32_t ssn, msn, offset, payload_len, msg_len;
};

enum class RespVerdict { Ok, Unknown, Bad };

class Requester {
  public:
    // mtu 0 is taken as 1; max_reqs is clamped to 1..128 (a QP that may not read cannot have
    // posted a READ, so 0 would only wedge the queue).
    Requester(uint32_t num_wrs, uint32_t mtu, uint32_t first_msn, uint32_t max_reqs);

    // The WR's index, counting from 0 in posting order; nullopt when every entry is in use or op
    // is not one a requester posts (a response or NAK). op nullopt: a local operation.
    std::optional<uint32_t> post(std::optional<Op> op, uint32_t length, bool fence);
    // The next new segment (opened on stream) or local operation; nullopt when there is none or
    // the one at the send point waits (a fence, max_rd_atomic, the stream's window).
    std::optional<SegmentOut> next(StreamSender& stream);
    // What segment ssn carries, the same as when it was new; nullopt if it is not ours or not out.
    std::optional<SegmentOut> resend(uint32_t ssn) const;
    // StreamSender::on_acked returned true for ssn (so at most once each).
    void delivered(uint32_t ssn);

    // A response segment (duplicates already filtered by the peer's stream map). Ok: *wr names
    // the READ or atomic it answers, and the caller places it and calls answered(). A NAK is not
    // matched here (section 9.2 is the caller's) and is neither refused nor counted.
    RespVerdict response(Op op, uint32_t msn, uint32_t offset, uint32_t msg_len,
                         uint32_t payload_len, uint32_t* wr);
    // bytes of an accepted response were placed; ignored once the request is answered.
    void answered(uint32_t wr, uint32_t bytes);

    // The oldest work request, if it is complete; each is returned once, in posting order.
    std::optional<uint32_t> next_completion();

    uint64_t posted() const { return posted_; }
    uint64_t completed() const { return completed_; }
    uint64_t bad_responses() const { return bad_responses_; }  // refused: Unknown and Bad
    uint32_t unanswered() const { return static_cast<uint32_t>(waiting_.size()); }
    uint32_t in_use() const { return count_; }

  private:
    enum class Kind : uint8_t { Local, Message, Request };
    struct Wr {
        Kind kind = Kind::Local;
        Op op{};
        bool fence = false, answered = false;
        uint32_t length = 0;    // msg_len: 8 for an atomic
        uint32_t segments = 0;  // 0 for a local operation
        uint32_t first_ssn = 0, msn = 0;
        uint32_t opened = 0, delivered = 0;
        uint64_t answer_bytes = 0;
    };

    Wr& at(uint32_t i) { return ring_[(head_ + i) % ring_.size()]; }
    const Wr& at(uint32_t i) const { return ring_[(head_ + i) % ring_.size()]; }
    // The position (from the oldest) of the work request holding segment ssn, if one is out.
    std::optional<uint32_t> find(uint32_t ssn) const;
    SegmentOut describe(const Wr& w, uint32_t wr, uint32_t i) const;
    bool complete(uint32_t i) const;

    uint32_t mtu_, max_reqs_, next_msn_;
    std::vector<Wr> ring_;  // the send queue: count_ entries from head_, oldest first
    uint32_t head_ = 0, count_ = 0;
    uint32_t oldest_wr_ = 0;  // the index of the entry at head_
    // Entries before send_ are wholly opened (or ran); the one at send_ may be partly opened.
    uint32_t send_ = 0;
    std::vector<uint32_t> waiting_;  // requests opened and not answered, by WR index
    // A READ or atomic completes on its response, so its request may still be out: kept for
    // resend() until delivered.
    std::unordered_map<uint32_t, SegmentOut> answered_out_;
    uint64_t posted_ = 0, completed_ = 0, bad_responses_ = 0;
};

}  // namespace softmetaroce::v2
