// Property tests: random workloads in both directions over a simulated fabric with random
// loss (0-20 %), duplication, reordering and dead paths, one seed per test. Whatever the
// schedule, every message is delivered exactly once with byte-exact data, completions are in
// order on both sides, the responder's SACK window always describes exactly the set of PSNs
// it received, and no sender ever resends a PSN it knows was received. With SENDs with
// invalidate in the mix, each ends its region's registration exactly once, after the WRITE
// to that region posted before it was placed. With atomics in the mix, each is executed
// exactly once, in posting order, after every WRITE posted before it: N fetch-adds of 1 leave
// the counter at exactly N having returned 0..N-1, and compare-and-swap chains (with misses
// and WRITEs to the word between them) return exactly the values a serial execution would.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "softmetaroce/sim/rng.h"
#include "test_support.h"

namespace metaroce {
namespace {

using namespace test;

constexpr std::uint32_t kWriteKey = 0x100;
constexpr std::uint64_t kWriteBase = 0x1000000;
constexpr std::uint32_t kReadKey = 0x200;
constexpr std::uint64_t kReadBase = 0x2000000;
constexpr std::uint32_t kReadRegion = 1 << 20;
constexpr std::uint32_t kRecvKey = 0x300;
constexpr std::uint64_t kRecvBase = 0x3000000;
constexpr std::uint32_t kFastKeyBase = 0x44000100;  // + 0x100 per fast-registration region
constexpr std::uint64_t kFastBase = 0x4000000;      // + kFastStride per region
constexpr std::uint64_t kFastStride = 0x100000;
// The words atomics work on: a counter for fetch-adds, a word for compare-and-swap chains.
constexpr std::uint32_t kAtomicKey = 0x500;
constexpr std::uint64_t kAtomicBase = 0x5000000;
constexpr std::uint64_t kCounterAddr = kAtomicBase;
constexpr std::uint64_t kSwapAddr = kAtomicBase + 8;

struct ExpectedReceive {
    ReceiveWqe wqe;
    WcOpcode opcode = WcOpcode::Recv;
    std::vector<std::uint8_t> data;  // SEND: what lands in the WQE
    std::uint32_t byte_len = 0;
    std::optional<std::uint32_t> imm;
    std::optional<std::uint32_t> invalidated_rkey;
};

// A fast-registration region a SEND with invalidate ends, and what the WRITE before it put.
struct InvalidatedRegion {
    MemoryModel::FastRegId id = 0;
    std::uint32_t key = 0;
    std::vector<std::uint8_t> data;
};

// The traffic one QP sends to the other, and what the responder must end up with.
struct Workload {
    std::vector<WorkRequest> wrs;
    std::vector<ExpectedReceive> receives;
    std::vector<std::uint8_t> write_region;
    std::map<std::uint64_t, std::vector<std::uint8_t>> read_results;
    std::vector<InvalidatedRegion> invalidated;
    // Atomics: what each returns, and the words at the end.
    std::map<std::uint64_t, std::uint64_t> atomic_results;
    std::uint64_t fetch_adds = 0;
    std::uint64_t final_counter = 0;
    std::uint64_t final_swap_word = 0;
};

struct Mix {
    unsigned messages = 40;
    unsigned read_percent = 25;
    std::uint32_t max_packets = 12;  // usual message size bound, in MTUs
    // Of the other messages: a WRITE to a fast-registration region of the responder, then a
    // SEND with invalidate of its key (0: none, and no random draws for it).
    unsigned invalidate_percent = 0;
    // Of the other messages: atomics on the responder's two words (0: none, and no random
    // draws for them). Half fetch-adds of 1 to the counter, half compare-and-swaps on the
    // other word (most expecting its value, some not), now and then a WRITE to that word.
    unsigned atomic_percent = 0;
};

std::uint32_t random_length(sim::SimRng& rng, std::uint32_t mtu, std::uint32_t max_packets) {
    switch (rng.below(10)) {
        case 0:
            return 0;
        case 1:
            return mtu * static_cast<std::uint32_t>(1 + rng.below(max_packets));  // exact
        case 2:
        case 3:
            return static_cast<std::uint32_t>(rng.below(std::uint64_t{max_packets} * mtu + 1));
        default:
            return static_cast<std::uint32_t>(1 + rng.below(3 * mtu));
    }
}

// Builds a workload and prepares the responder's memory and receive queue for it.
Workload make_workload(sim::SimRng& rng, std::uint32_t mtu, const Mix& mix, MemoryModel& memory,
                       QueuePair& responder, std::uint64_t seed) {
    Workload w;
    const std::vector<std::uint8_t> readable =
        pattern_bytes(kReadRegion, static_cast<std::uint32_t>(seed));
    memory.register_region(kReadKey, kReadBase, kReadRegion, access::kRemoteRead);
    std::copy(readable.begin(), readable.end(), memory.region_bytes(kReadKey).begin());

    std::uint64_t write_cursor = 0;
    std::uint64_t recv_cursor = 0;
    std::uint64_t counter = 0;
    std::uint64_t swap_word = 0;
    bool last_was_write = false;
    if (mix.atomic_percent != 0) {
        memory.register_region(kAtomicKey, kAtomicBase, 16,
                               access::kRemoteAtomic | access::kRemoteWrite);
    }
    for (unsigned i = 0; i < mix.messages; ++i) {
        WorkRequest wr;
        wr.wr_id = w.wrs.size();
        const unsigned pick = static_cast<unsigned>(rng.below(100));
        if (pick < mix.read_percent) {
            wr.opcode = WrOpcode::Read;
        } else if (mix.atomic_percent != 0 && rng.below(100) < mix.atomic_percent) {
            wr.rkey = kAtomicKey;
            unsigned kind = static_cast<unsigned>(rng.below(10));
            // Two WRITEs of one QP may land in either order (section 6): none follows
            // another without an atomic on the word between them.
            if (kind == 9 && last_was_write) kind = 5;
            last_was_write = kind == 9;
            if (kind < 5) {
                wr.opcode = WrOpcode::AtomicFetchAdd;
                wr.remote_addr = kCounterAddr;
                wr.swap_add = 1;
                w.atomic_results[wr.wr_id] = counter++;
                ++w.fetch_adds;
            } else if (kind < 9) {
                // Mostly a hit (the chain goes on), sometimes a miss (the word stays).
                wr.opcode = WrOpcode::AtomicCmpSwp;
                wr.remote_addr = kSwapAddr;
                const bool hit = kind < 8;
                wr.compare = hit ? swap_word : swap_word ^ 0x8000000000000001ull;
                wr.swap_add = rng.next();
                w.atomic_results[wr.wr_id] = swap_word;
                if (hit) swap_word = wr.swap_add;
            } else {
                // A WRITE of the word, in its native byte order: the atomics after it must
                // see it, even when they overtake it on the fabric. It lands on arrival, so
                // it may land before an earlier atomic executes: it is fenced, as the
                // application must fence a WRITE after a READ or an atomic of the same bytes
                // (protocol.md section 6, ordering guarantees).
                wr.opcode = WrOpcode::Write;
                wr.fence = true;
                wr.remote_addr = kSwapAddr;
                swap_word = rng.next();
                wr.data.resize(8);
                std::memcpy(wr.data.data(), &swap_word, 8);
            }
            w.wrs.push_back(std::move(wr));
            continue;
        } else if (mix.invalidate_percent != 0 && rng.below(100) < mix.invalidate_percent) {
            // The WRITE, then the SEND with invalidate (below) of the region it wrote to.
            const auto n = static_cast<std::uint32_t>(w.invalidated.size());
            InvalidatedRegion r;
            r.key = kFastKeyBase + 0x100 * n;
            r.data = pattern_bytes(random_length(rng, mtu, mix.max_packets),
                                   static_cast<std::uint32_t>(seed * 3000 + i));
            const auto len = static_cast<std::uint32_t>(r.data.size());
            r.id = memory.alloc_fast_reg_region(len);
            EXPECT_TRUE(memory.fast_register(r.id, r.key, kFastBase + kFastStride * n, len,
                                             access::kRemoteWrite));
            WorkRequest write;
            write.wr_id = w.wrs.size();
            write.opcode = WrOpcode::Write;
            write.data = r.data;
            write.remote_addr = kFastBase + kFastStride * n;
            write.rkey = r.key;
            w.wrs.push_back(std::move(write));
            wr.wr_id = w.wrs.size();
            wr.opcode = WrOpcode::SendWithInv;
            wr.invalidate_rkey = r.key;
            w.invalidated.push_back(std::move(r));
        } else {
            static constexpr WrOpcode kOthers[] = {WrOpcode::Send,        WrOpcode::Send,
                                                   WrOpcode::SendWithImm, WrOpcode::Write,
                                                   WrOpcode::Write,       WrOpcode::WriteWithImm};
            wr.opcode = kOthers[rng.below(6)];
        }
        if (wr.is_read()) {
            // Some READs are longer than one READ message (64 packets).
            const std::uint32_t len = rng.below(8) == 0
                                          ? static_cast<std::uint32_t>(rng.below(100 * mtu))
                                          : random_length(rng, mtu, mix.max_packets);
            const std::uint64_t offset = rng.below(kReadRegion - len + 1);
            wr.remote_addr = kReadBase + offset;
            wr.rkey = kReadKey;
            wr.read_length = len;
            w.read_results[wr.wr_id] = {readable.begin() + offset, readable.begin() + offset + len};
        } else {
            wr.data = pattern_bytes(random_length(rng, mtu, mix.max_packets),
                                    static_cast<std::uint32_t>(seed * 1000 + wr.wr_id));
            const auto len = static_cast<std::uint32_t>(wr.data.size());
            if (wr.has_imm()) wr.imm = static_cast<std::uint32_t>(rng.next());
            if (wr.is_write()) {
                wr.remote_addr = kWriteBase + write_cursor;
                wr.rkey = kWriteKey;
                w.write_region.resize(write_cursor + len + 8, 0);
                std::copy(wr.data.begin(), wr.data.end(), w.write_region.begin() + write_cursor);
                write_cursor += len + 8;
            }
            if (wr.consumes_receive_wqe()) {
                ExpectedReceive r;
                r.wqe.wr_id = 1000 + wr.wr_id;
                // SENDs scatter over one or two SGEs with some room to spare.
                const std::uint32_t room =
                    wr.is_send() ? len + static_cast<std::uint32_t>(rng.below(64)) : 0;
                const std::uint32_t split =
                    room == 0 ? 0 : static_cast<std::uint32_t>(rng.below(room + 1));
                r.wqe.sges.push_back({kRecvKey, kRecvBase + recv_cursor, split});
                r.wqe.sges.push_back(
                    {kRecvKey, kRecvBase + recv_cursor + split + 16, room - split});
                recv_cursor += room + 32;
                r.opcode = wr.is_send() ? WcOpcode::Recv : WcOpcode::RecvRdmaWithImm;
                if (wr.is_send()) r.data = wr.data;
                r.byte_len = len;
                if (wr.has_imm()) r.imm = wr.imm;
                if (wr.has_inv()) r.invalidated_rkey = wr.invalidate_rkey;
                w.receives.push_back(r);
            }
        }
        w.wrs.push_back(std::move(wr));
    }
    w.final_counter = counter;
    w.final_swap_word = swap_word;
    memory.register_region(kWriteKey, kWriteBase, static_cast<std::uint32_t>(w.write_region.size()),
                           access::kRemoteWrite);
    memory.register_region(kRecvKey, kRecvBase, static_cast<std::uint32_t>(recv_cursor + 1),
                           access::kLocalWrite);
    for (const ExpectedReceive& r : w.receives) {
        EXPECT_TRUE(responder.post_recv(r.wqe));
    }
    return w;
}

// An independent record of the PSNs a responder received, from the datagrams delivered to it.
class SackOracle {
  public:
    SackOracle(Psn initial, std::uint32_t mtu) : initial_(initial), mtu_(mtu) {}

