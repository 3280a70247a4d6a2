// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Memory windows (ibv_alloc_mw, ibv_bind_mw, IBV_WR_BIND_MW, LOCAL_INV and
// SEND with invalidate of their keys): WRITEs and READs through a window's
// rkey reach exactly its range, every byte checked; outside its range or
// beyond its rights, after invalidation or deallocation, from a QP a type 2
// window is not bound to, the peer gets a remote access error and memory
// is left alone; binds the IBA forbids fail with IBV_WC_MW_BIND_ERR; an MR
// with windows bound to it cannot be deregistered.
#include "verbs_env.hpp"

namespace mrt {
namespace {

constexpr int kMwMr = kRcAccess | IBV_ACCESS_MW_BIND;
constexpr int kMwRw = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// A window of @pd, deallocated when it goes out of scope (declare it after
// the Bufs it is bound to: an MR with a bound window cannot be
// deregistered).
class Window {
  public:
    Window(ibv_pd *pd, ibv_mw_type type) : mw(ibv_alloc_mw(pd, type)) {
        if (!mw) fail("ibv_alloc_mw: " + errstr(errno));
    }
    ~Window() { dealloc(); }
    Window(const Window &) = delete;
    Window &operator=(const Window &) = delete;

    int dealloc() {
        int err = mw ? ibv_dealloc_mw(mw) : 0;

        mw = nullptr;
        return err;
    }

