#include "softmetaroce/read_tracker.h"

#include <algorithm>

namespace metaroce {

ReadTracker::ReadTracker(std::uint32_t packets, std::uint32_t reorder_allowance,
                         std::shared_ptr<ResponseOrder> order)
    : packets_(packets),
      allowance_(std::max<std::uint32_t>(1, reorder_allowance)),
      order_(std::move(order)),
      missing_(packets),
      received_(packets, false),
      accepted_(packets, false),
      lost_(packets, false),
      in_flight_of_(packets, false),
      cover_(packets, 0),
      part_of_(packets, 0) {}

void ReadTracker::set_reorder_allowance(std::uint32_t allowance) {
    allowance_ = std::max<std::uint32_t>(1, allowance);
}

// Counted in flight against the window (section 8).
void ReadTracker::count_in(std::uint32_t index) {
    if (in_flight_of_[index]) return;
    in_flight_of_[index] = true;
    ++in_flight_;
}

void ReadTracker::count_out(std::uint32_t index) {
    if (!in_flight_of_[index]) return;
    in_flight_of_[index] = false;
    --in_flight_;
}

void ReadTracker::hold_credit(std::uint32_t request) {
    if (requests_[request].holds_credit) return;
    requests_[request].holds_credit = true;
    ++requests_in_flight_;
}

void ReadTracker::release_credit(std::uint32_t request) {
    if (!requests_[request].holds_credit) return;
    requests_[request].holds_credit = false;
    --requests_in_flight_;
}

// The responder is done with the request that covers `index` once it sent that request's last
// response: when the response arrives or is declared lost.
void ReadTracker::release_if_last(std::uint32_t index) {
    const std::uint32_t request = cover_[index];
    if (index + 1 == requests_[request].range.end) release_credit(request);
}

void ReadTracker::mark_lost(std::uint32_t index) {
    lost_[index] = true;
    count_out(index);
    release_if_last(index);
}

ReadTracker::Range ReadTracker::issue_part(std::uint32_t count) {
    const Range range{issued_, std::min(packets_, issued_ + count)};
    const auto part = static_cast<std::uint32_t>(parts_.size());
    const auto request = static_cast<std::uint32_t>(requests_.size());
    parts_.push_back(range);
    part_missing_.push_back(range.size());
    part_request_.push_back(request);
    requests_.push_back(Request{range, true, order_->next, false, 0});
    hold_credit(request);
    order_->next += range.size();
    for (std::uint32_t i = range.first; i < range.end; ++i) {
        part_of_[i] = part;
        cover_[i] = request;
        count_in(i);
    }
    issued_ = range.end;
    return range;
}

ReadTracker::Range ReadTracker::part_containing(std::uint32_t index) const {
    return parts_[part_of_[index]];
}

void ReadTracker::on_reread(Range range, TimeUs now) {
    const auto request = static_cast<std::uint32_t>(requests_.size());
    requests_.push_back(Request{range, false, 0, false, 0});
    hold_credit(request);
    for (std::uint32_t i = range.first; i < range.end; ++i) {
        count_out(i);  // a response still in flight moves to the new request
        cover_[i] = request;
        lost_[i] = false;
        if (!received_[i]) count_in(i);
    }
    last_activity_ = now;
}

void ReadTracker::on_part_request_lost(std::uint32_t index) {
    const std::uint32_t part = part_of_[index];
    bool answered = false;
    for (std::uint32_t i = parts_[part].first; i < parts_[part].end; ++i) {
        answered = answered || accepted_[i] || received_[i];
        if (!accepted_[i] && cover_[i] == part_request_[part]) count_out(i);
    }
    // The responder never took it: no credit is held there.
    if (!answered) release_credit(part_request_[part]);
}

void ReadTracker::on_part_request_resent(std::uint32_t index) {
    const std::uint32_t part = part_of_[index];
    bool waiting = false;
    for (std::uint32_t i = parts_[part].first; i < parts_[part].end; ++i) {
        if (!accepted_[i] && !received_[i] && !lost_[i] && cover_[i] == part_request_[part]) {
            count_in(i);
            waiting = true;
        }
    }
    if (waiting) hold_credit(part_request_[part]);
}

void ReadTracker::on_accepted(std::uint32_t index, TimeUs now) {
    if (accepted_[index]) return;
    accepted_[index] = true;
    if (received_[index]) return;
    // Responses are due from now on.
    if (awaiting_++ == 0) last_activity_ = now;
}

std::optional<std::uint64_t> ReadTracker::place_of(std::uint32_t index) const {
    const Request& r = requests_[cover_[index]];
    if (!r.first_request) return std::nullopt;
    return r.first_place + (index - r.range.first);
}

ReadTracker::Arrival ReadTracker::on_response(std::uint32_t index, TimeUs now, TimeUs gap) {
    last_activity_ = now;
    if (const std::optional<std::uint64_t> place = place_of(index)) {
        if (!order_->newest || *place > *order_->newest) {
            order_->newest = place;
            order_->newest_at = now;
        }
    }

    Arrival arrival;
    if (!received_[index]) {
        arrival.is_new = true;
        received_[index] = true;
        lost_[index] = false;
        count_out(index);
        --missing_;
        if (accepted_[index]) --awaiting_;
        backoff_ = 0;
        arrival.completed_part = --part_missing_[part_of_[index]] == 0;
    }
    release_if_last(index);
    detect_losses(now, gap);
    return arrival;
}

void ReadTracker::detect_losses(TimeUs now, TimeUs gap) {
    // A response its part still covers is lost once one the responder sent after it arrived:
    // `allowance_` or more places after it, or any, with none newer for the gap.
    if (!order_->newest) return;
    const std::uint64_t newest = *order_->newest;
    const bool timed_out = now >= order_->newest_at + gap;
    while (scan_from_ < issued_ && settled(scan_from_)) ++scan_from_;
    // Places grow with the index: the scan ends at the newest.
    for (std::uint32_t i = scan_from_; i < issued_; ++i) {
        if (received_[i] || lost_[i]) continue;
        const std::optional<std::uint64_t> place = place_of(i);
        if (!place) continue;
        if (*place >= newest) break;
        if (newest - *place >= allowance_ || timed_out) mark_lost(i);
    }
}

bool ReadTracker::settled(std::uint32_t index) const {
    return received_[index] || lost_[index] || !place_of(index);
}

std::optional<TimeUs> ReadTracker::reorder_deadline(TimeUs gap) const {
    if (!order_->newest) return std::nullopt;
    for (std::uint32_t i = scan_from_; i < issued_; ++i) {
        if (received_[i] || lost_[i]) continue;
        const std::optional<std::uint64_t> place = place_of(i);
        if (!place) continue;
        if (*place >= *order_->newest) break;
        return order_->newest_at + gap;
    }
    return std::nullopt;
}

std::optional<std::uint32_t> ReadTracker::newest_in_flight() const {
    if (in_flight_ == 0) return std::nullopt;
    for (std::uint32_t i = issued_; i > 0; --i) {
        if (in_flight_of_[i - 1]) return i - 1;
    }
    return std::nullopt;
}

std::vector<ReadTracker::Range> ReadTracker::take_lost_runs(std::uint32_t max_run,
                                                            std::uint32_t max_total,
                                                            std::uint32_t max_runs) {
    std::vector<Range> runs;
    for (std::uint32_t i = 0; i < issued_ && max_total > 0 && runs.size() < max_runs;) {
        if (!lost_[i]) {
            ++i;
            continue;
        }
        Range run{i, i};
        while (run.end < issued_ && lost_[run.end] && run.size() < std::min(max_run, max_total)) {
            lost_[run.end] = false;
            ++run.end;
        }
        runs.push_back(run);
        max_total -= run.size();
        i = run.end;
    }
    return runs;
}

std::optional<TimeUs> ReadTracker::deadline(TimeUs rto, TimeUs max_wait) const {
    if (awaiting_ == 0) return std::nullopt;
    TimeUs wait = rto;
    for (unsigned i = 0; i < backoff_ && wait < max_wait; ++i) wait *= 2;
    return last_activity_ + std::min(wait, std::max(rto, max_wait));
}

void ReadTracker::on_timeout(TimeUs now) {
    for (std::uint32_t i = 0; i < issued_; ++i) {
        if (accepted_[i] && !received_[i]) mark_lost(i);
    }
    ++backoff_;
    last_activity_ = now;
}

}  // namespace metaroce
