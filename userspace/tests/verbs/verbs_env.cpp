// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "verbs_env.hpp"

#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace mrt {

namespace {

Config g_config;
ibv_device **g_list = nullptr;
bool g_error = false;

std::string read_line(const std::string &path)
{
	std::ifstream f(path);
	std::string s;
	std::getline(f, s);
	return s;
}

bool is_metaroce(ibv_device *dev)
{
	return read_line(std::string(dev->ibdev_path) + "/node_desc")
		       .rfind("metaroce", 0) == 0;
}

ibv_device *find_named(const char *name)
{
	for (int i = 0; g_list && g_list[i]; i++)
		if (!strcmp(ibv_get_device_name(g_list[i]), name))
			return g_list[i];
	return nullptr;
}

} // namespace

bool init_config()
{
	Config &c = g_config;
	const char *env;
	int num = 0;

	if ((env = getenv("METAROCE_VERBS_TIME_SCALE")) && atof(env) > 0)
		c.time_scale = atof(env);
	if ((env = getenv("METAROCE_VERBS_BIG_MIB")))
		c.big_mib = strtoul(env, nullptr, 0);
	if ((env = getenv("METAROCE_GID_INDEX")))
		c.gid_index = atoi(env);

	g_list = ibv_get_device_list(&num);
	if (!g_list) {
		c.why_none = "ibv_get_device_list: " + errstr(errno);
		return false;
	}
	const char *na = getenv("METAROCE_DEV_A");
	const char *nb = getenv("METAROCE_DEV_B");
	if (na && *na) {
		c.dev_a = find_named(na);
		if (!c.dev_a) {
			c.why_none = std::string("METAROCE_DEV_A=") + na +
				     ": no such RDMA device";
			g_error = true;
			return false;
		}
	}
	if (nb && *nb) {
		c.dev_b = find_named(nb);
		if (!c.dev_b) {
			c.why_none = std::string("METAROCE_DEV_B=") + nb +
				     ": no such RDMA device";
			g_error = true;
			c.dev_a = nullptr;
			return false;
		}
	}
	// Otherwise the first two MetaRoCE devices.
	for (int i = 0; i < num && (!c.dev_a || !c.dev_b); i++) {
		if (!is_metaroce(g_list[i]) || g_list[i] == c.dev_a ||
		    g_list[i] == c.dev_b)
			continue;
		if (!c.dev_a)
			c.dev_a = g_list[i];
		else if (!c.dev_b)
			c.dev_b = g_list[i];
	}
	if (!c.dev_a) {
		c.why_none = "no MetaRoCE RDMA device (set METAROCE_DEV_A)";
		return false;
	}
	if (!c.dev_b)
		c.dev_b = c.dev_a;	// loopback only
	c.name_a = ibv_get_device_name(c.dev_a);
	c.name_b = ibv_get_device_name(c.dev_b);
	return true;
}

const Config &config() { return g_config; }

void release_config()
{
	if (g_list)
		ibv_free_device_list(g_list);
	g_list = nullptr;
	g_config.dev_a = g_config.dev_b = nullptr;
}

Ms limit(Ms base)
{
	return Ms(static_cast<int64_t>(base.count() * g_config.time_scale));
}

// ---------------------------------------------------------------------------

void fail(const std::string &what) { throw std::runtime_error(what); }

std::string errstr(int err)
{
	return std::string(strerrorname_np(err) ? strerrorname_np(err) : "?") +
	       " (" + strerror(err) + ")";
}

const char *wc_status(int status)
{
	return ibv_wc_status_str(static_cast<ibv_wc_status>(status));
}

std::string describe(const ibv_wc &wc)
{
	char s[256];

	snprintf(s, sizeof(s),
		 "{wr_id=%" PRIu64 " status=%s(%d) opcode=%d byte_len=%u "
		 "qp_num=%u src_qp=%u wc_flags=0x%x imm=0x%08x}",
		 wc.wr_id, wc_status(wc.status), wc.status, wc.opcode,
		 wc.byte_len, wc.qp_num, wc.src_qp, wc.wc_flags,
		 be32toh(wc.imm_data));
	return s;
}

