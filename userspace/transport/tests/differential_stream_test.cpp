// The differential test of a stream's message layer (protocol-v2.md sections 8.1 and 9): the
// core's receiver (mrc_stream_rx) and requester (mrc_req) against the C++ model's StreamReceiver
// and Requester, written apart from the spec, on the same seeded inputs. Every verdict,
// completion, request run, NAK decision and response verdict must be the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "softmetaroce/v2/v2.h"

extern "C" {
#include "mrc_req.h"
#include "mrc_stream_rx.h"
}

namespace {

namespace m = softmetaroce::v2;

struct Seg {
    uint8_t op;
    uint32_t ssn, msn, offset, msg_len, payload;
};

int verdict(mrc_seg_verdict v) { return int(v); }
int verdict(m::SegVerdict v) {
    switch (v) {
        case m::SegVerdict::Take:
            return MRC_SEG_TAKE;
        case m::SegVerdict::Duplicate:
            return MRC_SEG_DUPLICATE;
        case m::SegVerdict::Beyond:
            return MRC_SEG_BEYOND;
        case m::SegVerdict::Refuse:
            return MRC_SEG_REFUSE;
    }
    return -1;
}

// A random stream's segments: SENDs, WRITEs, WRITE_IMMs, READs and atomics of random lengths,
// in SSN order, with the MSNs section 8.1 gives them.
std::vector<Seg> random_stream(std::mt19937 &rng, uint32_t ssn, uint32_t msn, int messages) {
    // The peer's requests, and its answers to ours: responses and NAKs are segments too.
    static const uint8_t ops[] = {MRC_OP_SEND,      MRC_OP_SEND_IMM,    MRC_OP_WRITE,
                                  MRC_OP_WRITE_IMM, MRC_OP_READ_REQ,    MRC_OP_FETCH_ADD,
                                  MRC_OP_READ_RESP, MRC_OP_ATOMIC_RESP, MRC_OP_NAK};
    const uint32_t mtu = 1024;
    std::vector<Seg> out;
    for (int i = 0; i < messages; i++) {
        uint8_t op = ops[rng() % std::size(ops)];
        uint16_t mask = mrc_opcode[op].mask;
        uint32_t len = op == MRC_OP_FETCH_ADD || op == MRC_OP_ATOMIC_RESP ? 8
                       : op == MRC_OP_NAK                                 ? 0
                                                                          : rng() % 6000;
        // A response's MSN is the SSN of the request it answers: any number here.
        uint32_t seg_msn = (mask & MRC_OPM_RESP) ? uint32_t(rng()) : msn;
        if (!(mask & MRC_OPM_PAYLOAD)) {
            out.push_back({op, ssn++, seg_msn, 0, len, 0});
            continue;
        }
        uint32_t n = std::max(1u, (len + mtu - 1) / mtu);
        for (uint32_t k = 0; k < n; k++)
            out.push_back({op, ssn++, seg_msn, k * mtu, len, std::min(mtu, len - k * mtu)});
        if (mask & MRC_OPM_RECV) msn++;
    }
    return out;
}

struct Stats {
    uint64_t naks = 0, completions = 0, requests = 0, refusals = 0;
};

// Receivers: the same arrivals (shuffled, duplicated, some segments refused for want of a receive
// WQE or a request slot, some forged past the map) into both; they must agree on everything.
std::string run_receivers(uint32_t seed, Stats &st) {
    std::mt19937 rng(seed);
    uint32_t ssn0 = rng(), msn0 = rng();
    std::vector<Seg> segs = random_stream(rng, ssn0, msn0, 1 + rng() % 200);
    std::vector<Seg> arrivals = segs;
    for (size_t i = 0; i < segs.size() / 2; i++) arrivals.push_back(segs[rng() % segs.size()]);
    for (int i = 0; i < 5; i++) {
        Seg s = segs[rng() % segs.size()];
        s.ssn += 4096 + rng() % 100000;  // past the map
        arrivals.push_back(s);
    }
    std::shuffle(arrivals.begin(), arrivals.end(), rng);
    // Refused segments come again later: as a sender's resends would.
    uint32_t max_reqs = 1 + rng() % 8;
    mrc_stream_rx c;
    mrc_stream_rx_init(&c, ssn0, msn0, max_reqs);
    m::StreamReceiver model(ssn0, msn0, max_reqs);
    uint32_t wqes = 0;  // receive WQEs posted so far, beyond msn0
    std::ostringstream why;
    for (size_t i = 0; i < arrivals.size(); i++) {
        const Seg &s = arrivals[i];
        if (rng() % 4 == 0) wqes += 1 + rng() % 3;
        mrc_hdr h{};
        h.opcode = s.op;
        h.ssn = s.ssn;
        h.msn = s.msn;
        h.offset = s.offset;
        h.msg_len = s.msg_len;
        m::Segment ms{m::Op(s.op), s.ssn, s.msn, s.offset, s.msg_len, s.payload};
        int cv = verdict(mrc_stream_rx_check(&c, &h)), mv = verdict(model.check(ms));
        if (cv != mv) {
            why << "arrival " << i << " ssn " << s.ssn - ssn0 << ": verdict core " << cv
                << ", model " << mv;
            return why.str();
        }
        if (cv == MRC_SEG_TAKE) {
            uint16_t mask = mrc_opcode[s.op].mask;
            bool c_full = mrc_stream_rx_requests_full(&c, s.ssn),
                 m_full = model.requests_full(s.ssn);
            if (c_full != m_full) return "requests_full differs at arrival " + std::to_string(i);
            bool no_wqe = (mask & MRC_OPM_RECV) && s.msn - msn0 >= wqes;
            if (no_wqe || ((mask & MRC_OPM_REQ) && c_full)) {
                bool cn = mrc_stream_rx_refuse(&c, s.ssn), mn = model.refuse(s.ssn);
                if (cn != mn) return "NAK decision differs at arrival " + std::to_string(i);
                st.naks += cn;
                arrivals.push_back(s);  // sent again
            } else {
                mrc_stream_rx_accept(&c, &h, s.payload);
                model.accept(ms);
            }
        } else if (cv == MRC_SEG_REFUSE) {
            st.refusals++;
            arrivals.push_back(s);
        }
        if (c.map.cum != model.cum()) return "cum differs at arrival " + std::to_string(i);
        if (c.refusing != model.refusing())
            return "refusing differs at arrival " + std::to_string(i);
        for (;;) {
            uint32_t cm;
            bool cd = mrc_stream_rx_next_completion(&c, &cm);
            auto md = model.next_completion();
            if (cd != md.has_value() || (cd && cm != *md))
                return "completion differs at arrival " + std::to_string(i);
            if (!cd) break;
            st.completions++;
        }
        for (;;) {
            uint32_t cr;
            bool cd = mrc_stream_rx_next_request(&c, &cr);
            auto md = model.next_request();
            if (cd != md.has_value() || (cd && cr != *md))
                return "request differs at arrival " + std::to_string(i);
            if (!cd) break;
            st.requests++;
        }
        // Receive WQEs keep coming, so every refusal ends: a run that does not is stuck.
        if (arrivals.size() > 50 * segs.size() + 1000) return "the stream does not finish";
    }
    if (c.map.cum != ssn0 + uint32_t(segs.size())) return "the stream did not finish";
    if (c.accepted != model.accepted() || c.duplicates != model.duplicates() ||
        c.beyond != model.beyond())
        return "counters differ at the end";
    return "";
}

TEST(DifferentialStream, ReceiversAgree) {
    Stats st;
    for (uint32_t seed = 1; seed <= 300; seed++) EXPECT_EQ(run_receivers(seed, st), "") << seed;
    // What the runs exercised: RNR refusals and their NAKs, completions, requests run.
    EXPECT_GT(st.naks, 100u);
    EXPECT_GT(st.refusals, 100u);
    EXPECT_GT(st.completions, 1000u);
    EXPECT_GT(st.requests, 500u);
}

// Requesters: the same work requests, the same deliveries, losses and resends, and the same
// responses (split into the responder's segments, delivered in any order, with stray and wrong
// ones) into both; they must agree on every segment, verdict and completion.
std::string run_requesters(uint32_t seed, Stats &st) {
    std::mt19937 rng(seed);
    const uint32_t mtu = 1024, nwrs = 64, ssn0 = rng(), msn0 = rng();
    const uint32_t max_reqs = 1 + rng() % 8;
    std::vector<mrc_wr> wrs(nwrs);
    mrc_req c;
    if (!mrc_req_init(&c, wrs.data(), nwrs, mtu, msn0, max_reqs)) return "init refused";
    mrc_stream_tx cst;
    mrc_stream_tx_init(&cst, ssn0);
    m::Requester model(nwrs, mtu, msn0, max_reqs);
    m::StreamSender mst(ssn0);
    struct Answer {
        uint8_t op;
        uint32_t req_ssn, len, next_offset;
    };
    std::vector<uint32_t> out;    // segments sent, not yet delivered
    std::vector<Answer> answers;  // requests whose response is partly owed
    auto fail = [&](int step, const std::string &what) {
        return "step " + std::to_string(step) + ": " + what;
    };
    auto same_seg = [](const mrc_seg_out &a, const m::SegmentOut &b) {
        if (a.wr != b.wr || (a.op == 0) != b.local) return false;
        if (b.local) return true;
        return a.op == uint8_t(b.op) && a.ssn == b.ssn && a.msn == b.msn && a.offset == b.offset &&
               a.payload_len == b.payload_len && a.msg_len == b.msg_len;
    };
    for (int step = 0; step < 4000; step++) {
        switch (rng() % 6) {
            case 0: {  // post
                static const uint8_t ops[] = {
                    MRC_OP_SEND,     MRC_OP_SEND_IMM,  MRC_OP_WRITE,   MRC_OP_WRITE_IMM,
                    MRC_OP_READ_REQ, MRC_OP_FETCH_ADD, MRC_OP_CMP_SWP, 0};
                uint8_t op = ops[rng() % std::size(ops)];
                uint32_t len = (op == MRC_OP_FETCH_ADD || op == MRC_OP_CMP_SWP) ? 8 : rng() % 5000;
                bool fence = rng() % 8 == 0;
                uint32_t ci;
                bool cp = mrc_req_post(&c, op, len, fence ? MRC_WR_FENCE : 0, &ci);
                auto mp =
                    model.post(op ? std::optional<m::Op>(m::Op(op)) : std::nullopt, len, fence);
                if (cp != mp.has_value() || (cp && ci != *mp)) return fail(step, "post differs");
                break;
            }
            case 1: {  // send what may be sent
                for (;;) {
                    mrc_seg_out co;
                    bool cn = mrc_req_next(&c, &cst, &co);
                    auto mn = model.next(mst);
                    if (cn != mn.has_value()) return fail(step, "next differs (presence)");
                    if (!cn) break;
                    if (!same_seg(co, *mn)) return fail(step, "next segment differs");
                    if (co.op == 0) continue;
                    mrc_stream_tx_sent(&cst, co.ssn);
                    mst.on_sent(co.ssn);
                    out.push_back(co.ssn);
                    if (mrc_opcode[co.op].mask & MRC_OPM_REQ)
                        answers.push_back({co.op, co.ssn, co.msg_len, 0});
                }
                break;
            }
            case 2: {  // deliver one
                if (out.empty()) break;
                size_t k = rng() % out.size();
                uint32_t ssn = out[k];
                out.erase(out.begin() + k);
                bool cd = mrc_stream_tx_acked(&cst, ssn), md = mst.on_acked(ssn);
                if (cd != md) return fail(step, "delivered differs");
                if (cd) {
                    mrc_req_delivered(&c, ssn);
                    model.delivered(ssn);
                }
                break;
            }
            case 3: {  // lose one, resend the oldest lost
                if (out.empty()) break;
                uint32_t ssn = out[rng() % out.size()];
                mrc_stream_tx_lost(&cst, ssn, 0);
                mst.on_lost(ssn, 0);
                uint32_t rs;
                int lp;
                bool cr = mrc_stream_tx_next_resend(&cst, &rs, &lp);
                auto mr = mst.next_resend();
                if (cr != mr.has_value() || (cr && rs != mr->first))
                    return fail(step, "resend differs");
                if (!cr) break;
                mrc_seg_out co;
                bool cd = mrc_req_resend(&c, rs, &co);
                auto md = model.resend(rs);
                if (cd != md.has_value() || (cd && !same_seg(co, *md)))
                    return fail(step, "resent segment differs: core " + std::to_string(cd) +
                                          " op " + std::to_string(co.op) + " wr " +
                                          std::to_string(co.wr) + ", model " +
                                          std::to_string(md.has_value()) + " op " +
                                          std::to_string(md ? int(md->op) : -1) + " wr " +
                                          std::to_string(md ? md->wr : 0));
                mrc_stream_tx_sent(&cst, rs);
                mst.on_sent(rs);
                break;
            }
            case 4: {  // a response segment, or a stray one
                mrc_hdr h{};
                uint32_t payload;
                size_t k = 0;
                bool stray = answers.empty() || rng() % 10 == 0;
                if (stray) {
                    h.opcode = rng() % 2 ? MRC_OP_READ_RESP : MRC_OP_ATOMIC_RESP;
                    h.msn = answers.empty() || rng() % 2 ? uint32_t(rng())
                                                         : answers[rng() % answers.size()].req_ssn;
                    h.msg_len = rng() % 3000;
                    h.offset = 0;
                    payload = std::min<uint32_t>(h.msg_len, mtu);
                    if (h.opcode == MRC_OP_ATOMIC_RESP) h.msg_len = payload = 8;
                } else {
                    k = rng() % answers.size();
                    Answer &a = answers[k];
                    h.opcode = a.op == MRC_OP_READ_REQ ? MRC_OP_READ_RESP : MRC_OP_ATOMIC_RESP;
                    h.msn = a.req_ssn;
                    h.msg_len = a.op == MRC_OP_READ_REQ ? a.len : 8;
                    h.offset = a.next_offset;
                    payload = std::min(mtu, h.msg_len - h.offset);
                }
                uint32_t cw = 0, mw = 0;
                int cv = int(mrc_req_response(&c, &h, payload, &cw));
                auto mv = model.response(m::Op(h.opcode), h.msn, h.offset, h.msg_len, payload, &mw);
                int mvi = mv == m::RespVerdict::Ok        ? MRC_RESP_OK
                          : mv == m::RespVerdict::Unknown ? MRC_RESP_UNKNOWN
                                                          : MRC_RESP_BAD;
                if (cv != mvi) return fail(step, "response verdict differs");
                if (cv != MRC_RESP_OK) break;
                if (cw != mw) return fail(step, "response's request differs");
                // A response delivers its request (section 9.1).
                bool cd = mrc_stream_tx_acked(&cst, h.msn), md = mst.on_acked(h.msn);
                if (cd != md) return fail(step, "a response's delivery of its request differs");
                if (cd) {
                    mrc_req_delivered(&c, h.msn);
                    model.delivered(h.msn);
                    out.erase(std::remove(out.begin(), out.end(), h.msn), out.end());
                }
                mrc_req_answered(&c, cw, payload);
                model.answered(mw, payload);
                if (!stray) {
                    answers[k].next_offset += payload;
                    if (answers[k].next_offset >= h.msg_len) answers.erase(answers.begin() + k);
                }
                break;
            }
            case 5:
                break;
        }
        for (;;) {
            uint32_t cc;
            bool cd = mrc_req_next_completion(&c, &cc);
            auto md = model.next_completion();
            if (cd != md.has_value() || (cd && cc != *md)) return fail(step, "completion differs");
            if (!cd) break;
            st.completions++;
        }
    }
    if (c.posted != model.posted() || c.completed != model.completed() ||
        c.bad_responses != model.bad_responses())
        return "counters differ at the end";
    st.requests += c.completed;
    return "";
}

TEST(DifferentialStream, RequestersAgree) {
    Stats st;
    for (uint32_t seed = 1; seed <= 200; seed++) EXPECT_EQ(run_requesters(seed, st), "") << seed;
    EXPECT_GT(st.completions, 10000u);
}

}  // namespace