    void on_delivered(const Datagram& d) {
        const auto decoded = decode(d.bytes, {mtu_});
        ASSERT_TRUE(decoded.ok());
        const Packet& p = *decoded;
        std::uint32_t count = 0;
        if (p.bth.opcode == Opcode::Send || p.bth.opcode == Opcode::Write) count = 1;
        if (p.bth.opcode == Opcode::ReadRequest) count = read_response_packets(p.rreq().len, mtu_);
        if (is_atomic_request(p.bth.opcode)) count = 1;
        for (std::uint32_t k = 0; k < count; ++k) {
            const std::int64_t offset = psn_diff(psn_add(p.bth.psn, k), initial_);
            ASSERT_GE(offset, 0);
            if (static_cast<std::size_t>(offset) >= got_.size()) got_.resize(offset + 1, false);
            got_[offset] = true;
        }
        while (static_cast<std::size_t>(cum_) < got_.size() && got_[cum_]) ++cum_;
    }

    // The responder's window describes exactly the PSNs received.
    void check(const SackBitmap& window) const {
        ASSERT_EQ(psn_diff(window.cum_psn(), initial_), cum_);
        for (std::int64_t o = cum_; o <= cum_ + SackBitmap::kBits; ++o) {
            const bool got = static_cast<std::size_t>(o) < got_.size() && got_[o];
            ASSERT_EQ(window.received(psn_add(initial_, o)), got) << "offset " << o;
        }
    }