std::string gid_str(const ibv_gid &gid)
{
	char s[64];
	int n = 0;

	for (int i = 0; i < 16; i += 2)
		n += snprintf(s + n, sizeof(s) - n, "%s%02x%02x", i ? ":" : "",
			      gid.raw[i], gid.raw[i + 1]);
	return s;
}

double ms_since(std::chrono::steady_clock::time_point t0)
{
	return std::chrono::duration<double, std::milli>(
		       std::chrono::steady_clock::now() - t0)
		.count();
}

namespace {

inline uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

inline uint64_t word(uint64_t seed, uint64_t w)
{
	return mix((seed * 0x100000001b3ULL) ^ (w * 0x9e3779b97f4a7c15ULL));
}

inline uint8_t byte_at(uint64_t seed, uint64_t i)
{
	return static_cast<uint8_t>(word(seed, i >> 3) >> ((i & 7) * 8));
}

} // namespace

void fill(void *dst, size_t len, uint64_t seed, uint64_t start)
{
	auto *p = static_cast<uint8_t *>(dst);
	uint64_t i = start, end = start + len;

	for (; i < end && (i & 7); i++)
		*p++ = byte_at(seed, i);
	for (; i + 8 <= end; i += 8, p += 8) {
		uint64_t w = htole64(word(seed, i >> 3));
		memcpy(p, &w, 8);
	}
	for (; i < end; i++)
		*p++ = byte_at(seed, i);
}

