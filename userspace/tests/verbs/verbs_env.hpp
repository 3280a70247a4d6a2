// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// metaroce-verbs-test: the helpers every case uses. Devices come from the
// environment (see README.md); resources are RAII objects that throw
// std::runtime_error when the verbs refuse to create them (GoogleTest turns
// that into a failure of the case), while what a case checks is done with
// EXPECT/ASSERT.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/metaroce_wire.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mrt {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

constexpr uint8_t kPort = 1;
constexpr int kGrhLen = 40;
// (ints: the ibv_reg_mr macros mix enums, which C++20 frowns upon)
constexpr int kLocalWrite = IBV_ACCESS_LOCAL_WRITE;
constexpr int kRcAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ;

// The limits the kernel driver advertises (kernel/metaroce.h).
constexpr uint32_t kMaxQpWr = 16384;
constexpr uint32_t kMaxSge = 16;
constexpr uint32_t kMaxInline = 256;
constexpr int kMaxCqe = (1 << 20) - 1;
constexpr uint32_t kMaxRdAtomic = 128;

// ---------------------------------------------------------------------------
// Configuration (environment)

struct Config {
	std::string name_a, name_b;	// device names
	ibv_device *dev_a = nullptr;
	ibv_device *dev_b = nullptr;
	int gid_index = -1;		// -1: the first IPv4-mapped RoCEv2 GID
	double time_scale = 1.0;	// multiplies every "must happen by" limit
	size_t big_mib = 256;		// size of the large-message cases
	std::string why_none;		// why there is no device
};

// Finds the devices (once); false if there is none to test.
bool init_config();
const Config &config();
void release_config();

// A deadline for something that must happen: @base, scaled.
Ms limit(Ms base = Ms(20000));

// ---------------------------------------------------------------------------
// Small things

[[noreturn]] void fail(const std::string &what);
std::string errstr(int err);
const char *wc_status(int status);
std::string describe(const ibv_wc &wc);
std::string gid_str(const ibv_gid &gid);
double ms_since(std::chrono::steady_clock::time_point t0);

// Deterministic pseudo-random bytes: byte i of stream @seed.
void fill(void *p, size_t len, uint64_t seed, uint64_t start = 0);
// Whether [p, p+len) is bytes [start, start+len) of stream @seed.
::testing::AssertionResult has_pattern(const void *p, size_t len,
				       uint64_t seed, uint64_t start = 0);
// Byte-for-byte equality; the failure names the first differing offset.
::testing::AssertionResult same_bytes(const void *a, const void *b,
				      size_t len);
// Every byte of [p, p+len) is @v.
::testing::AssertionResult all_bytes(const void *p, size_t len, uint8_t v);

// A hardware counter of port 1 of device @dev (sysfs), or -1. ib_core
// caches the values for 10 ms: fresh() waits that out first.
int64_t hw_counter(const std::string &dev, const char *name,
		   bool fresh = false);

// The sum over the paths of QP @qpn of device @dev of a protocol v2 path
// counter (a "path N:" field of /sys/kernel/debug/metaroce/DEV/qps), or -1
// when the QP is not on protocol v2 or debugfs is not there.
int64_t v2_path_counter(const std::string &dev, uint32_t qpn,
			const char *field);

// Records a measurement in the XML report and prints it.
void note(const std::string &key, double value);

// Device A's root qdisc, changed with the command METAROCE_VERBS_QDISC_A
// names, ACTION standing for replace/del (verbs.sh: "tc -n ns1 qdisc ACTION
// dev veth0 root"); the qdisc set is deleted again.
class Qdisc {
public:
	Qdisc();
	~Qdisc();
	Qdisc(const Qdisc &) = delete;
	Qdisc &operator=(const Qdisc &) = delete;
	bool available() const;
	bool set(const std::string &qdisc);

private:
	bool run(const std::string &action, const std::string &args);
	std::string cmd_;
	bool added_ = false;
};

// ---------------------------------------------------------------------------
// Resources

// An open device with a protection domain.
class Ctx {
public:
	explicit Ctx(ibv_device *dev);
	~Ctx();
	Ctx(const Ctx &) = delete;
	Ctx &operator=(const Ctx &) = delete;

	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	std::string name;
	ibv_device_attr dev_attr{};
	ibv_port_attr port{};
	ibv_gid gid{};
	int gid_index = 1;
	uint32_t ipv4 = 0;	// network order, from the GID

	// Path MTU in bytes.
	uint32_t mtu() const { return 128u << port.active_mtu; }
	// Payload bytes of an RC packet on that path MTU (protocol.md 4.1).
	uint32_t segment() const { return metaroce_segment_size(mtu()); }

