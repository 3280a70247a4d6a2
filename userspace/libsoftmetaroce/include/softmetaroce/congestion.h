// Sender congestion control (protocol.md section 10): a packet window that starts at the full
// window (256), with additive increase, DCTCP-style decrease on CE marks echoed in ACKs,
// halving on RTO (not below 16), and the receiver's fair-share cap. Loss alone does not shrink
// the window. Fixed point (1/1024 packet), like a kernel would.
#pragma once

#include <rdma/metaroce_wire.h>

#include <cstdint>

namespace metaroce {

struct CongestionConfig {
    std::uint32_t initial_cwnd = 256;  // the full window, as RoCE NICs start at line rate
    std::uint32_t min_cwnd = 1;
    std::uint32_t max_cwnd = 256;
    std::uint32_t rto_min_cwnd = METAROCE_RTO_MIN_CWND;  // a timeout halves cwnd, not below this
    unsigned alpha_gain_shift = 4;                       // g = 1/16
    // DCTCP starts from alpha = 1 (the first marked window halves cwnd), as Linux does.
    std::uint32_t initial_alpha_scaled = 1024;
};

class CongestionControl {
  public:
    static constexpr std::uint32_t kScale = 1024;

    explicit CongestionControl(const CongestionConfig& config = {});

    // An ACK acknowledged `newly_acked` packets for the first time and reported `ce_marked`
    // CE marks since the previous ACK.
    void on_ack(std::uint32_t newly_acked, std::uint32_t ce_marked);
    void on_rto();

    // Whole packets the sender may have in flight: min(cwnd, fair_share) when the receiver
    // sends a hint (fair_share != 0), at least 1.
    std::uint32_t window(std::uint16_t fair_share) const;

    double cwnd() const { return static_cast<double>(cwnd_scaled_) / kScale; }
    double alpha() const { return static_cast<double>(alpha_scaled_) / kScale; }
    std::uint32_t cwnd_scaled() const { return cwnd_scaled_; }

  private:
    void end_observation_window();

    CongestionConfig config_;
    std::uint32_t cwnd_scaled_;
    std::uint32_t alpha_scaled_;
    // The current observation window ("window of data" for alpha): packets acknowledged and CE
    // marks seen in it, and its length (cwnd when it began).
    std::uint32_t window_acked_ = 0;
    std::uint32_t window_marked_ = 0;
    std::uint32_t window_length_;
};

}  // namespace metaroce
