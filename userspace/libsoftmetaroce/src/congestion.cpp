#include "softmetaroce/congestion.h"

#include <algorithm>

namespace metaroce {

CongestionControl::CongestionControl(const CongestionConfig& config)
    : config_(config),
      cwnd_scaled_(std::clamp(config.initial_cwnd, config.min_cwnd, config.max_cwnd) * kScale),
      alpha_scaled_(std::min(config.initial_alpha_scaled, kScale)),
      window_length_(std::max<std::uint32_t>(1, cwnd_scaled_ / kScale)) {}

void CongestionControl::on_ack(std::uint32_t newly_acked, std::uint32_t ce_marked) {
    // Additive increase: 1/cwnd per newly acknowledged packet that was not marked. The ACK
    // does not say which packets were marked, so the marks are charged to the newly acked ones.
    const std::uint32_t clean = newly_acked - std::min(newly_acked, ce_marked);
    const std::uint64_t max_scaled = std::uint64_t{config_.max_cwnd} * kScale;
    std::uint64_t cwnd = cwnd_scaled_;
    for (std::uint32_t i = 0; i < clean && cwnd < max_scaled; ++i) {
        cwnd += std::max<std::uint64_t>(1, std::uint64_t{kScale} * kScale / cwnd);
    }
    cwnd_scaled_ = static_cast<std::uint32_t>(std::min(cwnd, max_scaled));

    window_acked_ += newly_acked;
    window_marked_ += ce_marked;
    if (window_acked_ >= window_length_) end_observation_window();
}

void CongestionControl::end_observation_window() {
    // alpha = (1 - g) * alpha + g * F, F the fraction of marked packets in the window.
    const std::uint32_t marked = std::min(window_marked_, window_acked_);
    const std::uint32_t fraction =
        window_acked_ == 0
            ? 0
            : static_cast<std::uint32_t>(std::uint64_t{marked} * kScale / window_acked_);
    alpha_scaled_ = alpha_scaled_ - (alpha_scaled_ >> config_.alpha_gain_shift) +
                    (fraction >> config_.alpha_gain_shift);
    if (marked > 0) {
        // cwnd *= 1 - alpha / 2
        const std::uint64_t cut = std::uint64_t{cwnd_scaled_} * alpha_scaled_ / (2 * kScale);
        cwnd_scaled_ = std::max<std::uint32_t>(static_cast<std::uint32_t>(cwnd_scaled_ - cut),
                                               config_.min_cwnd * kScale);
    }
    window_acked_ = 0;
    window_marked_ = 0;
    window_length_ = std::max<std::uint32_t>(1, cwnd_scaled_ / kScale);
}

void CongestionControl::on_rto() {
    const std::uint32_t floor = std::min(config_.rto_min_cwnd, config_.max_cwnd) * kScale;
    cwnd_scaled_ = std::max<std::uint32_t>(cwnd_scaled_ / 2, floor);
}

std::uint32_t CongestionControl::window(std::uint16_t fair_share) const {
    std::uint32_t w = std::max<std::uint32_t>(1, cwnd_scaled_ / kScale);
    if (fair_share != 0) w = std::min<std::uint32_t>(w, fair_share);
    return std::max<std::uint32_t>(1, w);
}

}  // namespace metaroce
