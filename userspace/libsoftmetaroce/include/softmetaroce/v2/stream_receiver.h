// Sections 8.1 and 9: the receiving end of one stream. It decides which segments it takes,
// completes receive-consuming messages in MSN order once the stream's cum passes their last
// segment, releases requests in SSN order once cum passes them, and keeps section 9.2's RNR
// refusals: after a refusal every later segment is refused until the refused one is taken.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>

#include "softmetaroce/v2/seq.h"
#include "softmetaroce/v2/stream_map.h"
#include "softmetaroce/v2/stream_segment.h"

namespace softmetaroce::v2 {

enum class SegVerdict { Take, Duplicate, Beyond, Refuse };

// Receive-consuming messages between the oldest not complete and the newest. A conforming
// sender stays inside it: it has under 4096 segments past the stream's cum.
constexpr uint32_t kRecvSlots = 4096;
constexpr uint32_t kMaxRequests = 128;  // section 9.1: max_dest_rd_atomic's ceiling

class StreamReceiver {
  public:
    StreamReceiver(uint32_t first_ssn, uint32_t first_msn, uint32_t max_requests);

    // Take: the caller checks its resources (a receive WQE, requests_full()), then places the
    // segment and calls accept(), or calls refuse(). Counts what it does not take.
    SegVerdict check(const Segment& s);
    // Request ssn must be refused with RNR: as many as allowed are queued and it comes after all
    // of them. One before a queued request is always taken, up to kMaxRequests: the queued ones
    // run only after it (section 9.1; a deadlock the core's review found).
    bool requests_full(uint32_t ssn) const {
        if (queued_requests_ >= kMaxRequests) return true;
        return queued_requests_ >= max_requests_ && seq_after(ssn, newest_request_);
    }
    // Section 9.1: a stream its sender began in RTR starts where ours did, first_ssn. Moved
    // there only while nothing of it was taken, queued or refused; false after.
    bool rebase(uint32_t first_ssn);
    // The caller could not take a segment check() gave it (RNR). True: send a NAK for it.
    bool refuse(uint32_t ssn);
    // Records a segment check() took in the stream map; ignored if check() would not take it.
    void accept(const Segment& s);

    // The MSN of the next receive-consuming message complete, in MSN order, each once.
    std::optional<uint32_t> next_completion();
    // The SSN of the next request whose turn has come, in SSN order, each once.
    std::optional<uint32_t> next_request();

    uint32_t cum() const { return map_.cum(); }  // the first SSN not accepted
    bool refusing() const { return refusing_; }
    uint32_t refused_ssn() const { return refused_ssn_; }  // meaningful while refusing()
    uint64_t accepted() const { return accepted_; }
    uint64_t duplicates() const { return duplicates_; }
    uint64_t refused() const { return refused_; }
    uint64_t beyond() const { return beyond_; }

  private:
    // A request may sit at any SSN from cum to cum + 4096: 4097 of them, so twice the map.
    static constexpr uint32_t kRequestSlots = 2 * kStreamMapBits;

    SegVerdict classify(const Segment& s) const;
    void pass_requests(uint32_t from, uint32_t to);
    void complete_messages();

    StreamMap map_;
    uint32_t max_requests_;
    // Receive-consuming messages: [reported_msn_, done_msn_) complete and not yet reported;
    // from done_msn_ on, the SSN of each one's last segment once it was accepted.
    uint32_t reported_msn_, done_msn_;
    std::array<uint32_t, kRecvSlots> last_ssn_{};
    std::array<uint64_t, kRecvSlots / 64> last_known_{};
    // Requests accepted and not yet passed by cum, and those passed, waiting to be handed out.
    std::array<uint64_t, kRequestSlots / 64> request_at_{};
    std::deque<uint32_t> ready_;
    uint32_t queued_requests_ = 0;
    uint32_t newest_request_ = 0;  // the highest SSN queued, while any is
    bool refusing_ = false;
    uint32_t refused_ssn_ = 0;
    uint64_t accepted_ = 0, duplicates_ = 0, refused_ = 0, beyond_ = 0;
};

}  // namespace softmetaroce::v2