::testing::AssertionResult has_pattern(const void *src, size_t len,
				       uint64_t seed, uint64_t start)
{
	const auto *p = static_cast<const uint8_t *>(src);
	uint64_t i = start, end = start + len;

	auto mismatch = [&](uint64_t at) {
		// Count the bad bytes too: it tells a shift from a hole.
		uint64_t bad = 0;
		for (uint64_t j = at; j < end; j++)
			bad += p[j - start] != byte_at(seed, j);
		return ::testing::AssertionFailure()
		       << "first wrong byte at offset " << (at - start)
		       << " of " << len << ": 0x" << std::hex
		       << int(p[at - start]) << " instead of 0x"
		       << int(byte_at(seed, at)) << std::dec << " (" << bad
		       << " wrong bytes from there)";
	};
	for (; i < end && (i & 7); i++)
		if (p[i - start] != byte_at(seed, i))
			return mismatch(i);
	for (; i + 8 <= end; i += 8) {
		uint64_t w = htole64(word(seed, i >> 3)), got;
		memcpy(&got, p + (i - start), 8);
		if (got != w)
			for (uint64_t j = i; j < i + 8; j++)
				if (p[j - start] != byte_at(seed, j))
					return mismatch(j);
	}
	for (; i < end; i++)
		if (p[i - start] != byte_at(seed, i))
			return mismatch(i);
	return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_bytes(const void *a, const void *b, size_t len)
{
	const auto *x = static_cast<const uint8_t *>(a);
	const auto *y = static_cast<const uint8_t *>(b);

	if (!memcmp(x, y, len))
		return ::testing::AssertionSuccess();
	for (size_t i = 0; i < len; i++)
		if (x[i] != y[i])
			return ::testing::AssertionFailure()
			       << "first difference at offset " << i << " of "
			       << len << ": 0x" << std::hex << int(x[i])
			       << " vs 0x" << int(y[i]);
	return ::testing::AssertionSuccess();
}

::testing::AssertionResult all_bytes(const void *src, size_t len, uint8_t v)
{
	const auto *p = static_cast<const uint8_t *>(src);

	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return ::testing::AssertionFailure()
			       << "byte " << i << " of " << len << " is 0x"
			       << std::hex << int(p[i]) << ", not 0x" << int(v);
	return ::testing::AssertionSuccess();
}

int64_t hw_counter(const std::string &dev, const char *name, bool fresh)
{
	if (fresh)
		std::this_thread::sleep_for(Ms(25));
	std::string s = read_line("/sys/class/infiniband/" + dev +
				  "/ports/1/hw_counters/" + name);
	return s.empty() ? -1 : strtoll(s.c_str(), nullptr, 0);
}

int64_t v2_path_counter(const std::string &dev, uint32_t qpn,
			const char *field)
{
	std::ifstream f("/sys/kernel/debug/metaroce/" + dev + "/qps");
	std::string line, word, qp = "qp " + std::to_string(qpn) + ":";
	int64_t sum = -1;
	bool mine = false;

	while (std::getline(f, line)) {
		if (line.rfind("qp ", 0) == 0)
			mine = line.rfind(qp, 0) == 0;
		if (!mine || line.find("  path ") != 0)
			continue;
		std::istringstream words(line);
		while (words >> word)
			if (word == field && words >> word)
				sum = (sum < 0 ? 0 : sum) + strtoll(word.c_str(),
								    nullptr, 0);
	}
	return sum;
}

void note(const std::string &key, double value)
{
	::testing::Test::RecordProperty(key, std::to_string(value));
	printf("[   NOTE   ] %s = %.1f\n", key.c_str(), value);
	fflush(stdout);
}

// ---------------------------------------------------------------------------

Ctx::Ctx(ibv_device *dev) : name(ibv_get_device_name(dev))
{
	try {
		open(dev);
	} catch (...) {
		close();
		throw;
	}
}

void Ctx::open(ibv_device *dev)
{
	ctx = ibv_open_device(dev);
	if (!ctx)
		fail("ibv_open_device(" + name + "): " + errstr(errno));
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		fail("ibv_alloc_pd: " + errstr(errno));
	if (int err = ibv_query_device(ctx, &dev_attr))
		fail("ibv_query_device: " + errstr(err));
	if (int err = ibv_query_port(ctx, kPort, &port))
		fail("ibv_query_port: " + errstr(err));
	int flags = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);

	gid_index = config().gid_index;
	for (int i = 0; gid_index < 0 && i < port.gid_tbl_len; i++) {
		ibv_gid_entry e{};
		static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0,
						     0, 0, 0xff, 0xff};
		if (ibv_query_gid_ex(ctx, kPort, i, &e, 0))
			continue;
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    !memcmp(e.gid.raw, v4mapped, 12))
			gid_index = i;
	}
	if (gid_index < 0)
		fail(name + ": no IPv4 RoCEv2 GID on port 1");
	if (int err = ibv_query_gid(ctx, kPort, gid_index, &gid))
		fail("ibv_query_gid: " + errstr(err));
	memcpy(&ipv4, gid.raw + 12, 4);
}

Ctx::~Ctx() { close(); }

void Ctx::close()
{
	if (pd)
		if (int err = ibv_dealloc_pd(pd)) {
			ADD_FAILURE() << "ibv_dealloc_pd: " << errstr(err);
		}
	if (ctx && ibv_close_device(ctx)) {
		ADD_FAILURE() << "ibv_close_device: " << errstr(errno);
	}
	pd = nullptr;
	ctx = nullptr;
}

static bool event_matches(const ibv_async_event &ev, ibv_event_type type,
			  ibv_qp *qp, ibv_cq *cq)
{
	if (ev.event_type != type)
		return false;
	if (qp && ev.element.qp != qp)
		return false;
	if (cq && ev.element.cq != cq)
		return false;
	return true;
}