  private:
    Psn initial_;
    std::uint32_t mtu_;
    std::vector<bool> got_;
    std::int64_t cum_ = 0;
};

struct Scenario {
    std::uint64_t seed = 1;
    std::uint32_t mtu = 1024;
    Mix mix_a;  // traffic A -> B
    Mix mix_b;  // traffic B -> A
    bool near_wrap = false;
    double max_loss = 0.2;
    unsigned dead_paths = 0;           // black-holed paths of A -> B for the whole run
    unsigned dead_response_paths = 0;  // black-holed paths of B -> A
};

// Soak runs: METAROCE_PROPERTY_SCALE=N multiplies the messages of every scenario and
// METAROCE_PROPERTY_SEEDS=N runs N seeds per suite (defaults: 1 and 30).
unsigned env_or(const char* name, unsigned fallback) {
    const char* value = std::getenv(name);
    const unsigned n =
        value == nullptr ? 0 : static_cast<unsigned>(std::strtoul(value, nullptr, 10));
    return n == 0 ? fallback : n;
}

unsigned scale() { return env_or("METAROCE_PROPERTY_SCALE", 1); }

std::uint64_t seeds(unsigned fallback) { return env_or("METAROCE_PROPERTY_SEEDS", fallback); }

void run_scenario(Scenario s) {
    s.mix_a.messages *= scale();
    s.mix_b.messages *= scale();
    sim::SimRng rng(s.seed);
    const auto link = [&rng, &s] {
        sim::LinkConfig c;
        c.delay_us = 5 + rng.below(10);
        // Reordering: either wild per-packet jitter, or routes of different lengths with
        // little jitter (closer to a real ECMP fabric).
        if (rng.chance(0.5)) {
            c.jitter_us = rng.below(40);
        } else {
            c.route_spread_us = rng.below(30);
            c.jitter_us = rng.below(3);
        }
        c.loss_rate = rng.uniform() * s.max_loss;
        c.duplicate_rate = rng.uniform() * 0.05;
        return c;
    };
    SimPairOptions options;
    options.seed = s.seed;
    options.mtu = s.mtu;
    options.a_to_b = link();
    options.b_to_a = link();
    if (s.near_wrap) {
        options.a_sq_psn = 0xffffff - static_cast<Psn>(rng.below(300));
        options.b_sq_psn = 0xffffff - static_cast<Psn>(rng.below(300));
    } else {
        options.a_sq_psn = static_cast<Psn>(rng.below(1u << 24));
        options.b_sq_psn = static_cast<Psn>(rng.below(1u << 24));
    }
    SCOPED_TRACE(::testing::Message() << "seed " << s.seed << " mtu " << s.mtu << " loss "
                                      << options.a_to_b.loss_rate << "/" << options.b_to_a.loss_rate
                                      << " psn " << options.a_sq_psn << "/" << options.b_sq_psn);
    SimPair pair(options);
    for (unsigned i = 0; i < s.dead_paths; ++i) {
        const std::uint16_t entropy = PathSet::entropy_for(kQpA, i * 3);
        pair.net.link(pair.id_a, pair.id_b)
            .set_blackhole(static_cast<std::uint16_t>(METAROCE_ENTROPY_BASE | entropy), true);
    }
    for (unsigned i = 0; i < s.dead_response_paths; ++i) {
        const std::uint16_t entropy = PathSet::entropy_for(kQpB, i * 3 + 1);
        pair.net.link(pair.id_b, pair.id_a)
            .set_blackhole(static_cast<std::uint16_t>(METAROCE_ENTROPY_BASE | entropy), true);
    }

    const Workload to_b = make_workload(rng, s.mtu, s.mix_a, pair.mem_b, *pair.b, s.seed);
    const Workload to_a = make_workload(rng, s.mtu, s.mix_b, pair.mem_a, *pair.a, s.seed + 7);

    SackOracle oracle_b(options.a_sq_psn, s.mtu);  // what B received from A
    SackOracle oracle_a(options.b_sq_psn, s.mtu);
    std::optional<sim::NodeId> check_node;
    bool failed = false;
    pair.net.set_delivery_tap([&](sim::NodeId, sim::NodeId to, const Datagram& d, TimeUs) {
        (to == pair.id_b ? oracle_b : oracle_a).on_delivered(d);
        check_node = to;
    });
    pair.net.set_after_event([&] {
        if (!check_node || failed) return;
        if (*check_node == pair.id_b) {
            oracle_b.check(pair.b->receiver().window());
        } else {
            oracle_a.check(pair.a->receiver().window());
        }
        check_node.reset();
        failed = ::testing::Test::HasFatalFailure();
    });
    // Never resend what the sender knows was received.
    pair.net.set_send_tap([&](sim::NodeId from, sim::NodeId, const Datagram& d, TimeUs) {
        const auto decoded = decode(d.bytes, {s.mtu});
        ASSERT_TRUE(decoded.ok()) << decoded.error();
        const Opcode op = decoded->bth.opcode;
        if (op != Opcode::Send && op != Opcode::Write) return;
        const Sender& sender = (from == pair.id_a ? *pair.a : *pair.b).sender();
        ASSERT_FALSE(sender.known_delivered(decoded->bth.psn)) << "resent PSN " << decoded->bth.psn;
    });

    for (const WorkRequest& wr : to_b.wrs) pair.a->post_send(wr, pair.now());
    for (const WorkRequest& wr : to_a.wrs) pair.b->post_send(wr, pair.now());

    const bool done = pair.run_until(
        [&] {
            return failed || (pair.send_cq_a.size() == to_b.wrs.size() &&
                              pair.send_cq_b.size() == to_a.wrs.size() &&
                              pair.recv_cq_b.size() == to_b.receives.size() &&
                              pair.recv_cq_a.size() == to_a.receives.size());
        },
        /*deadline=*/std::getenv("METAROCE_PROPERTY_DEADLINE")
            ? std::strtoull(std::getenv("METAROCE_PROPERTY_DEADLINE"), nullptr, 10)
            : 120'000'000);
    const bool any_error = pair.a->in_error() || pair.b->in_error();
    if ((!done || any_error) && std::getenv("METAROCE_PROPERTY_STATS") != nullptr) {
        for (QueuePair* qp : {pair.a.get(), pair.b.get()}) {
            const Sender& tx = qp->sender();
            std::printf(
                "qp %x: una %u nxt %u inflight %u window %u wrs %zu rnr %d err %d timer %llu "
                "events %llu\n",
                qp->qpn(), tx.oldest_unacked(), tx.next_psn(), tx.inflight(), tx.window(),
                tx.outstanding_wrs(), tx.waiting_rnr(), qp->in_error(),
                (unsigned long long)qp->next_timer().value_or(0),
                (unsigned long long)pair.net.events());
            const auto& c = tx.counters();
            std::printf(
                "  new %llu retx %llu rto %llu rereads %llu probes %llu acks %llu stale %llu resp "
                "%llu dupresp %llu unexp %llu\n",
                (unsigned long long)c.new_packets, (unsigned long long)c.retransmissions,
                (unsigned long long)c.rto_expiries, (unsigned long long)c.rereads,
                (unsigned long long)c.probes, (unsigned long long)c.acks,
                (unsigned long long)c.stale_acks, (unsigned long long)c.read_responses,
                (unsigned long long)c.duplicate_read_responses,
                (unsigned long long)c.unexpected_read_responses);
            const auto& r = qp->receiver().counters();
            std::printf("  rx cum %u packets %llu dups %llu pending_reads %zu executed %llu\n",
                        qp->receiver().window().cum_psn(), (unsigned long long)r.packets,
                        (unsigned long long)r.duplicates, qp->receiver().pending_reads(),
                        (unsigned long long)r.reads_executed);
            for (unsigned i = 0; i < tx.paths().size(); ++i) {
                const Path& p = tx.paths()[i];
                std::printf("  path %u %s sent %llu lost %llu inflight %u next_probe %llu\n", i,
                            std::string(to_string(p.state)).c_str(), (unsigned long long)p.sent,
                            (unsigned long long)p.lost, p.inflight,
                            (unsigned long long)p.next_probe_at);
            }
        }
    }
    ASSERT_FALSE(failed);
    ASSERT_TRUE(done) << "stuck at t=" << pair.now() << " A->B " << pair.send_cq_a.size() << "/"
                      << to_b.wrs.size() << " B->A " << pair.send_cq_b.size() << "/"
                      << to_a.wrs.size();
    // Let stragglers (duplicates, late ACKs) drain: nothing may change the outcome.
    pair.run_for(200'000);

    const auto check_direction = [&](const Workload& w, const std::vector<Completion>& send_cq,
                                     const std::vector<Completion>& recv_cq, QueuePair& requester,
                                     QueuePair& responder, MemoryModel& responder_memory) {
        ASSERT_EQ(send_cq.size(), w.wrs.size());
        for (std::size_t i = 0; i < send_cq.size(); ++i) {
            const Completion& c = send_cq[i];
            ASSERT_EQ(c.wr_id, i) << "send completions out of order";
            ASSERT_EQ(c.status, WcStatus::Success) << to_string(c.status);
            if (w.wrs[i].is_read()) {
                EXPECT_EQ(c.read_data, w.read_results.at(c.wr_id)) << i;
            }
            if (w.wrs[i].is_atomic()) {
                EXPECT_EQ(c.opcode, w.wrs[i].opcode == WrOpcode::AtomicCmpSwp ? WcOpcode::CompSwap
                                                                              : WcOpcode::FetchAdd);
                EXPECT_EQ(c.byte_len, 8u);
                EXPECT_EQ(c.atomic_value, w.atomic_results.at(c.wr_id)) << i;
            }
        }
        ASSERT_EQ(recv_cq.size(), w.receives.size());
        for (std::size_t i = 0; i < recv_cq.size(); ++i) {
            const Completion& c = recv_cq[i];
            const ExpectedReceive& e = w.receives[i];
            ASSERT_EQ(c.wr_id, e.wqe.wr_id) << "receive completions out of order";
            EXPECT_EQ(c.status, WcStatus::Success);
            EXPECT_EQ(c.opcode, e.opcode);
            EXPECT_EQ(c.byte_len, e.byte_len);
            EXPECT_EQ(c.imm, e.imm);
            EXPECT_EQ(c.invalidated_rkey, e.invalidated_rkey);
            if (e.opcode == WcOpcode::Recv) {
                EXPECT_EQ(responder_memory.gather(e.wqe, e.byte_len), e.data) << i;
            }
        }
        const auto region = responder_memory.region_bytes(kWriteKey);
        EXPECT_TRUE(
            std::equal(region.begin(), region.end(), w.write_region.begin(), w.write_region.end()));
        // Every SEND with invalidate ended its region's registration, once, and the WRITE
        // before it had landed in the region by then (or it would have been refused).
        for (const InvalidatedRegion& r : w.invalidated) {
            EXPECT_FALSE(responder_memory.fast_reg_valid(r.key)) << r.key;
            const auto bytes = responder_memory.fast_reg_bytes(r.id);
            EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), r.data.begin(), r.data.end()))
                << r.key;
        }
        // Exactly once: the counter is N after N fetch-adds, which returned a permutation of
        // 0..N-1 (in posting order, even: atomics run in PSN order); the swap word ends as
        // the serial execution of the chain leaves it.
        if (!w.atomic_results.empty()) {
            EXPECT_EQ(responder_memory.load_word(kAtomicKey, kCounterAddr), w.final_counter);
            EXPECT_EQ(w.final_counter, w.fetch_adds);
            std::vector<std::uint64_t> returned;
            for (std::size_t i = 0; i < send_cq.size(); ++i) {
                if (w.wrs[i].opcode == WrOpcode::AtomicFetchAdd && send_cq[i].atomic_value) {
                    returned.push_back(*send_cq[i].atomic_value);
                }
            }
            std::sort(returned.begin(), returned.end());
            ASSERT_EQ(returned.size(), w.fetch_adds);
            for (std::size_t k = 0; k < returned.size(); ++k) EXPECT_EQ(returned[k], k);
            EXPECT_EQ(responder_memory.load_word(kAtomicKey, kSwapAddr), w.final_swap_word);
            EXPECT_EQ(responder.receiver().counters().atomics_executed, w.atomic_results.size());
        }
        EXPECT_EQ(responder.receiver().counters().invalidations, w.invalidated.size());
        EXPECT_EQ(responder.receiver().counters().invalidations_ended_already, 0u);
        EXPECT_EQ(responder.receiver().counters().invalidate_refused, 0u);
        EXPECT_FALSE(requester.in_error());
        EXPECT_EQ(responder.receiver().counters().out_of_window, 0u);
        EXPECT_EQ(responder.receiver().counters().read_overflow, 0u);
        EXPECT_EQ(requester.sender().outstanding_wrs(), 0u);
        EXPECT_EQ(requester.sender().counters().invalid_acks, 0u);
        EXPECT_EQ(requester.sender().counters().bad_read_responses, 0u);
        for (std::size_t e = 0; e < kParseErrorCount; ++e) {
            EXPECT_EQ(requester.counters().malformed[e], 0u);
        }
    };
    check_direction(to_b, pair.send_cq_a, pair.recv_cq_b, *pair.a, *pair.b, pair.mem_b);
    check_direction(to_a, pair.send_cq_b, pair.recv_cq_a, *pair.b, *pair.a, pair.mem_a);
    if (std::getenv("METAROCE_PROPERTY_STATS") != nullptr) {
        const auto& sa = pair.a->sender().counters();
        const auto& sb = pair.b->sender().counters();
        std::printf(
            "seed %llu t=%llu us events=%llu | A: new %llu retx %llu rto %llu reorder %llu "
            "rereads %llu probes %llu cwnd %.1f | B: new %llu retx %llu rto %llu rereads %llu "
            "| dups at B %llu\n",
            (unsigned long long)s.seed, (unsigned long long)pair.now(),
            (unsigned long long)pair.net.events(), (unsigned long long)sa.new_packets,
            (unsigned long long)sa.retransmissions, (unsigned long long)sa.rto_expiries,
            (unsigned long long)sa.reorder_losses, (unsigned long long)sa.rereads,
            (unsigned long long)sa.probes, pair.a->sender().congestion().cwnd(),
            (unsigned long long)sb.new_packets, (unsigned long long)sb.retransmissions,
            (unsigned long long)sb.rto_expiries, (unsigned long long)sb.rereads,
            (unsigned long long)pair.b->receiver().counters().duplicates);
    }
    // Exactly once: nothing completed twice after the drain.
    EXPECT_EQ(pair.send_cq_a.size(), to_b.wrs.size());
    EXPECT_EQ(pair.recv_cq_b.size(), to_b.receives.size());
}

