#include "softmetaroce/rtt_estimator.h"

#include <algorithm>

namespace metaroce {

RttEstimator::RttEstimator(const RttConfig& config) : config_(config) {}

void RttEstimator::on_sample(TimeUs rtt_us) {
    backoff_ = 0;
    if (!srtt_) {
        srtt_ = rtt_us;
        rttvar_ = rtt_us / 2;
        return;
    }
    // RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|; SRTT = 7/8 SRTT + 1/8 R (rounded to nearest).
    const TimeUs deviation = *srtt_ > rtt_us ? *srtt_ - rtt_us : rtt_us - *srtt_;
    rttvar_ = (3 * *rttvar_ + deviation + 2) / 4;
    srtt_ = (7 * *srtt_ + rtt_us + 4) / 8;
}

void RttEstimator::on_timeout() {
    // Doubling past max_rto_us changes nothing, so stop counting there (no overflow).
    if (rto() < config_.max_rto_us) ++backoff_;
}

TimeUs RttEstimator::rto() const {
    TimeUs base = config_.initial_rto_us;
    if (srtt_) base = *srtt_ + 4 * *rttvar_;
    base = std::max(base, config_.min_rto_us);
    for (unsigned i = 0; i < backoff_ && base < config_.max_rto_us; ++i) base *= 2;
    return std::clamp(base, config_.min_rto_us, config_.max_rto_us);
}

}  // namespace metaroce
