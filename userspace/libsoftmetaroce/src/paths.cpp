#include "softmetaroce/paths.h"

#include <rdma/metaroce_wire.h>

#include <algorithm>

namespace metaroce {
namespace {

// An odd stride keeps index * stride distinct modulo 2^14 for all 64 paths.
constexpr std::uint32_t kEntropyStride = 0x0a5b;

}  // namespace

std::string_view to_string(PathState state) {
    switch (state) {
        case PathState::Active:
            return "ACTIVE";
        case PathState::Suspect:
            return "SUSPECT";
        case PathState::Failed:
            return "FAILED";
    }
    return "PATH_STATE(?)";
}

PathSet::PathSet(std::uint32_t qpn, unsigned count, const PathConfig& config) : config_(config) {
    const unsigned n = std::clamp(count, 1u, kMaxPaths);
    paths_.resize(n);
    for (unsigned i = 0; i < n; ++i) paths_[i].entropy = entropy_for(qpn, i);
}

std::uint16_t PathSet::entropy_for(std::uint32_t qpn, unsigned index) {
    // Fibonacci hashing of the QPN; the top 14 bits are the best mixed.
    const std::uint32_t base = (qpn * 0x9e3779b1u) >> 18;
    return static_cast<std::uint16_t>((base + index * kEntropyStride) & METAROCE_ENTROPY_MASK);
}

std::optional<TimeUs> PathSet::best_rtt() const {
    std::optional<TimeUs> best;
    for (const Path& p : paths_) {
        if (p.state == PathState::Active && p.srtt && (!best || *p.srtt < *best)) best = p.srtt;
    }
    return best;
}

TimeUs PathSet::suspect_probe_interval(const Path& path) const {
    return std::max<TimeUs>(1, path.srtt.value_or(probe_interval_));
}

bool PathSet::too_slow(const Path& path, std::optional<TimeUs> best) const {
    return best && path.srtt && *path.srtt > 2 * *best;
}

PathChoice PathSet::choose(TimeUs now, std::optional<std::uint16_t> avoid, bool allow_probe,
                           TimeUs probe_interval) {
    probe_interval_ = probe_interval;
    const unsigned n = size();
    const auto avoided = [&](unsigned i) { return avoid && *avoid == i; };

    // A SUSPECT or FAILED path whose probe is due gets this (new) packet.
    if (allow_probe) {
        for (unsigned k = 0; k < n; ++k) {
            const unsigned i = (next_probe_ + k) % n;
            const Path& p = paths_[i];
            if (p.state != PathState::Active && now >= p.next_probe_at && !avoided(i)) {
                next_probe_ = (i + 1) % n;
                return {static_cast<std::uint16_t>(i), true};
            }
        }
    }

    // Round-robin over ACTIVE paths that are not much slower than the best one.
    const std::optional<TimeUs> best = best_rtt();
    std::optional<unsigned> fallback;  // the avoided path, if it is the only usable one
    for (unsigned k = 0; k < n; ++k) {
        const unsigned i = (next_active_ + k) % n;
        Path& p = paths_[i];
        const bool rested = !p.last_picked || now - *p.last_picked >= *p.srtt;
        if (p.state != PathState::Active || (too_slow(p, best) && !rested)) continue;
        if (avoided(i)) {
            fallback = i;
            continue;
        }
        next_active_ = (i + 1) % n;
        p.last_picked = now;
        return {static_cast<std::uint16_t>(i), false};
    }
    if (fallback) {
        paths_[*fallback].last_picked = now;
        return {static_cast<std::uint16_t>(*fallback), false};
    }

    // No ACTIVE path: keep probing them all in turn (the QP fails only by the retry rules).
    for (unsigned k = 0; k < n; ++k) {
        const unsigned i = (next_any_ + k) % n;
        if (avoided(i) && n > 1) continue;
        next_any_ = (i + 1) % n;
        paths_[i].last_picked = now;
        return {static_cast<std::uint16_t>(i), true};
    }
    return {0, true};
}

void PathSet::on_sent(std::uint16_t index, const PathChoice& choice, TimeUs now) {
    Path& p = paths_[index];
    ++p.inflight;
    ++p.sent;
    if (!choice.probe) return;
    // Pace the next probe: one per RTT on a SUSPECT path, one per backoff on a FAILED one.
    if (p.state == PathState::Suspect) {
        p.next_probe_at = now + suspect_probe_interval(p);
    } else if (p.state == PathState::Failed) {
        p.next_probe_at = now + p.fail_backoff;
    }
}

void PathSet::mark_delivering(Path& p) {
    p.consecutive_losses = 0;
    if (p.state != PathState::Active) {
        p.state = PathState::Active;
        p.fail_backoff = 0;
        p.next_probe_at = 0;
    }
}

void PathSet::on_delivered(std::uint16_t index) {
    Path& p = paths_[index];
    if (p.inflight > 0) --p.inflight;
    ++p.delivered;
    mark_delivering(p);
}

void PathSet::on_lost(std::uint16_t index, TimeUs now) {
    Path& p = paths_[index];
    if (p.inflight > 0) --p.inflight;
    ++p.lost;
    ++p.consecutive_losses;
    if (p.state == PathState::Failed) {
        // A lost probe: wait twice as long before the next one.
        p.fail_backoff = std::min(2 * p.fail_backoff, config_.max_fail_backoff_us);
        p.next_probe_at = now + p.fail_backoff;
    } else if (p.consecutive_losses >= config_.fail_after_losses) {
        p.state = PathState::Failed;
        p.fail_backoff = config_.initial_fail_backoff_us;
        p.next_probe_at = now + p.fail_backoff;
    } else if (p.state == PathState::Active &&
               p.consecutive_losses >= config_.suspect_after_losses) {
        p.state = PathState::Suspect;
        p.next_probe_at = now + suspect_probe_interval(p);
    }
}

void PathSet::on_withdrawn(std::uint16_t index) {
    Path& p = paths_[index];
    if (p.inflight > 0) --p.inflight;
}

void PathSet::on_echo(std::uint16_t index, TimeUs rtt_us, std::uint32_t ce_marks) {
    if (index >= paths_.size()) return;
    Path& p = paths_[index];
    p.srtt = p.srtt ? (7 * *p.srtt + rtt_us + 4) / 8 : rtt_us;
    p.ce_marks += ce_marks;
    mark_delivering(p);
}

unsigned PathSet::count_in(PathState state) const {
    return static_cast<unsigned>(std::count_if(
        paths_.begin(), paths_.end(), [state](const Path& p) { return p.state == state; }));
}

}  // namespace metaroce
