// RFC 6298 retransmission timeout estimation over all paths of a connection
// (protocol.md section 8): RTO = SRTT + 4 * RTTVAR, at least 5 ms (20 ms before the first
// sample), doubled on each consecutive expiry up to 2 s; a new sample (or new data
// acknowledged) ends the backoff. Integer microseconds, so results are identical everywhere.
#pragma once

#include <rdma/metaroce_wire.h>

#include <cstdint>
#include <optional>

#include "softmetaroce/time.h"

namespace metaroce {

struct RttConfig {
    TimeUs min_rto_us = METAROCE_MIN_RTO_US;
    // Before the first sample. RFC 6298 says 1 s for the Internet; a datacenter fabric's RTT is
    // microseconds: the spec's 20 ms.
    TimeUs initial_rto_us = METAROCE_INITIAL_RTO_US;
    TimeUs max_rto_us = METAROCE_MAX_RTO_US;
};

class RttEstimator {
  public:
    explicit RttEstimator(const RttConfig& config = {});

    // A new sample; it also ends the backoff.
    void on_sample(TimeUs rtt_us);
    // An RTO expired: the next timeout is twice as long (RFC 6298 5.5).
    void on_timeout();
    // New data was acknowledged: the backoff ends.
    void on_progress() { backoff_ = 0; }

    // The current timeout including backoff, clamped to [min, max].
    TimeUs rto() const;
    std::optional<TimeUs> srtt() const { return srtt_; }
    std::optional<TimeUs> rttvar() const { return rttvar_; }
    unsigned backoff() const { return backoff_; }

  private:
    RttConfig config_;
    std::optional<TimeUs> srtt_;
    std::optional<TimeUs> rttvar_;
    unsigned backoff_ = 0;
};

}  // namespace metaroce
