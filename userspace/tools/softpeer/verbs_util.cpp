#include "verbs_util.h"

#include <arpa/inet.h>
#include <dirent.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace metaroce::tools {
namespace {

std::runtime_error verbs_error(const std::string& what, int err) {
    return std::runtime_error(what + ": " + std::strerror(err));
}

}  // namespace

VerbsDevice::VerbsDevice(const std::string& name, std::uint8_t port) : name_(name), port_(port) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr) throw std::runtime_error("ibv_get_device_list failed");
    for (int i = 0; i < n && ctx_ == nullptr; ++i) {
        if (name.empty() || name == ibv_get_device_name(list[i])) {
            name_ = ibv_get_device_name(list[i]);
            ctx_ = ibv_open_device(list[i]);
        }
    }
    ibv_free_device_list(list);
    if (ctx_ == nullptr) throw std::runtime_error("cannot open RDMA device '" + name + "'");
    pd_ = ibv_alloc_pd(ctx_);
    if (pd_ == nullptr) {
        ibv_close_device(ctx_);
        throw std::runtime_error("ibv_alloc_pd failed");
    }
}

VerbsDevice::~VerbsDevice() {
    if (pd_ != nullptr) ibv_dealloc_pd(pd_);
    if (ctx_ != nullptr) ibv_close_device(ctx_);
}

ibv_gid VerbsDevice::gid(int index) const {
    ibv_gid g{};
    if (ibv_query_gid(ctx_, port_, index, &g) != 0) {
        throw std::runtime_error("ibv_query_gid " + std::to_string(index) + " failed");
    }
    return g;
}

std::optional<int> VerbsDevice::gid_index_for(const std::string& ip) const {
    ibv_port_attr pa{};
    if (ibv_query_port(ctx_, port_, &pa) != 0) return std::nullopt;
    std::optional<ibv_gid> want;
    if (!ip.empty()) {
        want = gid_of_ip(ip);
        if (!want) return std::nullopt;
    }
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
        ibv_gid g{};
        if (ibv_query_gid(ctx_, port_, i, &g) != 0) continue;
        if (want) {
            if (std::memcmp(g.raw, want->raw, 16) == 0) return i;
            continue;
        }
        static const std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (std::memcmp(g.raw, kMapped, 12) == 0) return i;
    }
    return std::nullopt;
}

std::optional<ibv_gid> gid_of_ip(const std::string& ip) {
    ibv_gid g{};
    in_addr v4{};
    if (inet_pton(AF_INET, ip.c_str(), &v4) == 1) {
        g.raw[10] = 0xff;
        g.raw[11] = 0xff;
        std::memcpy(&g.raw[12], &v4, 4);
        return g;
    }
    if (inet_pton(AF_INET6, ip.c_str(), g.raw) == 1) return g;
    return std::nullopt;
}

std::string ip_of_gid(const ibv_gid& g) {
    char buf[INET6_ADDRSTRLEN] = {};
    static const std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(g.raw, kMapped, 12) == 0) {
        inet_ntop(AF_INET, &g.raw[12], buf, sizeof buf);
    } else {
        inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
    }
    return buf;
}

ibv_mtu mtu_enum(std::uint32_t bytes) {
    switch (bytes) {
        case 256:
            return IBV_MTU_256;
        case 512:
            return IBV_MTU_512;
        case 2048:
            return IBV_MTU_2048;
        case 4096:
            return IBV_MTU_4096;
        default:
            return IBV_MTU_1024;
    }
}

MemoryRegion::MemoryRegion(ibv_pd* pd, std::size_t len, int access) : buf_(len ? len : 1, 0) {
    mr_ = ibv_reg_mr(pd, buf_.data(), buf_.size(), access);
    if (mr_ == nullptr) throw verbs_error("ibv_reg_mr", errno);
}

MemoryRegion::~MemoryRegion() {
    if (mr_ != nullptr) ibv_dereg_mr(mr_);
}

RcQp::RcQp(VerbsDevice& dev, std::uint32_t depth, std::uint32_t max_sge, ibv_srq* srq)
    : dev_(dev) {
    scq_ = ibv_create_cq(dev.ctx(), static_cast<int>(depth), nullptr, nullptr, 0);
    rcq_ = ibv_create_cq(dev.ctx(), static_cast<int>(depth), nullptr, nullptr, 0);
    if (scq_ == nullptr || rcq_ == nullptr) {
        if (scq_ != nullptr) ibv_destroy_cq(scq_);
        if (rcq_ != nullptr) ibv_destroy_cq(rcq_);
        throw verbs_error("ibv_create_cq", errno);
    }
    ibv_qp_init_attr init{};
    init.send_cq = scq_;
    init.recv_cq = rcq_;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = depth;
    init.cap.max_recv_wr = depth;
    init.cap.max_send_sge = max_sge;
    init.cap.max_recv_sge = max_sge;
    init.srq = srq;
    qp_ = ibv_create_qp(dev.pd(), &init);
    if (qp_ == nullptr) {
        const int err = errno;
        ibv_destroy_cq(scq_);
        ibv_destroy_cq(rcq_);
        throw verbs_error("ibv_create_qp", err);
    }
}