std::optional<ibv_async_event> Ctx::wait_event(ibv_event_type type,
					       Ms timeout, ibv_qp *qp,
					       ibv_cq *cq)
{
	auto deadline = std::chrono::steady_clock::now() + timeout;

	for (const auto &ev : seen)
		if (event_matches(ev, type, qp, cq))
			return ev;
	for (;;) {
		ibv_async_event ev;
		if (!ibv_get_async_event(ctx, &ev)) {
			ibv_async_event copy = ev;
			ibv_ack_async_event(&ev);
			seen.push_back(copy);
			if (event_matches(copy, type, qp, cq))
				return copy;
			continue;
		}
		auto left = std::chrono::duration_cast<Ms>(
			deadline - std::chrono::steady_clock::now());
		if (left.count() <= 0)
			return std::nullopt;
		pollfd pfd = {ctx->async_fd, POLLIN, 0};
		poll(&pfd, 1, static_cast<int>(left.count()));
	}
}

void Ctx::drain_events(Ms window)
{
	auto deadline = std::chrono::steady_clock::now() + window;

	for (;;) {
		ibv_async_event ev;
		if (!ibv_get_async_event(ctx, &ev)) {
			seen.push_back(ev);
			ibv_ack_async_event(&ev);
			continue;
		}
		auto left = std::chrono::duration_cast<Ms>(
			deadline - std::chrono::steady_clock::now());
		if (left.count() <= 0)
			return;
		pollfd pfd = {ctx->async_fd, POLLIN, 0};
		poll(&pfd, 1, static_cast<int>(left.count()));
	}
}

int Ctx::count_events(ibv_event_type type, ibv_qp *qp, ibv_cq *cq) const
{
	int n = 0;

	for (const auto &ev : seen)
		n += event_matches(ev, type, qp, cq);
	return n;
}

// ---------------------------------------------------------------------------

Qdisc::Qdisc()
{
	if (const char *cmd = getenv("METAROCE_VERBS_QDISC_A"))
		cmd_ = cmd;
}

Qdisc::~Qdisc()
{
	if (added_)
		run("del", "");
}

bool Qdisc::available() const
{
	return cmd_.find("ACTION") != std::string::npos;
}

bool Qdisc::set(const std::string &qdisc)
{
	added_ = run("replace", qdisc);
	return added_;
}

bool Qdisc::run(const std::string &action, const std::string &args)
{
	std::string c = cmd_;
	c.replace(c.find("ACTION"), 6, action);
	return system((c + " " + args).c_str()) == 0;
}

static void *map_pages(size_t len, size_t *map_len)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t n = (len + page - 1) / page * page;
	void *m;

	if (!n)
		n = page;
	m = mmap(nullptr, n, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		fail("mmap(" + std::to_string(n) + "): " + errstr(errno));
	*map_len = n;
	return m;
}

Buf::Buf(size_t n, size_t offset) : len(n)
{
	map_ = map_pages(n + offset, &map_len_);
	p = static_cast<uint8_t *>(map_) + offset;
	iova = reinterpret_cast<uintptr_t>(p);
}

Buf::Buf(ibv_pd *pd, size_t n, int access, size_t offset, uint64_t va)
	: Buf(n, offset)
{
	if (va)
		mr = ibv_reg_mr_iova(pd, p, n, va, access);
	else
		mr = ibv_reg_mr(pd, p, n, access);
	if (!mr) {
		int err = errno;
		munmap(map_, map_len_);
		map_ = nullptr;
		fail("ibv_reg_mr(" + std::to_string(n) + " bytes, access 0x" +
		     std::to_string(access) + "): " + errstr(err));
	}
	if (va)
		iova = va;
}

void Buf::deregister()
{
	if (mr)
		if (int err = ibv_dereg_mr(mr)) {
			ADD_FAILURE() << "ibv_dereg_mr: " << errstr(err);
		}
	mr = nullptr;
}

Buf::~Buf()
{
	deregister();
	if (map_)
		munmap(map_, map_len_);
}

ibv_sge Buf::sge(size_t off, size_t n) const
{
	return ibv_sge{addr(off), static_cast<uint32_t>(n),
		       mr ? mr->lkey : 0};
}

// ---------------------------------------------------------------------------