	// Async events: waits up to @timeout for one of @type (for @qp or
	// @cq if given); every event read is acked and recorded in seen.
	std::optional<ibv_async_event> wait_event(ibv_event_type type,
						  Ms timeout,
						  ibv_qp *qp = nullptr,
						  ibv_cq *cq = nullptr);
	// Reads whatever events arrive within @window.
	void drain_events(Ms window);
	// Events of @type recorded so far (for @qp/@cq if given).
	int count_events(ibv_event_type type, ibv_qp *qp = nullptr,
			 ibv_cq *cq = nullptr) const;
	std::vector<ibv_async_event> seen;

private:
	void open(ibv_device *dev);
	void close();
};

// Page-aligned anonymous memory (plus @offset), optionally registered.
class Buf {
public:
	Buf(ibv_pd *pd, size_t len, int access = kRcAccess, size_t offset = 0,
	    uint64_t iova = 0);
	Buf(size_t len, size_t offset = 0);	// not registered
	~Buf();
	Buf(const Buf &) = delete;
	Buf &operator=(const Buf &) = delete;

	uint8_t *p = nullptr;
	size_t len = 0;
	ibv_mr *mr = nullptr;
	uint64_t iova = 0;	// the MR's address space (= p unless set)

	uint64_t addr(size_t off = 0) const { return iova + off; }
	uint32_t lkey() const { return mr->lkey; }
	uint32_t rkey() const { return mr->rkey; }
	ibv_sge sge(size_t off, size_t n) const;
	ibv_sge sge() const { return sge(0, len); }
	void deregister();

private:
	void *map_ = nullptr;
	size_t map_len_ = 0;
};

struct QpOpts {
	ibv_qp_type type = IBV_QPT_RC;
	uint32_t send_wr = 64, recv_wr = 64;
	uint32_t send_sge = 1, recv_sge = 1;
	uint32_t inline_data = 0;
	int scqe = 0, rcqe = 0;		// 0: send_wr / recv_wr (at least 16)
	bool sig_all = false;
	ibv_comp_channel *channel = nullptr;	// for both CQs
	uint64_t send_ops = 0;		// != 0: ibv_create_qp_ex with these
	ibv_srq *srq = nullptr;		// receives from it (no RQ)
	// Both CQs from ibv_create_cq_ex with IBV_WC_STANDARD_FLAGS (Qp::scqx,
	// Qp::rcqx; scq and rcq are the same CQs, for ibv_poll_cq).
	bool cq_ex = false;
	uint32_t cq_flags = 0;	// with cq_ex: IBV_CREATE_CQ_ATTR_* for both
	ibv_pd *pd = nullptr;		// nullptr: the context's PD
};

// A QP with its own send and receive CQs.
class Qp {
public:
	Qp(Ctx &c, const QpOpts &o = {});
	~Qp();
	Qp(const Qp &) = delete;
	Qp &operator=(const Qp &) = delete;

	Ctx &c;
	ibv_cq *scq = nullptr, *rcq = nullptr;
	ibv_cq_ex *scqx = nullptr, *rcqx = nullptr;	// QpOpts::cq_ex
	ibv_qp *qp = nullptr;
	ibv_qp_cap cap{};
	uint32_t qpn() const { return qp->qp_num; }
	ibv_qp_state state();	// ibv_query_qp
	// Queries until the state is @want (or @timeout); the last one seen.
	ibv_qp_state wait_state(ibv_qp_state want, Ms timeout = Ms(2000));
	void destroy();		// early (peer goes away)

private:
	void create(const QpOpts &o);
	void close();
};

struct ConnOpts {
	uint32_t psn_a = 0x1000, psn_b = 0x2000;	// each side's sq_psn
	int mtu = 0;			// IBV_MTU_*, 0: the port's active MTU
	uint8_t timeout = 14, retry_cnt = 7, rnr_retry = 7;
	uint8_t min_rnr_timer = 1;	// 10 us
	int access = kRcAccess;		// qp_access_flags of both
	uint8_t max_rd_atomic = 16, max_dest_rd_atomic = 16;
};

ibv_ah_attr ah_to(const Ctx &from, const Ctx &to);
// RESET -> INIT of an RC QP.
int rc_init(Qp &q, int access);
// INIT -> RTR towards @peer (QPN @peer_qpn, GID of @peer_ctx).
int rc_rtr(Qp &q, const Ctx &peer_ctx, uint32_t peer_qpn, uint32_t rq_psn,
	   const ConnOpts &o);
int rc_rts(Qp &q, uint32_t sq_psn, const ConnOpts &o);
// Both QPs to RTS, connected to each other; throws on failure.
void connect(Qp &a, Qp &b, const ConnOpts &o = {});
// A UD QP to RTS with @qkey.
void ud_up(Qp &q, uint32_t qkey, uint32_t sq_psn = 0);

// ---------------------------------------------------------------------------
// Posting and polling

struct Wr {
	ibv_wr_opcode op = IBV_WR_SEND;
	std::vector<ibv_sge> sges = {};
	uint64_t wr_id = 0;
	unsigned flags = IBV_SEND_SIGNALED;
	uint64_t raddr = 0;
	uint32_t rkey = 0;
	uint32_t imm = 0;		// host order; sent big endian
					// (SEND_WITH_INV: the key)
	ibv_ah *ah = nullptr;
	uint32_t remote_qpn = 0, remote_qkey = 0;
};