class RandomSchedules : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(RandomSchedules, BothDirectionsMixedTraffic) {
    Scenario s;
    s.seed = GetParam();
    // Segment sizes: of path MTUs 256, 1024 (1400 bytes, not a power of two) and 4096.
    static constexpr std::uint32_t kPathMtus[] = {256, 1024, 4096};
    s.mtu = segment_size(kPathMtus[s.seed % 3]);
    run_scenario(s);
}

TEST_P(RandomSchedules, PsnWrap) {
    Scenario s;
    s.seed = GetParam() + 1000;
    s.mtu = 256;
    s.near_wrap = true;
    s.mix_a.messages = 30;
    s.mix_b.messages = 30;
    run_scenario(s);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomSchedules, ::testing::Range<std::uint64_t>(1, 1 + seeds(30)));

class ReadSchedules : public ::testing::TestWithParam<std::uint64_t> {};

// Mostly READs, so READ responses (B -> A) are lost, duplicated and reordered a lot.
TEST_P(ReadSchedules, ReadsWithLostResponses) {
    Scenario s;
    s.seed = GetParam() + 2000;
    s.mtu = 256;
    s.mix_a = Mix{30, 90, 20};
    s.mix_b = Mix{5, 0, 4};
    run_scenario(s);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ReadSchedules, ::testing::Range<std::uint64_t>(1, 1 + seeds(10)));