RcQp::~RcQp() {
    if (qp_ != nullptr) ibv_destroy_qp(qp_);
    if (scq_ != nullptr) ibv_destroy_cq(scq_);
    if (rcq_ != nullptr) ibv_destroy_cq(rcq_);
}

void RcQp::to_init(int access) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = dev_.port();
    a.qp_access_flags = static_cast<unsigned>(access);
    const int rc = ibv_modify_qp(
        qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) throw verbs_error("modify_qp INIT", rc);
}

void RcQp::connect(const RcConnectParams& p) {
    if (state() == IBV_QPS_RESET) to_init(p.access);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu_enum(p.mtu);
    a.dest_qp_num = p.dest_qpn;
    a.rq_psn = p.rq_psn;
    a.max_dest_rd_atomic = p.max_dest_rd_atomic;
    a.min_rnr_timer = p.min_rnr_timer;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = p.dgid;
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(p.sgid_index);
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = dev_.port();
    int rc = ibv_modify_qp(qp_, &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0) throw verbs_error("modify_qp RTR", rc);
    if (!p.to_rts) return;
    ibv_qp_attr r{};
    r.qp_state = IBV_QPS_RTS;
    r.sq_psn = p.sq_psn;
    r.timeout = p.timeout;
    r.retry_cnt = p.retry_cnt;
    r.rnr_retry = p.rnr_retry;
    r.max_rd_atomic = p.max_rd_atomic;
    rc = ibv_modify_qp(qp_, &r,
                       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                           IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0) throw verbs_error("modify_qp RTS", rc);
}

ibv_qp_state RcQp::state() const {
    ibv_qp_attr a{};
    ibv_qp_init_attr init{};
    if (ibv_query_qp(qp_, &a, IBV_QP_STATE, &init) != 0) return IBV_QPS_UNKNOWN;
    return a.qp_state;
}

void RcQp::post_recv(std::uint64_t wr_id, std::uint64_t addr, std::uint32_t len,
                     std::uint32_t lkey) {
    ibv_sge sge{addr, len, lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = len == 0 ? 0 : 1;
    ibv_recv_wr* bad = nullptr;
    const int rc = ibv_post_recv(qp_, &wr, &bad);
    if (rc != 0) throw verbs_error("ibv_post_recv", rc);
}

void RcQp::post_send(ibv_wr_opcode op, std::uint64_t wr_id, std::uint64_t local_addr,
                     std::uint32_t len, std::uint32_t lkey, std::uint64_t remote_addr,
                     std::uint32_t rkey, std::uint32_t imm, unsigned flags) {
    ibv_sge sge{local_addr, len, lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = len == 0 ? 0 : 1;
    wr.opcode = op;
    wr.send_flags = flags | IBV_SEND_SIGNALED;
    wr.imm_data = htonl(imm);
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(qp_, &wr, &bad);
    if (rc != 0) throw verbs_error("ibv_post_send", rc);
}

std::vector<ibv_wc> poll_cq(ibv_cq* cq, int max, int timeout_ms) {
    std::vector<ibv_wc> out(static_cast<std::size_t>(max));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        const int n = ibv_poll_cq(cq, max, out.data());
        if (n < 0) throw std::runtime_error("ibv_poll_cq failed");
        if (n > 0) {
            out.resize(static_cast<std::size_t>(n));
            return out;
        }
        if (std::chrono::steady_clock::now() >= deadline) return {};
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

std::optional<ibv_wc> poll_one(ibv_cq* cq, int timeout_ms) {
    const auto wcs = poll_cq(cq, 1, timeout_ms);
    if (wcs.empty()) return std::nullopt;
    return wcs[0];
}

std::map<std::string, std::uint64_t> read_hw_counters(const std::string& dev, int port) {
    std::map<std::string, std::uint64_t> out;
    const std::string dir =
        "/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/hw_counters";
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return out;
    while (const dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::ifstream in(dir + "/" + e->d_name);
        std::uint64_t v = 0;
        if (in >> v) out[e->d_name] = v;
    }
    closedir(d);
    return out;
}

const char* wc_status_name(ibv_wc_status status) { return ibv_wc_status_str(status); }

}  // namespace metaroce::tools