// ibv_post_send of a chain; returns the error and the index of bad_wr.
int post_send(ibv_qp *qp, std::span<const Wr> wrs, int *bad_index = nullptr);
int post_send(ibv_qp *qp, const Wr &wr);
int post_recv(ibv_qp *qp, std::vector<ibv_sge> sges, uint64_t wr_id);
int post_recv(ibv_qp *qp, const Buf &b, uint64_t wr_id);

// Up to @n completions within @timeout.
std::vector<ibv_wc> poll(ibv_cq *cq, size_t n, Ms timeout = limit());
// Exactly one completion (a failure and a zeroed wc if none came).
ibv_wc poll1(ibv_cq *cq, Ms timeout = limit());
// Nothing arrives on @cq within @window.
::testing::AssertionResult quiet(ibv_cq *cq, Ms window);
// Polls @n completions and checks each is a success, in wr_id order
// @first, @first+1, ...
::testing::AssertionResult poll_ok(ibv_cq *cq, size_t n, uint64_t first = 0,
				   Ms timeout = limit());

::testing::AssertionResult wc_is(const ibv_wc &wc, uint64_t wr_id,
				 ibv_wc_status status);
::testing::AssertionResult wc_is(const ibv_wc &wc, uint64_t wr_id,
				 ibv_wc_status status, ibv_wc_opcode op);

#define EXPECT_WC(wc, ...) EXPECT_TRUE(::mrt::wc_is((wc), __VA_ARGS__))
#define ASSERT_WC(wc, ...) ASSERT_TRUE(::mrt::wc_is((wc), __VA_ARGS__))

// ---------------------------------------------------------------------------
// Fixtures

enum class Topo { TwoDevices, Loopback };
inline void PrintTo(Topo t, std::ostream *os)
{
	*os << (t == Topo::Loopback ? "Loopback" : "TwoDevices");
}
std::string topo_name(const ::testing::TestParamInfo<Topo> &info);

// Opens device A and device B (B = A when there is only one device).
class VerbsTest : public ::testing::Test {
protected:
	void SetUp() override;
	void TearDown() override;
	Ctx &A() { return *a_; }
	Ctx &B() { return *b_; }
	bool two_devices() const { return b_ != a_; }

	std::unique_ptr<Ctx> ca_, cb_;
	Ctx *a_ = nullptr, *b_ = nullptr;
};

// With a completion channel (non-blocking), destroyed at the end.
class ChannelTest : public VerbsTest {
protected:
	void TearDown() override;
	ibv_comp_channel *make_channel(Ctx &c);
	// Waits up to @timeout for a completion event; acks it.
	ibv_cq *next_event(Ms timeout);

	ibv_comp_channel *channel_ = nullptr;
};

// Also parameterized by the topology: Peer() is B, or A on loopback.
class TopoTest : public VerbsTest,
		 public ::testing::WithParamInterface<Topo> {
protected:
	Ctx &Peer() { return GetParam() == Topo::Loopback ? A() : B(); }
};

} // namespace mrt

namespace mrt {

// One signaled operation from @q, waited for; returns its completion.
inline ibv_wc run1(Qp &q, const Wr &w, Ms timeout = limit())
{
	if (int err = post_send(q.qp, w)) {
		ADD_FAILURE() << "ibv_post_send: " << errstr(err);
		ibv_wc wc{};
		wc.status = static_cast<ibv_wc_status>(-1);
		return wc;
	}
	return poll1(q.scq, timeout);
}

inline Wr write_wr(const Buf &src, size_t soff, const Buf &dst, size_t doff,
		   size_t len, uint64_t wr_id = 0)
{
	return {.op = IBV_WR_RDMA_WRITE, .sges = {src.sge(soff, len)},
		.wr_id = wr_id, .raddr = dst.addr(doff), .rkey = dst.rkey()};
}

inline Wr read_wr(const Buf &dst, size_t doff, const Buf &src, size_t soff,
		  size_t len, uint64_t wr_id = 0)
{
	return {.op = IBV_WR_RDMA_READ, .sges = {dst.sge(doff, len)},
		.wr_id = wr_id, .raddr = src.addr(soff), .rkey = src.rkey()};
}

inline Wr send_wr(const Buf &src, size_t soff, size_t len, uint64_t wr_id = 0)
{
	return {.op = IBV_WR_SEND, .sges = {src.sge(soff, len)}, .wr_id = wr_id};
}

// A 64 KiB zero-copy SEND from @a to @b (filled with @seed) whose packets a
// netem qdisc on @a holds while @revoke runs on its source buffer; then the
// application writes @seed + 1 into that buffer. @revoke must wait for the
// packets to leave: @b receives @seed's bytes, never the later ones.
void expect_held_send_unchanged(Ctx &a, Ctx &b, Qdisc &qdisc, int seed,
				const std::function<void(Buf &src)> &revoke);

} // namespace mrt
