#include "softmetaroce/v2/requester.h"

#include <algorithm>

namespace softmetaroce::v2 {

Requester::Requester(uint32_t num_wrs, uint32_t mtu, uint32_t first_msn, uint32_t max_reqs)
    : mtu_(std::max(mtu, 1u)),
      max_reqs_(std::clamp(max_reqs, 1u, kMaxRdAtomic)),
      next_msn_(first_msn),
      ring_(num_wrs) {
    waiting_.reserve(max_reqs_);
}

std::optional<uint32_t> Requester::post(std::optional<Op> op, uint32_t length, bool fence) {
    if (count_ == ring_.size()) return std::nullopt;
    Wr w{.fence = fence, .length = length};
    if (!op) {
        w.kind = Kind::Local;
    } else if (carries_payload(*op)) {
        w.kind = Kind::Message;
        w.op = *op;
        w.segments = std::max(1u, length / mtu_ + (length % mtu_ != 0 ? 1u : 0u));
    } else if (is_request(*op)) {
        w.kind = Kind::Request;
        w.op = *op;
        w.segments = 1;
        if (*op != Op::ReadReq) w.length = 8;  // the table: an atomic's message length is 8
    } else {
        return std::nullopt;  // responses and NAKs are the responder's
    }
    const uint32_t wr = oldest_wr_ + count_;
    at(count_) = w;
    ++count_;
    ++posted_;
    return wr;
}

std::optional<SegmentOut> Requester::next(StreamSender& stream) {
    if (send_ >= count_) return std::nullopt;
    Wr& w = at(send_);
    const uint32_t wr = oldest_wr_ + send_;
    if (w.opened == 0) {
        // A fence and max_rd_atomic hold the send point, so everything after waits too.
        if (w.fence && !waiting_.empty()) return std::nullopt;
        if (w.kind == Kind::Local) {
            w.first_ssn = stream.next_ssn();
            w.msn = next_msn_;
            ++send_;
            return SegmentOut{.wr = wr,
                              .local = true,
                              .op = Op{},
                              .ssn = w.first_ssn,
                              .msn = w.msn,
                              .offset = 0,
                              .payload_len = 0,
                              .msg_len = w.length};
        }
        if (w.kind == Kind::Request && waiting_.size() >= max_reqs_) return std::nullopt;
    }
    if (!stream.can_open()) return std::nullopt;
    const uint32_t ssn = stream.open();
    if (w.opened == 0) {
        // A message is a run of consecutive SSNs, so its first one names them all.
        w.first_ssn = ssn;
        w.msn = next_msn_;
        if (consumes_recv(w.op)) ++next_msn_;
        if (w.kind == Kind::Request) waiting_.push_back(wr);
    }
    const uint32_t i = w.opened++;
    if (w.opened == w.segments) ++send_;
    return describe(w, wr, i);
}

std::optional<uint32_t> Requester::find(uint32_t ssn) const {
    // Opened entries are [0, n): their first SSNs do not decrease, so search by the distance from
    // the oldest; a local operation or a gap (another's segments) holds none.
    const uint32_t n = send_ + (send_ < count_ && at(send_).opened > 0 ? 1 : 0);
    if (n == 0) return std::nullopt;
    const uint32_t base = at(0).first_ssn, target = ssn - base;
    uint32_t lo = 0, hi = n;  // the first entry starting past target
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (at(mid).first_ssn - base <= target)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) return std::nullopt;
    const Wr& w = at(lo - 1);
    if (ssn - w.first_ssn >= w.opened) return std::nullopt;
    return lo - 1;
}

SegmentOut Requester::describe(const Wr& w, uint32_t wr, uint32_t i) const {
    SegmentOut s{.wr = wr,
                 .local = false,
                 .op = w.op,
                 .ssn = w.first_ssn + i,
                 .msn = w.msn,
                 .offset = 0,
                 .payload_len = 0,
                 .msg_len = w.length};
    if (w.kind == Kind::Message) {
        // i < segments, so i * mtu < length: no overflow.
        s.offset = i * mtu_;
        s.payload_len = std::min(mtu_, w.length - s.offset);
    }
    return s;
}

std::optional<SegmentOut> Requester::resend(uint32_t ssn) const {
    if (const auto i = find(ssn)) return describe(at(*i), oldest_wr_ + *i, ssn - at(*i).first_ssn);
    if (const auto it = answered_out_.find(ssn); it != answered_out_.end()) return it->second;
    return std::nullopt;
}

void Requester::delivered(uint32_t ssn) {
    if (const auto i = find(ssn)) {
        Wr& w = at(*i);
        if (w.delivered < w.opened) ++w.delivered;
        return;
    }
    answered_out_.erase(ssn);
}

RespVerdict Requester::response(Op op, uint32_t msn, uint32_t offset, uint32_t msg_len,
                                uint32_t payload_len, uint32_t* wr) {
    if (op == Op::Nak) return RespVerdict::Unknown;
    const auto it = std::find_if(waiting_.begin(), waiting_.end(),
                                 [&](uint32_t r) { return at(r - oldest_wr_).first_ssn == msn; });
    if (it == waiting_.end()) {
        ++bad_responses_;
        return RespVerdict::Unknown;
    }
    const Wr& w = at(*it - oldest_wr_);
    const Op want = w.op == Op::ReadReq ? Op::ReadResp : Op::AtomicResp;
    // Bytes within it: none past its end, and (as the parser's rule) an empty segment only of an
    // empty message, at offset 0.
    const bool within = uint64_t{offset} + payload_len <= msg_len &&
                        (payload_len > 0 || (msg_len == 0 && offset == 0));
    if (op != want || msg_len != w.length || !within) {
        ++bad_responses_;
        return RespVerdict::Bad;
    }
    if (wr) *wr = *it;
    return RespVerdict::Ok;
}

void Requester::answered(uint32_t wr, uint32_t bytes) {
    const uint32_t i = wr - oldest_wr_;
    if (i >= count_) return;
    Wr& w = at(i);
    if (w.kind != Kind::Request || w.opened == 0 || w.answered) return;
    w.answer_bytes += bytes;
    if (w.answer_bytes < w.length) return;
    w.answered = true;
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), wr));
}

bool Requester::complete(uint32_t i) const {
    const Wr& w = at(i);
    switch (w.kind) {
        case Kind::Local:
            return i < send_;  // it ran
        case Kind::Message:
            return w.delivered == w.segments;
        case Kind::Request:
            return w.answered;
    }
    return false;
}

std::optional<uint32_t> Requester::next_completion() {
    if (count_ == 0 || !complete(0)) return std::nullopt;
    const Wr& w = at(0);
    const uint32_t wr = oldest_wr_;
    if (w.kind == Kind::Request && w.delivered == 0)
        answered_out_.emplace(w.first_ssn, describe(w, wr, 0));
    head_ = (head_ + 1) % static_cast<uint32_t>(ring_.size());
    --count_;
    --send_;  // complete, so wholly opened
    ++oldest_wr_;
    ++completed_;
    return wr;
}

}  // namespace softmetaroce::v2