class InvalidateSchedules : public ::testing::TestWithParam<std::uint64_t> {};

// SENDs with invalidate, each after a WRITE to the region it invalidates, among the rest of
// the traffic both ways: whatever is lost, duplicated or reordered, each WRITE lands and each
// SEND invalidates exactly once, at completion (protocol.md section 6).
TEST_P(InvalidateSchedules, WritesThenSendsWithInvalidate) {
    Scenario s;
    s.seed = GetParam() + 5000;
    static constexpr std::uint32_t kPathMtus[] = {256, 1024};
    s.mtu = segment_size(kPathMtus[s.seed % 2]);
    s.mix_a = Mix{40, 10, 12, 35};
    s.mix_b = Mix{20, 10, 8, 35};
    run_scenario(s);
}

INSTANTIATE_TEST_SUITE_P(Seeds, InvalidateSchedules,
                         ::testing::Range<std::uint64_t>(1, 1 + seeds(10)));

class AtomicSchedules : public ::testing::TestWithParam<std::uint64_t> {};

// Mostly atomics, both ways, among WRITEs, READs and SENDs: whatever requests and responses
// are lost, duplicated or reordered, each atomic is executed once (section 5).
TEST_P(AtomicSchedules, ExactlyOnceUnderLossDuplicationAndReordering) {
    Scenario s;
    s.seed = GetParam() + 6000;
    static constexpr std::uint32_t kPathMtus[] = {256, 1024};
    s.mtu = segment_size(kPathMtus[s.seed % 2]);
    s.mix_a = Mix{80, 10, 6, 0, 70};
    s.mix_b = Mix{30, 10, 6, 0, 50};
    run_scenario(s);
}