    ibv_mw *mw;
};

class Mw : public TopoTest {};

INSTANTIATE_TEST_SUITE_P(Topo, Mw, ::testing::Values(Topo::TwoDevices, Topo::Loopback), topo_name);

ibv_mw_bind_info bind_info(const Buf &b, size_t off, size_t len, int access) {
    ibv_mw_bind_info info{};

    info.mr = b.mr;
    info.addr = b.addr(off);
    info.length = len;
    info.mw_access_flags = static_cast<unsigned int>(access);
    return info;
}

// ibv_bind_mw of a type 1 window, and its completion on @q.
ibv_wc bind1(Qp &q, ibv_mw *mw, const Buf &b, size_t off, size_t len, int access, uint64_t wr_id) {
    ibv_mw_bind mb{};

    mb.wr_id = wr_id;
    mb.send_flags = IBV_SEND_SIGNALED;
    mb.bind_info = bind_info(b, off, len, access);
    if (int err = ibv_bind_mw(q.qp, mw, &mb)) {
        ADD_FAILURE() << "ibv_bind_mw: " << errstr(err);
        return ibv_wc{};
    }
    return poll1(q.scq);
}

// IBV_WR_BIND_MW of @mw with the new key @rkey, and its completion.
ibv_wc bind_wr(Qp &q, ibv_mw *mw, uint32_t rkey, const Buf &b, size_t off, size_t len, int access,
               uint64_t wr_id) {
    ibv_send_wr wr{}, *bad = nullptr;

    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = rkey;
    wr.bind_mw.bind_info = bind_info(b, off, len, access);
    if (int err = ibv_post_send(q.qp, &wr, &bad)) {
        ADD_FAILURE() << "ibv_post_send(BIND_MW): " << errstr(err);
        return ibv_wc{};
    }
    return poll1(q.scq);
}

ibv_wc local_inv(Qp &q, uint32_t rkey, uint64_t wr_id) {
    ibv_send_wr wr{}, *bad = nullptr;

    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_LOCAL_INV;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.invalidate_rkey = rkey;
    if (int err = ibv_post_send(q.qp, &wr, &bad)) {
        ADD_FAILURE() << "ibv_post_send(LOCAL_INV): " << errstr(err);
        return ibv_wc{};
    }
    return poll1(q.scq);
}

Wr write_mw(const Buf &src, size_t soff, size_t len, uint64_t raddr, uint32_t rkey,
            uint64_t wr_id) {
    return {.op = IBV_WR_RDMA_WRITE,
            .sges = {src.sge(soff, len)},
            .wr_id = wr_id,
            .raddr = raddr,
            .rkey = rkey};
}

Wr read_mw(const Buf &dst, size_t doff, size_t len, uint64_t raddr, uint32_t rkey, uint64_t wr_id) {
    return {.op = IBV_WR_RDMA_READ,
            .sges = {dst.sge(doff, len)},
            .wr_id = wr_id,
            .raddr = raddr,
            .rkey = rkey};
}

// WRITE then READ of the whole window [@off, @off + @len) of @mem through
// @rkey from @q: the window holds the data, the rest of @mem is untouched
// (0x5a), the READ brings back every byte.
void write_read_window(Qp &q, Ctx &c, Buf &mem, size_t off, size_t len, uint32_t rkey,
                       uint64_t seed) {
    Buf src(c.pd, len), back(c.pd, len);

    fill(src.p, len, seed);
    memset(back.p, 0, len);
    EXPECT_WC(run1(q, write_mw(src, 0, len, mem.addr(off), rkey, 1)), 1, IBV_WC_SUCCESS,
              IBV_WC_RDMA_WRITE);
    EXPECT_TRUE(has_pattern(mem.p + off, len, seed));
    EXPECT_TRUE(all_bytes(mem.p, off, 0x5a)) << "before the window";
    EXPECT_TRUE(all_bytes(mem.p + off + len, mem.len - off - len, 0x5a)) << "after the window";
    EXPECT_WC(run1(q, read_mw(back, 0, len, mem.addr(off), rkey, 2)), 2, IBV_WC_SUCCESS,
              IBV_WC_RDMA_READ);
    EXPECT_TRUE(has_pattern(back.p, len, seed));
}

TEST_P(Mw, DeviceAdvertisesWindows) {
    ibv_device_attr_ex attr{};

    ASSERT_EQ(ibv_query_device_ex(A().ctx, nullptr, &attr), 0);
    EXPECT_GT(attr.orig_attr.max_mw, 0);
    EXPECT_TRUE(attr.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
    EXPECT_TRUE(attr.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
}

TEST_P(Mw, AllocAndDeallocBothTypes) {
    for (ibv_mw_type type : {IBV_MW_TYPE_1, IBV_MW_TYPE_2}) {
        ibv_mw *a = ibv_alloc_mw(Peer().pd, type);
        ibv_mw *b = ibv_alloc_mw(Peer().pd, type);

        ASSERT_NE(a, nullptr) << errstr(errno);
        ASSERT_NE(b, nullptr) << errstr(errno);
        EXPECT_EQ(a->type, type);
        EXPECT_NE(a->rkey, 0u);
        EXPECT_NE(a->rkey >> 8, b->rkey >> 8);
        EXPECT_EQ(ibv_dealloc_mw(a), 0);
        EXPECT_EQ(ibv_dealloc_mw(b), 0);
    }
    EXPECT_EQ(ibv_alloc_mw(Peer().pd, static_cast<ibv_mw_type>(3)), nullptr);
}

// A type 1 window bound with ibv_bind_mw: WRITE and READ of exactly its
// range; its key changed and is the MR's no longer.
TEST_P(Mw, Type1BindWriteRead) {
    const size_t n = 3 * 4096, off = 1000, len = 6000;
    Qp qa(A()), qb(Peer());
    connect(qa, qb);
    Buf mem(Peer().pd, n, kMwMr);
    Window w(Peer().pd, IBV_MW_TYPE_1);
    const uint32_t first = w.mw->rkey;

    memset(mem.p, 0x5a, n);
    EXPECT_WC(bind1(qb, w.mw, mem, off, len, kMwRw, 7), 7, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
    EXPECT_EQ(w.mw->rkey, ibv_inc_rkey(first));
    EXPECT_NE(w.mw->rkey, mem.rkey());
    write_read_window(qa, A(), mem, off, len, w.mw->rkey, 81);
}

// Rebinding a type 1 window moves it (the old key is gone); length 0
// unbinds it.
TEST_P(Mw, Type1RebindAndUnbind) {
    const size_t n = 4 * 4096;
    Qp qa(A()), qb(Peer());
    connect(qa, qb);
    Buf mem(Peer().pd, n, kMwMr);
    Window w(Peer().pd, IBV_MW_TYPE_1);

    memset(mem.p, 0x5a, n);
    ASSERT_WC(bind1(qb, w.mw, mem, 0, 4096, kMwRw, 1), 1, IBV_WC_SUCCESS);
    const uint32_t old = w.mw->rkey;
    ASSERT_WC(bind1(qb, w.mw, mem, 8192, 4096, kMwRw, 2), 2, IBV_WC_SUCCESS);
    EXPECT_NE(w.mw->rkey, old);
    write_read_window(qa, A(), mem, 8192, 4096, w.mw->rkey, 82);

    ibv_mw_bind mb{};
    mb.wr_id = 3;
    mb.send_flags = IBV_SEND_SIGNALED;
    ASSERT_EQ(ibv_bind_mw(qb.qp, w.mw, &mb), 0);
    EXPECT_WC(poll1(qb.scq), 3, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
    // Unbound, the MR can go.
    EXPECT_EQ(ibv_dereg_mr(mem.mr), 0);
    mem.mr = nullptr;

    memset(mem.p, 0x5a, n);
    Buf src(A().pd, 4096);
    EXPECT_WC(run1(qa, write_mw(src, 0, 64, mem.addr(8192), old, 4)), 4, IBV_WC_REM_ACCESS_ERR);
    EXPECT_TRUE(all_bytes(mem.p, n, 0x5a));
}

// The old key of a rebound window is refused.
TEST_P(Mw, Type1OldKeyRefused) {
    Qp qa(A()), qb(Peer());
    connect(qa, qb);
    Buf mem(Peer().pd, 8192, kMwMr), src(A().pd, 4096);
    Window w(Peer().pd, IBV_MW_TYPE_1);

    memset(mem.p, 0x5a, 8192);
    ASSERT_WC(bind1(qb, w.mw, mem, 0, 8192, kMwRw, 1), 1, IBV_WC_SUCCESS);
    const uint32_t old = w.mw->rkey;
    ASSERT_WC(bind1(qb, w.mw, mem, 0, 8192, kMwRw, 2), 2, IBV_WC_SUCCESS);
    fill(src.p, 4096, 83);
    EXPECT_WC(run1(qa, write_mw(src, 0, 4096, mem.addr(), old, 3)), 3, IBV_WC_REM_ACCESS_ERR);
    EXPECT_TRUE(all_bytes(mem.p, 8192, 0x5a));
    EXPECT_EQ(qb.wait_state(IBV_QPS_ERR), IBV_QPS_ERR);
}

// One byte before, one byte past the window: refused, nothing written.
TEST_P(Mw, OutsideTheWindowRefused) {
    const size_t n = 3 * 4096, off = 4096, len = 4096;
    Buf mem(Peer().pd, n, kMwMr), src(A().pd, 8192), back(A().pd, 8192);
    fill(src.p, 8192, 84);
    memset(back.p, 0, 8192);
    memset(mem.p, 0x5a, n);
    struct {
        const char *what;
        bool read;
        uint64_t addr;
        size_t len;
    } cases[] = {
        {"WRITE from a byte before", false, mem.addr(off - 1), 16},
        {"WRITE up to a byte past", false, mem.addr(off + len - 15), 16},
        {"READ from a byte before", true, mem.addr(off - 1), 16},
        {"READ of a byte past", true, mem.addr(off + len), 1},
        {"WRITE bigger than it", false, mem.addr(off), len + 1},
    };
    for (const auto &c : cases) {
        Qp qa(A()), qb(Peer());
        connect(qa, qb);
        Window w(Peer().pd, IBV_MW_TYPE_1);

        ASSERT_WC(bind1(qb, w.mw, mem, off, len, kMwRw, 1), 1, IBV_WC_SUCCESS) << c.what;
        Wr x = c.read ? read_mw(back, 0, c.len, c.addr, w.mw->rkey, 2)
                      : write_mw(src, 0, c.len, c.addr, w.mw->rkey, 2);
        EXPECT_WC(run1(qa, x), 2, IBV_WC_REM_ACCESS_ERR) << c.what;
        // Each packet of a WRITE is checked on its own, as with an MR's
        // key: the ones inside the window may land before the one past
        // its end is refused. Nothing outside it is written.
        EXPECT_TRUE(all_bytes(mem.p, off, 0x5a)) << c.what;
        EXPECT_TRUE(all_bytes(mem.p + off + len, n - off - len, 0x5a)) << c.what;
        if (c.len <= len) {
            EXPECT_TRUE(all_bytes(mem.p, n, 0x5a)) << c.what;
        }
        memset(mem.p, 0x5a, n);
        EXPECT_TRUE(all_bytes(back.p, 8192, 0)) << c.what;
    }
}

// A read-only window refuses WRITEs (and atomics), even on an MR that
// grants remote write; a write-only one refuses READs.
TEST_P(Mw, BeyondTheWindowsRightsRefused) {
    const size_t n = 4096;
    Buf mem(Peer().pd, n, kMwMr | IBV_ACCESS_REMOTE_ATOMIC);
    Buf src(A().pd, n), back(A().pd, n);
    fill(src.p, n, 85);
    memset(mem.p, 0x5a, n);
    {
        Qp qa(A()), qb(Peer());
        connect(qa, qb);
        Window w(Peer().pd, IBV_MW_TYPE_1);
        ASSERT_WC(bind1(qb, w.mw, mem, 0, n, IBV_ACCESS_REMOTE_READ, 1), 1, IBV_WC_SUCCESS);
        EXPECT_WC(run1(qa, read_mw(back, 0, n, mem.addr(), w.mw->rkey, 2)), 2, IBV_WC_SUCCESS);
        EXPECT_TRUE(all_bytes(back.p, n, 0x5a));
        EXPECT_WC(run1(qa, write_mw(src, 0, n, mem.addr(), w.mw->rkey, 3)), 3,
                  IBV_WC_REM_ACCESS_ERR);
        EXPECT_TRUE(all_bytes(mem.p, n, 0x5a));
    }
    {
        ConnOpts o;
        o.access = kRcAccess | IBV_ACCESS_REMOTE_ATOMIC;
        Qp qa(A()), qb(Peer());
        connect(qa, qb, o);
        Window w(Peer().pd, IBV_MW_TYPE_1);
        ASSERT_WC(bind1(qb, w.mw, mem, 0, n, IBV_ACCESS_REMOTE_READ, 1), 1, IBV_WC_SUCCESS);
        ibv_sge sge = back.sge(0, 8);
        ibv_send_wr wr{}, *bad = nullptr;
        wr.wr_id = 2;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.atomic.remote_addr = mem.addr();
        wr.wr.atomic.rkey = w.mw->rkey;
        wr.wr.atomic.compare_add = 1;
        ASSERT_EQ(ibv_post_send(qa.qp, &wr, &bad), 0);
        EXPECT_WC(poll1(qa.scq), 2, IBV_WC_REM_ACCESS_ERR);
        EXPECT_TRUE(all_bytes(mem.p, n, 0x5a));
    }
    {
        Qp qa(A()), qb(Peer());
        connect(qa, qb);
        Window w(Peer().pd, IBV_MW_TYPE_1);
        ASSERT_WC(bind1(qb, w.mw, mem, 0, n, IBV_ACCESS_REMOTE_WRITE, 1), 1, IBV_WC_SUCCESS);
        EXPECT_WC(run1(qa, write_mw(src, 0, n, mem.addr(), w.mw->rkey, 2)), 2, IBV_WC_SUCCESS);
        EXPECT_TRUE(has_pattern(mem.p, n, 85));
        memset(back.p, 0, n);
        EXPECT_WC(run1(qa, read_mw(back, 0, n, mem.addr(), w.mw->rkey, 3)), 3,
                  IBV_WC_REM_ACCESS_ERR);
        EXPECT_TRUE(all_bytes(back.p, n, 0));
    }
}

// A type 2 window bound with IBV_WR_BIND_MW (the consumer's key), used,
// then invalidated by LOCAL_INV: its key is refused from then on.
TEST_P(Mw, Type2BindThenLocalInvalidate) {
    const size_t n = 2 * 4096 + 512, off = 256, len = 2 * 4096;
    Qp qa(A()), qb(Peer());
    connect(qa, qb);
    Buf mem(Peer().pd, n, kMwMr), src(A().pd, 4096);
    Window w(Peer().pd, IBV_MW_TYPE_2);
    const uint32_t rkey = (w.mw->rkey & ~0xffu) | 0xa7;

    memset(mem.p, 0x5a, n);
    ASSERT_WC(bind_wr(qb, w.mw, rkey, mem, off, len, kMwRw, 1), 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
    write_read_window(qa, A(), mem, off, len, rkey, 86);

    // Bound, it cannot be bound again.
    Qp qc(A()), qd(Peer());
    connect(qc, qd);
    EXPECT_WC(bind_wr(qd, w.mw, ibv_inc_rkey(rkey), mem, 0, 64, kMwRw, 2), 2, IBV_WC_MW_BIND_ERR);

    EXPECT_WC(local_inv(qb, rkey, 3), 3, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
    // Invalidated: the MR can go, and the key reaches nothing.
    memset(mem.p + off, 0x5a, len);
    fill(src.p, 4096, 87);
    EXPECT_WC(run1(qa, write_mw(src, 0, 64, mem.addr(off), rkey, 4)), 4, IBV_WC_REM_ACCESS_ERR);
    EXPECT_TRUE(all_bytes(mem.p, n, 0x5a));
    EXPECT_EQ(ibv_dereg_mr(mem.mr), 0);
    mem.mr = nullptr;
}

// Invalidated, a type 2 window can be bound again, with another key.
TEST_P(Mw, Type2RebindAfterInvalidate) {
    Qp qa(A()), qb(Peer());
    connect(qa, qb);
    Buf mem(Peer().pd, 8192, kMwMr);
    Window w(Peer().pd, IBV_MW_TYPE_2);
    uint32_t rkey = ibv_inc_rkey(w.mw->rkey);

    memset(mem.p, 0x5a, 8192);
    ASSERT_WC(bind_wr(qb, w.mw, rkey, mem, 0, 4096, kMwRw, 1), 1, IBV_WC_SUCCESS);
    ASSERT_WC(local_inv(qb, rkey, 2), 2, IBV_WC_SUCCESS);
    rkey = ibv_inc_rkey(rkey);
    ASSERT_WC(bind_wr(qb, w.mw, rkey, mem, 4096, 4096, kMwRw, 3), 3, IBV_WC_SUCCESS);
    write_read_window(qa, A(), mem, 4096, 4096, rkey, 88);
}

// The peer's SEND with invalidate of a type 2 window's key ends it.
TEST_P(Mw, Type2SendWithInvalidate) {
    Qp qa(A()), qb(Peer());
    connect(qa, qb);
    Buf mem(Peer().pd, 4096, kMwMr), src(A().pd, 4096), rbuf(Peer().pd, 64);
    Window w(Peer().pd, IBV_MW_TYPE_2);
    const uint32_t rkey = ibv_inc_rkey(w.mw->rkey);

    memset(mem.p, 0x5a, 4096);
    ASSERT_WC(bind_wr(qb, w.mw, rkey, mem, 0, 4096, kMwRw, 1), 1, IBV_WC_SUCCESS);
    fill(src.p, 4096, 89);
    EXPECT_WC(run1(qa, write_mw(src, 0, 4096, mem.addr(), rkey, 2)), 2, IBV_WC_SUCCESS);
    EXPECT_TRUE(has_pattern(mem.p, 4096, 89));

    ASSERT_EQ(post_recv(qb.qp, rbuf, 3), 0);
    Wr s{.op = IBV_WR_SEND_WITH_INV, .sges = {src.sge(0, 16)}, .wr_id = 4, .imm = rkey};
    EXPECT_WC(run1(qa, s), 4, IBV_WC_SUCCESS);
    ibv_wc wc = poll1(qb.rcq);
    EXPECT_WC(wc, 3, IBV_WC_SUCCESS, IBV_WC_RECV);
    EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
    EXPECT_EQ(wc.invalidated_rkey, rkey);

    memset(mem.p, 0x5a, 4096);
    EXPECT_WC(run1(qa, write_mw(src, 0, 4096, mem.addr(), rkey, 5)), 5, IBV_WC_REM_ACCESS_ERR);
    EXPECT_TRUE(all_bytes(mem.p, 4096, 0x5a));
}

// A type 2 window is the QP's that bound it: another QP of the same PD
// (the peer of another connection) is refused its key, and may not
// invalidate it; the binding QP still uses it.
TEST_P(Mw, Type2OnAnotherQpRefused) {
    Qp qa(A()), qb(Peer());
    Qp qc(A()), qd(Peer());
    connect(qa, qb);
    connect(qc, qd);
    Buf mem(Peer().pd, 4096, kMwMr), src(A().pd, 4096), back(A().pd, 4096);
    Window w(Peer().pd, IBV_MW_TYPE_2);
    const uint32_t rkey = ibv_inc_rkey(w.mw->rkey);

    memset(mem.p, 0x5a, 4096);
    memset(back.p, 0, 4096);
    ASSERT_WC(bind_wr(qb, w.mw, rkey, mem, 0, 4096, kMwRw, 1), 1, IBV_WC_SUCCESS);
    fill(src.p, 4096, 90);
    EXPECT_WC(run1(qc, write_mw(src, 0, 4096, mem.addr(), rkey, 2)), 2, IBV_WC_REM_ACCESS_ERR);
    EXPECT_TRUE(all_bytes(mem.p, 4096, 0x5a));

    Qp qe(A()), qf(Peer());
    connect(qe, qf);
    EXPECT_WC(run1(qe, read_mw(back, 0, 4096, mem.addr(), rkey, 3)), 3, IBV_WC_REM_ACCESS_ERR);
    EXPECT_TRUE(all_bytes(back.p, 4096, 0));

    Qp qg(A()), qh(Peer());
    connect(qg, qh);
    Buf rbuf(Peer().pd, 64);
    ASSERT_EQ(post_recv(qh.qp, rbuf, 4), 0);
    Wr s{.op = IBV_WR_SEND_WITH_INV, .sges = {src.sge(0, 16)}, .wr_id = 5, .imm = rkey};
    EXPECT_WC(run1(qg, s), 5, IBV_WC_REM_INV_REQ_ERR);

    write_read_window(qa, A(), mem, 0, 4096, rkey, 91);
}

// Deallocated, a window's key reaches nothing (type 1 and type 2).
TEST_P(Mw, DeallocEndsTheWindow) {
    for (ibv_mw_type type : {IBV_MW_TYPE_1, IBV_MW_TYPE_2}) {
        Qp qa(A()), qb(Peer());
        connect(qa, qb);
        Buf mem(Peer().pd, 4096, kMwMr), back(A().pd, 4096);
        Window w(Peer().pd, type);
        uint32_t rkey;

        memset(mem.p, 0x5a, 4096);
        memset(back.p, 0, 4096);
        if (type == IBV_MW_TYPE_1) {
            ASSERT_WC(bind1(qb, w.mw, mem, 0, 4096, kMwRw, 1), 1, IBV_WC_SUCCESS);
            rkey = w.mw->rkey;
        } else {
            rkey = ibv_inc_rkey(w.mw->rkey);
            ASSERT_WC(bind_wr(qb, w.mw, rkey, mem, 0, 4096, kMwRw, 1), 1, IBV_WC_SUCCESS);
        }
        EXPECT_WC(run1(qa, read_mw(back, 0, 4096, mem.addr(), rkey, 2)), 2, IBV_WC_SUCCESS);
        EXPECT_TRUE(all_bytes(back.p, 4096, 0x5a));
        ASSERT_EQ(w.dealloc(), 0);
        memset(back.p, 0, 4096);
        EXPECT_WC(run1(qa, read_mw(back, 0, 4096, mem.addr(), rkey, 3)), 3, IBV_WC_REM_ACCESS_ERR);
        EXPECT_TRUE(all_bytes(back.p, 4096, 0));
    }
}

// Binds the IBA forbids fail with IBV_WC_MW_BIND_ERR and bind nothing.
TEST_P(Mw, ForbiddenBindsFail) {
    Buf no_bind(Peer().pd, 8192, kRcAccess);
    Buf read_only(Peer().pd, 8192, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
    Buf mem(Peer().pd, 8192, kMwMr);
    ibv_pd *pd2 = ibv_alloc_pd(Peer().ctx);
    ASSERT_NE(pd2, nullptr);
    {
        Buf other_pd(pd2, 8192, kMwMr);
        struct {
            const char *what;
            ibv_mw_type type;
            const Buf *b;
            size_t off, len;
            int access;
        } cases[] = {
            {"type 1, MR without MW_BIND", IBV_MW_TYPE_1, &no_bind, 0, 4096, kMwRw},
            {"type 2, MR without MW_BIND", IBV_MW_TYPE_2, &no_bind, 0, 4096, kMwRw},
            {"remote write, MR without local write", IBV_MW_TYPE_1, &read_only, 0, 4096, kMwRw},
            {"past the MR's end", IBV_MW_TYPE_1, &mem, 4096, 4097, kMwRw},
            {"type 2, zero length", IBV_MW_TYPE_2, &mem, 0, 0, kMwRw},
            {"MR of another PD", IBV_MW_TYPE_2, &other_pd, 0, 4096, kMwRw},
        };
        for (const auto &c : cases) {
            Qp qa(A()), qb(Peer());
            connect(qa, qb);
            Window w(Peer().pd, c.type);
            ibv_wc wc =
                bind_wr(qb, w.mw, ibv_inc_rkey(w.mw->rkey), *c.b, c.off, c.len, c.access, 1);
            EXPECT_WC(wc, 1, IBV_WC_MW_BIND_ERR) << c.what;
            EXPECT_EQ(qb.wait_state(IBV_QPS_ERR), IBV_QPS_ERR) << c.what;
            // Nothing bound: the MR goes.
        }
        // Rights no window can grant (zero based, or unknown bits) fail the post, and the QP
        // stays usable; local write, which applications pass out of habit, is ignored.
        {
            Qp qa(A()), qb(Peer());
            connect(qa, qb);
            Window w(Peer().pd, IBV_MW_TYPE_2);
            ibv_send_wr wr{}, *bad = nullptr;
            wr.opcode = IBV_WR_BIND_MW;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.bind_mw.mw = w.mw;
            wr.bind_mw.rkey = ibv_inc_rkey(w.mw->rkey);
            wr.bind_mw.bind_info = bind_info(mem, 0, 4096, kMwRw | IBV_ACCESS_ZERO_BASED);
            EXPECT_EQ(ibv_post_send(qb.qp, &wr, &bad), EINVAL);
            EXPECT_WC(
                bind_wr(qb, w.mw, wr.bind_mw.rkey, mem, 0, 4096, kMwRw | IBV_ACCESS_LOCAL_WRITE, 2),
                2, IBV_WC_SUCCESS);
            EXPECT_EQ(qb.wait_state(IBV_QPS_RTS), IBV_QPS_RTS);
        }
    }
    EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
}

// An MR with a window bound to it: deregistration fails with EBUSY and
// leaves both working; once the window is deallocated it succeeds.
TEST_P(Mw, DeregWithBoundWindowIsBusy) {
    for (ibv_mw_type type : {IBV_MW_TYPE_1, IBV_MW_TYPE_2}) {
        Qp qa(A()), qb(Peer());
        connect(qa, qb);
        Buf mem(Peer().pd, 4096, kMwMr);
        Window w(Peer().pd, type);
        uint32_t rkey = ibv_inc_rkey(w.mw->rkey);

        memset(mem.p, 0x5a, 4096);
        if (type == IBV_MW_TYPE_1) {
            ASSERT_WC(bind1(qb, w.mw, mem, 0, 4096, kMwRw, 1), 1, IBV_WC_SUCCESS);
        } else {
            ASSERT_WC(bind_wr(qb, w.mw, rkey, mem, 0, 4096, kMwRw, 1), 1, IBV_WC_SUCCESS);
        }
        EXPECT_EQ(ibv_dereg_mr(mem.mr), EBUSY);
        EXPECT_NE(ibv_rereg_mr(mem.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kRcAccess),
                  0)
            << "rereg of an MR with a window";
        write_read_window(qa, A(), mem, 0, 4096, rkey, 92);
        ASSERT_EQ(w.dealloc(), 0);
        EXPECT_EQ(ibv_dereg_mr(mem.mr), 0);
        mem.mr = nullptr;
    }
}

// The ibv_wr_* API: ibv_wr_bind_mw and ibv_wr_local_inv of a type 2
// window.
TEST_P(Mw, Type2WithWrApi) {
    QpOpts o;
    o.send_ops = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_RDMA_WRITE;
    Qp qa(A()), qb(Peer(), o);
    connect(qa, qb);
    Buf mem(Peer().pd, 8192, kMwMr), src(A().pd, 64);
    Window w(Peer().pd, IBV_MW_TYPE_2);
    const uint32_t rkey = ibv_inc_rkey(w.mw->rkey);
    ibv_qp_ex *qx = ibv_qp_to_qp_ex(qb.qp);
    ASSERT_NE(qx, nullptr);

    memset(mem.p, 0x5a, 8192);
    ibv_mw_bind_info info = bind_info(mem, 4096, 4096, kMwRw);
    ibv_wr_start(qx);
    qx->wr_id = 1;
    qx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_bind_mw(qx, w.mw, rkey, &info);
    ASSERT_EQ(ibv_wr_complete(qx), 0);
    EXPECT_WC(poll1(qb.scq), 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
    write_read_window(qa, A(), mem, 4096, 4096, rkey, 93);

    ibv_wr_start(qx);
    qx->wr_id = 2;
    qx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_local_inv(qx, rkey);
    ASSERT_EQ(ibv_wr_complete(qx), 0);
    EXPECT_WC(poll1(qb.scq), 2, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
    fill(src.p, 64, 94);
    memset(mem.p, 0x5a, 8192);
    EXPECT_WC(run1(qa, write_mw(src, 0, 64, mem.addr(4096), rkey, 3)), 3, IBV_WC_REM_ACCESS_ERR);
    EXPECT_TRUE(all_bytes(mem.p, 8192, 0x5a));
}

}  // namespace
}  // namespace mrt