Qp::Qp(Ctx &ctx, const QpOpts &o) : c(ctx)
{
	try {
		create(o);
	} catch (...) {
		close();
		throw;
	}
}

void Qp::create(const QpOpts &o)
{
	int scqe = o.scqe ? o.scqe : std::max<int>(o.send_wr, 16);
	int rcqe = o.rcqe ? o.rcqe : std::max<int>(o.recv_wr, 16);

	auto make_cq = [&](int cqe, ibv_cq_ex **x) {
		ibv_cq *cq;
		if (o.cq_ex) {
			ibv_cq_init_attr_ex ca{};
			ca.cqe = cqe;
			ca.channel = o.channel;
			ca.wc_flags = IBV_WC_STANDARD_FLAGS;
			if (o.cq_flags) {
				ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
				ca.flags = o.cq_flags;
			}
			*x = ibv_create_cq_ex(c.ctx, &ca);
			cq = *x ? ibv_cq_ex_to_cq(*x) : nullptr;
		} else {
			cq = ibv_create_cq(c.ctx, cqe, nullptr, o.channel, 0);
		}
		if (!cq)
			fail(std::string(o.cq_ex ? "ibv_create_cq_ex(" :
						   "ibv_create_cq(") +
			     std::to_string(cqe) + "): " + errstr(errno));
		return cq;
	};
	scq = make_cq(scqe, &scqx);
	rcq = make_cq(rcqe, &rcqx);

	ibv_qp_init_attr_ex attr{};
	attr.send_cq = scq;
	attr.recv_cq = rcq;
	attr.qp_type = o.type;
	attr.sq_sig_all = o.sig_all;
	attr.cap.max_send_wr = o.send_wr;
	attr.cap.max_recv_wr = o.recv_wr;
	attr.cap.max_send_sge = o.send_sge;
	attr.cap.max_recv_sge = o.recv_sge;
	attr.cap.max_inline_data = o.inline_data;
	attr.srq = o.srq;
	attr.comp_mask = IBV_QP_INIT_ATTR_PD;
	attr.pd = o.pd ? o.pd : c.pd;
	if (o.send_ops) {
		attr.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		attr.send_ops_flags = o.send_ops;
	}
	qp = ibv_create_qp_ex(c.ctx, &attr);
	if (!qp)
		fail("ibv_create_qp_ex: " + errstr(errno));
	cap = attr.cap;
}

void Qp::destroy()
{
	if (qp)
		if (int err = ibv_destroy_qp(qp)) {
			ADD_FAILURE() << "ibv_destroy_qp: " << errstr(err);
		}
	qp = nullptr;
}

Qp::~Qp() { close(); }

void Qp::close()
{
	destroy();
	for (ibv_cq *cq : {scq, rcq})
		if (cq)
			if (int err = ibv_destroy_cq(cq)) {
				ADD_FAILURE() << "ibv_destroy_cq: " << errstr(err);
			}
	scq = rcq = nullptr;
	scqx = rcqx = nullptr;
}

ibv_qp_state Qp::state()
{
	ibv_qp_attr a{};
	ibv_qp_init_attr ia{};

	if (int err = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia)) {
		ADD_FAILURE() << "ibv_query_qp: " << errstr(err);
		return static_cast<ibv_qp_state>(-1);
	}
	return a.qp_state;
}

ibv_qp_state Qp::wait_state(ibv_qp_state want, Ms timeout)
{
	auto t0 = std::chrono::steady_clock::now();
	ibv_qp_state st;

	while ((st = state()) != want && ms_since(t0) < timeout.count())
		std::this_thread::sleep_for(Ms(1));
	return st;
}

ibv_ah_attr ah_to(const Ctx &from, const Ctx &to)
{
	ibv_ah_attr ah{};

	ah.is_global = 1;
	ah.grh.dgid = to.gid;
	ah.grh.sgid_index = static_cast<uint8_t>(from.gid_index);
	ah.grh.hop_limit = 64;
	ah.port_num = kPort;
	return ah;
}