// Near the PSN wrap: the record of executed atomics is keyed by PSN.
TEST_P(AtomicSchedules, AcrossPsnWrap) {
    Scenario s;
    s.seed = GetParam() + 7000;
    s.mtu = 256;
    s.near_wrap = true;
    s.mix_a = Mix{60, 0, 4, 0, 90};
    s.mix_b = Mix{10, 0, 4, 0, 50};
    run_scenario(s);
}

// Only fetch-adds and swaps one way, at heavy loss: long runs of lost responses.
TEST_P(AtomicSchedules, HeavyLossAtomicsOnly) {
    Scenario s;
    s.seed = GetParam() + 8000;
    s.mtu = 256;
    s.max_loss = 0.3;
    s.mix_a = Mix{120, 0, 1, 0, 100};
    s.mix_b = Mix{0, 0, 1};
    run_scenario(s);
}

INSTANTIATE_TEST_SUITE_P(Seeds, AtomicSchedules, ::testing::Range<std::uint64_t>(1, 1 + seeds(15)));

class DeadPathSchedules : public ::testing::TestWithParam<std::uint64_t> {};

// Two of the eight A -> B paths are black holes on top of the random loss.
TEST_P(DeadPathSchedules, DeliversDespiteBlackHoledPaths) {
    Scenario s;
    s.seed = GetParam() + 3000;
    s.mtu = 1024;
    s.dead_paths = 2;
    s.max_loss = 0.05;
    run_scenario(s);
}

// B only answers READs (it sends nothing of its own, so it never learns which of its paths
// are dead) and two of its eight paths are black holes: re-reads must still get through.
TEST_P(DeadPathSchedules, ReadsDespiteBlackHoledResponsePaths) {
    Scenario s;
    s.seed = GetParam() + 4000;
    s.mtu = 1024;
    s.mix_a = Mix{30, 90, 20};
    s.mix_b = Mix{0, 0, 1};
    s.dead_response_paths = 2;
    s.max_loss = 0.05;
    run_scenario(s);
}

INSTANTIATE_TEST_SUITE_P(Seeds, DeadPathSchedules,
                         ::testing::Range<std::uint64_t>(1, 1 + seeds(5)));

}  // namespace
}  // namespace metaroce
