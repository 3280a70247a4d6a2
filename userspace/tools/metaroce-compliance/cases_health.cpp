// The DUT survives garbage, and still moves data correctly with an independent implementation
// (the libsoftmetaroce model) afterwards.
#include <cstring>

#include "harness.h"
#include "pattern.h"
#include "soft_endpoint.h"
#include "softmetaroce/queue_pair.h"
#include "softmetaroce/sim/rng.h"

namespace metaroce::compliance {
namespace {

void garbage_flood(Env& env) {
    Conn live(env);
    Conn victim(env);
    CounterCheck counters(env);
    sim::SimRng rng(0x6a7b);
    // 1. Random datagrams. Half look like version 1 packets of a valid opcode addressed from
    //    our peer QP to the live QP, so that they reach deep into validation; their PSN is
    //    kept outside the receive window so that none can be accepted by chance.
    static const std::uint8_t kOps[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x10};
    for (int i = 0; i < 3000; ++i) {
        std::vector<std::uint8_t> b(rng.below(1400));
        for (auto& x : b) x = static_cast<std::uint8_t>(rng.next());
        if (b.size() >= 24 && rng.chance(0.5)) {
            b[0] = 0x10;
            b[1] = kOps[rng.below(6)];
            b[3] = 0;
            const std::uint32_t dqpn = live.dut_qpn();
            const std::uint32_t sqpn = live.fake_qpn();
            const Psn psn = psn_add(live.rq_psn(), 1000 + rng.below(1 << 20));
            for (int k = 0; k < 4; ++k) {
                b[4 + k] = static_cast<std::uint8_t>(dqpn >> (24 - 8 * k));
                b[8 + k] = static_cast<std::uint8_t>(sqpn >> (24 - 8 * k));
                b[12 + k] = static_cast<std::uint8_t>(psn >> (24 - 8 * k));
            }
        }
        live.send_bytes(b, static_cast<std::uint16_t>(rng.below(64)));
    }
    // 2. Valid packets of every kind for the victim QP, each with a few bits flipped: some may
    //    be accepted, refused or move the victim to the error state; none may hurt the DUT.
    const Psn r = victim.rq_psn();
    std::vector<std::vector<std::uint8_t>> seeds;
    for (const Packet& p : victim.write_message(r, 0x1000, bytes_of(3000, 1))) {
        seeds.push_back(encode(p));
    }
    for (const Packet& p : victim.send_message(r, 0, bytes_of(100, 2), 7))
        seeds.push_back(encode(p));
    seeds.push_back(encode(victim.read_request(r, victim.mr().addr(), victim.mr().rkey(), 5000)));
    seeds.push_back(encode(victim.ack(victim.sq_psn(), {psn_add(victim.sq_psn(), 3)})));
    seeds.push_back(encode(victim.ack(victim.sq_psn(), {}, Syndrome::RnrNak, victim.sq_psn(), 3)));
    for (int i = 0; i < 3000; ++i) {
        std::vector<std::uint8_t> b = seeds[rng.below(seeds.size())];
        const unsigned flips = 1 + static_cast<unsigned>(rng.below(4));
        for (unsigned f = 0; f < flips; ++f) {
            b[rng.below(b.size())] ^= static_cast<std::uint8_t>(1u << rng.below(8));
        }
        if (rng.chance(0.1)) b.resize(rng.below(b.size() + 1));
        victim.send_bytes(b, static_cast<std::uint16_t>(rng.below(64)));
    }
    victim.collect(300);  // whatever it answered must be valid MetaRoCE (checked on receipt)
    // The live QP was not disturbed: its window is where it was.
    live.probe(live.rq_psn(), psn_next(live.rq_psn()));
    live.expect_state(IBV_QPS_RTS);
    counters.expect_delta("rx_malformed", 1000, /*at_least=*/true);
    note("rx_malformed +%llu, rx_out_of_window +%llu, rx_unknown_qp +%llu",
         static_cast<unsigned long long>(counters.delta("rx_malformed")),
         static_cast<unsigned long long>(counters.delta("rx_out_of_window")),
         static_cast<unsigned long long>(counters.delta("rx_unknown_qp")));
}

// A transfer in both directions between a fresh DUT QP and the model: WRITE, READ and SEND
// each way, every byte checked.
void transfer_with_model(Env& env) {
    Conn c(env);
    constexpr std::uint32_t kSize = 64 * 1024;
    constexpr std::uint32_t kSendSize = 3000;
    constexpr std::uint32_t kModelKey = 0x77;
    constexpr std::uint64_t kModelAddr = 0x0000700000000000ull;
    constexpr std::uint32_t kModelRecvKey = 0x78;
    constexpr std::uint64_t kModelRecvAddr = 0x0000710000000000ull;

    // The model's side of the connection: our fictitious QP, now real.
    MemoryModel memory;
    memory.register_region(kModelKey, kModelAddr, 2 * kSize,
                           access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead);
    tools::fill_pattern(memory.region_bytes(kModelKey).subspan(kSize, kSize), 0x1001);
    memory.register_region(kModelRecvKey, kModelRecvAddr, 8192, access::kLocalWrite);
    QpConfig config = make_qp_config(c.fake_qpn(), c.dut_qpn(), c.rq_psn(), c.sq_psn(), c.mtu(), 8);
    config.sender.timeout = 18;
    config.sender.ts_offset = env.random24() << 8;  // the secret of protocol.md section 12.1
    QueuePair model(config, memory);
    model.post_recv(ReceiveWqe{500, {{kModelRecvKey, kModelRecvAddr, 8192}}});
    tools::SoftEndpoint endpoint(model, env.udp(),
                                 {env.options().dut_ip, env.options().port, 0.0, 1});

    // DUT memory: mr[0, kSize) receives the model's WRITE, mr[kSize, 2 kSize) is read by the
    // model (already patterned by Conn); local[0..] holds the DUT's sources and destinations.
    std::uint8_t* local = c.local().data();
    tools::fill_pattern({local, kSize}, 0x2001);              // DUT WRITE source
    tools::fill_pattern({local + kSize, kSendSize}, 0x2002);  // DUT SEND source
    std::memset(local + 2 * kSize, 0xa5, kSize);              // DUT READ destination
    c.post_recv(600, 3 * kSize, 8192);                        // for the model's SEND
    c.qp().post_send(IBV_WR_RDMA_WRITE, 1, c.local().addr(), kSize, c.local().lkey(), kModelAddr,
                     kModelKey);
    c.qp().post_send(IBV_WR_RDMA_READ, 2, c.local().addr() + 2 * kSize, kSize, c.local().lkey(),
                     kModelAddr + kSize, kModelKey);
    c.qp().post_send(IBV_WR_SEND, 3, c.local().addr() + kSize, kSendSize, c.local().lkey());

    const auto model_write = tools::pattern(kSize, 0x3001);
    const auto model_send = tools::pattern(kSendSize, 0x3002);
    WorkRequest w;
    w.wr_id = 11;
    w.opcode = WrOpcode::Write;
    w.data = model_write;
    w.remote_addr = c.mr().addr();
    w.rkey = c.mr().rkey();
    model.post_send(w, endpoint.now());
    WorkRequest rd;
    rd.wr_id = 12;
    rd.opcode = WrOpcode::Read;
    rd.remote_addr = c.mr().addr();  // reads back its own WRITE: it must see it
    rd.rkey = c.mr().rkey();
    rd.read_length = kSize;
    model.post_send(rd, endpoint.now());
    WorkRequest sd;
    sd.wr_id = 13;
    sd.opcode = WrOpcode::Send;
    sd.data = model_send;
    model.post_send(sd, endpoint.now());

    std::vector<Completion> model_send_cq, model_recv_cq;
    std::vector<ibv_wc> dut_send_cq, dut_recv_cq;
    const bool done = endpoint.run_until(
        [&] {
            for (Completion& x : model.poll_send_cq()) model_send_cq.push_back(std::move(x));
            for (Completion& x : model.poll_recv_cq()) model_recv_cq.push_back(std::move(x));
            for (const ibv_wc& x : tools::poll_cq(c.qp().send_cq(), 8, 0)) {
                dut_send_cq.push_back(x);
            }
            for (const ibv_wc& x : tools::poll_cq(c.qp().recv_cq(), 8, 0)) {
                dut_recv_cq.push_back(x);
            }
            return model_send_cq.size() == 3 && model_recv_cq.size() == 1 &&
                   dut_send_cq.size() == 3 && dut_recv_cq.size() == 1;
        },
        env.ms(30000));
    expect(done, format("transfer incomplete: model %zu/3 sends %zu/1 receives, DUT %zu/3 sends "
                        "%zu/1 receives",
                        model_send_cq.size(), model_recv_cq.size(), dut_send_cq.size(),
                        dut_recv_cq.size()));
    for (std::size_t i = 0; i < 3; ++i) {
        expect(model_send_cq[i].status == WcStatus::Success && model_send_cq[i].wr_id == 11 + i,
               format("model work request %llu: %s",
                      static_cast<unsigned long long>(model_send_cq[i].wr_id),
                      std::string(to_string(model_send_cq[i].status)).c_str()));
        expect(dut_send_cq[i].status == IBV_WC_SUCCESS && dut_send_cq[i].wr_id == 1 + i,
               format("DUT work request %llu: %s",
                      static_cast<unsigned long long>(dut_send_cq[i].wr_id),
                      ibv_wc_status_str(dut_send_cq[i].status)));
    }
    expect(std::memcmp(c.mr().data(), model_write.data(), kSize) == 0,
           "the model's WRITE is not in the DUT's memory");
    expect(model_send_cq[1].read_data == model_write,
           "the model's READ did not return what it wrote");
    expect(dut_recv_cq[0].status == IBV_WC_SUCCESS && dut_recv_cq[0].byte_len == kSendSize &&
               std::memcmp(local + 3 * kSize, model_send.data(), kSendSize) == 0,
           "the model's SEND did not arrive intact");
    const auto region = memory.region_bytes(kModelKey);
    expect(tools::first_mismatch(region.subspan(0, kSize), 0x2001) < 0,
           "the DUT's WRITE is not in the model's memory");
    expect(tools::first_mismatch({local + 2 * kSize, kSize}, 0x1001) < 0,
           "the DUT's READ returned wrong data");
    expect(
        model_recv_cq[0].status == WcStatus::Success && model_recv_cq[0].byte_len == kSendSize &&
            tools::first_mismatch(
                memory.gather(ReceiveWqe{500, {{kModelRecvKey, kModelRecvAddr, 8192}}}, kSendSize),
                0x2002) < 0,
        "the DUT's SEND did not arrive intact");
    std::size_t malformed = 0;
    for (const auto n : model.counters().malformed) malformed += n;
    expect(malformed == 0, format("the model rejected %zu packets of the DUT", malformed));
}

}  // namespace

std::vector<Case> health_cases() {
    return {
        {"garbage_flood",
         "6000 random and mutated datagrams: counted, no harm to a live QP (its window is "
         "unchanged), everything the DUT answers is valid",
         garbage_flood},
        {"transfer_with_model",
         "afterwards, a fresh QP moves data both ways with the libsoftmetaroce model: WRITE, "
         "READ, SEND, every byte checked",
         transfer_with_model},
    };
}

}  // namespace metaroce::compliance