int rc_init(Qp &q, int access)
{
	ibv_qp_attr a{};

	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = kPort;
	a.qp_access_flags = access;
	return ibv_modify_qp(q.qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS);
}

int rc_rtr(Qp &q, const Ctx &peer_ctx, uint32_t peer_qpn, uint32_t rq_psn,
	   const ConnOpts &o)
{
	ibv_qp_attr a{};

	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = static_cast<ibv_mtu>(o.mtu ? o.mtu : q.c.port.active_mtu);
	a.dest_qp_num = peer_qpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = o.max_dest_rd_atomic;
	a.min_rnr_timer = o.min_rnr_timer;
	a.ah_attr = ah_to(q.c, peer_ctx);
	return ibv_modify_qp(q.qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER);
}

int rc_rts(Qp &q, uint32_t sq_psn, const ConnOpts &o)
{
	ibv_qp_attr a{};

	a.qp_state = IBV_QPS_RTS;
	a.timeout = o.timeout;
	a.retry_cnt = o.retry_cnt;
	a.rnr_retry = o.rnr_retry;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = o.max_rd_atomic;
	return ibv_modify_qp(q.qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

void connect(Qp &a, Qp &b, const ConnOpts &o)
{
	if (int err = rc_init(a, o.access))
		fail("A to INIT: " + errstr(err));
	if (int err = rc_init(b, o.access))
		fail("B to INIT: " + errstr(err));
	if (int err = rc_rtr(a, b.c, b.qpn(), o.psn_b, o))
		fail("A to RTR: " + errstr(err));
	if (int err = rc_rtr(b, a.c, a.qpn(), o.psn_a, o))
		fail("B to RTR: " + errstr(err));
	if (int err = rc_rts(a, o.psn_a, o))
		fail("A to RTS: " + errstr(err));
	if (int err = rc_rts(b, o.psn_b, o))
		fail("B to RTS: " + errstr(err));
}

void ud_up(Qp &q, uint32_t qkey, uint32_t sq_psn)
{
	ibv_qp_attr a{};

	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = kPort;
	a.qkey = qkey;
	if (int err = ibv_modify_qp(q.qp, &a,
				    IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					    IBV_QP_PORT | IBV_QP_QKEY))
		fail("UD to INIT: " + errstr(err));
	a = {};
	a.qp_state = IBV_QPS_RTR;
	if (int err = ibv_modify_qp(q.qp, &a, IBV_QP_STATE))
		fail("UD to RTR: " + errstr(err));
	a = {};
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	if (int err = ibv_modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		fail("UD to RTS: " + errstr(err));
}

// ---------------------------------------------------------------------------

int post_send(ibv_qp *qp, std::span<const Wr> wrs, int *bad_index)
{
	std::vector<ibv_send_wr> v(wrs.size());
	std::vector<std::vector<ibv_sge>> sges(wrs.size());
	ibv_send_wr *bad = nullptr;

	for (size_t i = 0; i < wrs.size(); i++) {
		const Wr &w = wrs[i];
		ibv_send_wr &s = v[i];

		sges[i] = w.sges;
		s.wr_id = w.wr_id;
		s.next = i + 1 < wrs.size() ? &v[i + 1] : nullptr;
		s.sg_list = sges[i].empty() ? nullptr : sges[i].data();
		s.num_sge = static_cast<int>(sges[i].size());
		s.opcode = w.op;
		s.send_flags = w.flags;
		if (w.op == IBV_WR_SEND_WITH_INV)
			s.invalidate_rkey = w.imm;
		else
			s.imm_data = htobe32(w.imm);
		if (w.ah) {
			s.wr.ud.ah = w.ah;
			s.wr.ud.remote_qpn = w.remote_qpn;
			s.wr.ud.remote_qkey = w.remote_qkey;
		} else {
			s.wr.rdma.remote_addr = w.raddr;
			s.wr.rdma.rkey = w.rkey;
		}
	}
	int err = ibv_post_send(qp, v.data(), &bad);
	if (bad_index)
		*bad_index = bad ? static_cast<int>(bad - v.data()) : -1;
	return err;
}

int post_send(ibv_qp *qp, const Wr &wr)
{
	return post_send(qp, std::span<const Wr>(&wr, 1));
}

int post_recv(ibv_qp *qp, std::vector<ibv_sge> sges, uint64_t wr_id)
{
	ibv_recv_wr wr{}, *bad = nullptr;

	wr.wr_id = wr_id;
	wr.sg_list = sges.empty() ? nullptr : sges.data();
	wr.num_sge = static_cast<int>(sges.size());
	return ibv_post_recv(qp, &wr, &bad);
}

int post_recv(ibv_qp *qp, const Buf &b, uint64_t wr_id)
{
	return post_recv(qp, {b.sge()}, wr_id);
}

std::vector<ibv_wc> poll(ibv_cq *cq, size_t n, Ms timeout)
{
	std::vector<ibv_wc> out;
	auto deadline = std::chrono::steady_clock::now() + timeout;
	ibv_wc wc[64];

	while (out.size() < n) {
		int want = static_cast<int>(std::min<size_t>(64, n - out.size()));
		int got = ibv_poll_cq(cq, want, wc);
		if (got < 0) {
			ADD_FAILURE() << "ibv_poll_cq: " << got;
			break;
		}
		out.insert(out.end(), wc, wc + got);
		if (got)
			continue;
		if (std::chrono::steady_clock::now() > deadline)
			break;
		std::this_thread::sleep_for(std::chrono::microseconds(50));
	}
	return out;
}

ibv_wc poll1(ibv_cq *cq, Ms timeout)
{
	auto v = poll(cq, 1, timeout);

	if (v.empty()) {
		ADD_FAILURE() << "no completion within " << timeout.count()
			      << " ms";
		ibv_wc wc{};
		wc.status = static_cast<ibv_wc_status>(-1);
		wc.wr_id = ~0ULL;
		return wc;
	}
	return v[0];
}

::testing::AssertionResult quiet(ibv_cq *cq, Ms window)
{
	auto v = poll(cq, 1, window);

	if (v.empty())
		return ::testing::AssertionSuccess();
	return ::testing::AssertionFailure()
	       << "unexpected completion " << describe(v[0]);
}

::testing::AssertionResult poll_ok(ibv_cq *cq, size_t n, uint64_t first,
				   Ms timeout)
{
	auto v = poll(cq, n, timeout);

	for (size_t i = 0; i < v.size(); i++) {
		if (v[i].status != IBV_WC_SUCCESS || v[i].wr_id != first + i)
			return ::testing::AssertionFailure()
			       << "completion " << i << " of " << n << " is "
			       << describe(v[i]) << ", expected wr_id "
			       << first + i << " success";
	}
	if (v.size() < n)
		return ::testing::AssertionFailure()
		       << "only " << v.size() << " of " << n
		       << " completions within " << timeout.count() << " ms";
	return ::testing::AssertionSuccess();
}

::testing::AssertionResult wc_is(const ibv_wc &wc, uint64_t wr_id,
				 ibv_wc_status status)
{
	if (wc.wr_id == wr_id && wc.status == status)
		return ::testing::AssertionSuccess();
	return ::testing::AssertionFailure()
	       << "got " << describe(wc) << ", expected wr_id " << wr_id
	       << " status " << wc_status(status);
}

::testing::AssertionResult wc_is(const ibv_wc &wc, uint64_t wr_id,
				 ibv_wc_status status, ibv_wc_opcode op)
{
	if (wc.wr_id == wr_id && wc.status == status && wc.opcode == op)
		return ::testing::AssertionSuccess();
	return ::testing::AssertionFailure()
	       << "got " << describe(wc) << ", expected wr_id " << wr_id
	       << " status " << wc_status(status) << " opcode " << op;
}

// ---------------------------------------------------------------------------

std::string topo_name(const ::testing::TestParamInfo<Topo> &info)
{
	return info.param == Topo::Loopback ? "Loopback" : "TwoDevices";
}

void VerbsTest::SetUp()
{
	const Config &c = config();

	if (g_error)
		FAIL() << c.why_none;
	if (!c.dev_a)
		GTEST_SKIP() << c.why_none;
	ca_ = std::make_unique<Ctx>(c.dev_a);
	a_ = ca_.get();
	if (c.dev_b != c.dev_a) {
		cb_ = std::make_unique<Ctx>(c.dev_b);
		b_ = cb_.get();
	} else {
		b_ = a_;
	}
}

void VerbsTest::TearDown()
{
	cb_.reset();
	ca_.reset();
}

void ChannelTest::TearDown()
{
	if (channel_) {
		if (int err = ibv_destroy_comp_channel(channel_))
			ADD_FAILURE() << "ibv_destroy_comp_channel: " << errstr(err);
	}
	VerbsTest::TearDown();
}

ibv_comp_channel *ChannelTest::make_channel(Ctx &c)
{
	channel_ = ibv_create_comp_channel(c.ctx);
	if (!channel_)
		fail("ibv_create_comp_channel: " + errstr(errno));
	int fl = fcntl(channel_->fd, F_GETFL);
	fcntl(channel_->fd, F_SETFL, fl | O_NONBLOCK);
	return channel_;
}

ibv_cq *ChannelTest::next_event(Ms timeout)
{
	auto deadline = std::chrono::steady_clock::now() + timeout;
	for (;;) {
		ibv_cq *cq = nullptr;
		void *ctx = nullptr;
		if (!ibv_get_cq_event(channel_, &cq, &ctx)) {
			ibv_ack_cq_events(cq, 1);
			return cq;
		}
		auto left = std::chrono::duration_cast<Ms>(
			deadline - std::chrono::steady_clock::now());
		if (left.count() <= 0)
			return nullptr;
		pollfd pfd = {channel_->fd, POLLIN, 0};
		::poll(&pfd, 1, static_cast<int>(left.count()));
	}
}

void expect_held_send_unchanged(Ctx &a, Ctx &b, Qdisc &qdisc, int seed,
				const std::function<void(Buf &src)> &revoke)
{
	// Above the copy break and inside the first window: every packet is
	// built (from the MR's pages) and queued before @revoke.
	const size_t n = 64 << 10;
	const Ms built = limit(Ms(100)), held = 4 * built;
	Qp qa(a), qb(b);
	connect(qa, qb);
	Buf src(a.pd, n), dst(b.pd, n);
	fill(src.p, n, seed);
	memset(dst.p, 0, n);
	ASSERT_TRUE(qdisc.set("netem delay " + std::to_string(held.count()) +
			      "ms limit 10000"));
	ASSERT_EQ(post_recv(qb.qp, {dst.sge()}, 1), 0);
	const auto posted = std::chrono::steady_clock::now();
	ASSERT_EQ(post_send(qa.qp, send_wr(src, 0, n, 2)), 0);
	std::this_thread::sleep_for(built);
	revoke(src);
	// Had nothing waited, the packets would still be in the qdisc.
	EXPECT_GE(std::chrono::steady_clock::now() - posted, held);
	// The buffer is the application's again.
	fill(src.p, n, seed + 1);

	ibv_wc wc = poll1(qa.scq, limit(Ms(60000)));
	EXPECT_TRUE(wc.status == IBV_WC_SUCCESS ||
		    wc.status == IBV_WC_LOC_PROT_ERR)
		<< describe(wc);
	wc = poll1(qb.rcq, limit(Ms(60000)));
	EXPECT_WC(wc, 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_TRUE(has_pattern(dst.p, n, seed));
}

} // namespace mrt
