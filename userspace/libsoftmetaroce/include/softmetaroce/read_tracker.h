// The requester's view of one RDMA READ (protocol.md sections 3.2 and 8): which of its response
// packets arrived, which request covers each of them, and which must be asked for again.
//
// A READ of n response packets is requested in parts (READ_REQs for consecutive index ranges,
// each taking the PSNs of its range, so READs larger than the 256-PSN window work), and lost
// responses are recovered with re-reads of the runs of missing indices. Responses are detected
// lost like packets (protocol.md section 8): once a response the responder sent after it
// arrived, a response is lost when one at least `reorder_allowance` responses after it arrived,
// or when the newest arrived longer ago than the response gap (max(SRTT/2, 1 ms)); and every
// response still missing is lost when no response came for a retransmission timeout.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "softmetaroce/time.h"

namespace metaroce {

// The order in which a responder sends the responses to parts' requests: it executes READs in
// PSN order (protocol.md section 6), so a response follows every response asked for by an
// earlier part, of whichever READ. The sender's READs share one; re-reads, answered ahead of
// the parts the responder holds, take no place in it.
struct ResponseOrder {
    std::uint64_t next = 0;               // the place of the next response asked for
    std::optional<std::uint64_t> newest;  // the latest place of a response that arrived
    TimeUs newest_at = 0;                 // when it arrived
};

class ReadTracker {
  public:
    // Response indices [first, end).
    struct Range {
        std::uint32_t first = 0;
        std::uint32_t end = 0;

        std::uint32_t size() const { return end - first; }
        friend bool operator==(const Range&, const Range&) = default;
    };

    struct Arrival {
        bool is_new = false;          // false: a duplicate
        bool completed_part = false;  // the last missing response of its part
    };

    // `order`: shared with the sender's other READs; by default this READ's own.
    ReadTracker(std::uint32_t packets, std::uint32_t reorder_allowance,
                std::shared_ptr<ResponseOrder> order = std::make_shared<ResponseOrder>());
    // The count rule's allowance as it adapts (the sender's, section 8).
    void set_reorder_allowance(std::uint32_t allowance);

    std::uint32_t packets() const { return packets_; }
    std::uint32_t issued() const { return issued_; }  // indices requested so far
    bool all_issued() const { return issued_ == packets_; }
    bool done() const { return all_issued() && missing_ == 0; }
    // Whether the response at `index` (asked for or not) has arrived.
    bool received(std::uint32_t index) const { return index < packets_ && received_[index]; }
    // Responses requested and neither arrived nor declared lost: what the READ has in flight
    // against the congestion window (section 8).
    std::uint32_t in_flight() const { return in_flight_; }
    // Requests (parts and re-reads) the responder may still hold, each a read credit
    // (max_rd_atomic, section 8): from the request until its last response arrives or is
    // declared lost (the responder sends them in order), or the request itself is lost.
    std::uint32_t requests_in_flight() const { return requests_in_flight_; }

    // Requests the next `count` indices as a new part.
    Range issue_part(std::uint32_t count);
    Range part_containing(std::uint32_t index) const;
    // A re-read of `range` went out at `now`. Its responses are no evidence of loss: the
    // responder answers a re-read ahead of the parts it holds, and the first answer to an
    // index re-read may still be on its way (section 8).
    void on_reread(Range range, TimeUs now);
    // The path the newest request (part or re-read) went on; the path of the request that
    // covers `index` now.
    void set_request_path(std::uint16_t path) { requests_.back().path = path; }
    std::uint16_t path_of(std::uint32_t index) const { return requests_[cover_[index]].path; }

    // The request of the part containing `index` was declared lost: the responses it asked
    // for that the responder never accepted are not in flight until it is resent (which
    // counts them in again).
    void on_part_request_lost(std::uint32_t index);
    void on_part_request_resent(std::uint32_t index);
    // The responder accepted the request covering `index` (its PSN was acknowledged).
    void on_accepted(std::uint32_t index, TimeUs now);
    Arrival on_response(std::uint32_t index, TimeUs now, TimeUs gap);
    // When the time rule next declares a response lost; empty if it has nothing to wait for.
    std::optional<TimeUs> reorder_deadline(TimeUs gap) const;
    // Applies the count and time rules against the newest response of the shared order (a
    // response to another READ may have moved it).
    void detect_losses(TimeUs now, TimeUs gap);

    // The runs of lost responses, each at most `max_run` long, `max_total` in all and at most
    // `max_runs` of them; they are no longer lost once taken (the caller re-reads them).
    std::vector<Range> take_lost_runs(std::uint32_t max_run, std::uint32_t max_total = UINT32_MAX,
                                      std::uint32_t max_runs = UINT32_MAX);
    // The highest index whose response is in flight (asked for, neither arrived nor lost).
    std::optional<std::uint32_t> newest_in_flight() const;
    // A tail-loss probe (section 8) presumes the response at `index` lost, to be re-read.
    void on_probe(std::uint32_t index) { mark_lost(index); }

    // When the responses due are given up for lost: `rto`, doubled per consecutive timeout
    // up to `max_wait`, after the latest activity. Empty when nothing is due.
    std::optional<TimeUs> deadline(TimeUs rto, TimeUs max_wait) const;
    // Every accepted response still missing is lost.
    void on_timeout(TimeUs now);

  private:
    struct Request {
        Range range;
        bool first_request = true;      // a part's request, not a re-read
        std::uint64_t first_place = 0;  // a part's: the place of its first response in the order
        bool holds_credit = false;
        std::uint16_t path = 0;
    };

    // Where a response the part asking for `index` still covers stands in the order; empty
    // for one a re-read covers now.
    std::optional<std::uint64_t> place_of(std::uint32_t index) const;
    // Received, lost, or covered by a re-read: no longer waits on the order (for good; a lost
    // index is re-read by the caller).
    bool settled(std::uint32_t index) const;
    void mark_lost(std::uint32_t index);
    void hold_credit(std::uint32_t request);
    void release_credit(std::uint32_t request);
    void release_if_last(std::uint32_t index);
    void count_in(std::uint32_t index);
    void count_out(std::uint32_t index);

    std::uint32_t packets_;
    std::uint32_t allowance_;
    std::shared_ptr<ResponseOrder> order_;
    std::uint32_t issued_ = 0;
    std::uint32_t scan_from_ = 0;  // every index before it is settled
    std::uint32_t missing_;
    std::uint32_t awaiting_ = 0;   // accepted and not received
    std::uint32_t in_flight_ = 0;  // indices counted in flight
    std::uint32_t requests_in_flight_ = 0;
    std::vector<bool> received_;
    std::vector<bool> accepted_;
    std::vector<bool> lost_;
    std::vector<bool> in_flight_of_;      // index -> counted in in_flight_
    std::vector<std::uint32_t> cover_;    // index -> latest request covering it
    std::vector<std::uint32_t> part_of_;  // index -> part
    std::vector<Range> parts_;
    std::vector<std::uint32_t> part_missing_;
    std::vector<std::uint32_t> part_request_;  // part -> its first request
    std::vector<Request> requests_;
    TimeUs last_activity_ = 0;
    unsigned backoff_ = 0;
};

}  // namespace metaroce
