// Thin C++ helpers over libibverbs for the tools that drive a real (kernel) MetaRoCE QP:
// metaroce-interop and metaroce-compliance. RC QPs connected by hand (QPN, PSN, GID), the
// GID of an IP address, polling with a timeout, the device's hardware counters.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace metaroce::tools {

// libibverbs resources, released in reverse order. Throws std::runtime_error.
class VerbsDevice {
  public:
    explicit VerbsDevice(const std::string& name, std::uint8_t port = 1);
    ~VerbsDevice();
    VerbsDevice(const VerbsDevice&) = delete;
    VerbsDevice& operator=(const VerbsDevice&) = delete;

    ibv_context* ctx() const { return ctx_; }
    ibv_pd* pd() const { return pd_; }
    const std::string& name() const { return name_; }
    std::uint8_t port() const { return port_; }

    // The GID index whose address is `ip` (IPv4: its IPv4-mapped GID); with an empty `ip`,
    // the first IPv4-mapped GID. nullopt if none.
    std::optional<int> gid_index_for(const std::string& ip) const;
    ibv_gid gid(int index) const;

  private:
    std::string name_;
    std::uint8_t port_;
    ibv_context* ctx_ = nullptr;
    ibv_pd* pd_ = nullptr;
};

// An IP address as a GID (IPv4 as ::ffff:a.b.c.d) and back.
std::optional<ibv_gid> gid_of_ip(const std::string& ip);
std::string ip_of_gid(const ibv_gid& gid);

ibv_mtu mtu_enum(std::uint32_t bytes);

// A registered buffer of our own.
class MemoryRegion {
  public:
    MemoryRegion(ibv_pd* pd, std::size_t len, int access);
    ~MemoryRegion();
    MemoryRegion(const MemoryRegion&) = delete;
    MemoryRegion& operator=(const MemoryRegion&) = delete;

    std::uint8_t* data() { return buf_.data(); }
    const std::uint8_t* data() const { return buf_.data(); }
    std::size_t size() const { return buf_.size(); }
    std::uint64_t addr() const { return reinterpret_cast<std::uintptr_t>(buf_.data()); }
    std::uint32_t lkey() const { return mr_->lkey; }
    std::uint32_t rkey() const { return mr_->rkey; }

  private:
    std::vector<std::uint8_t> buf_;
    ibv_mr* mr_ = nullptr;
};

struct RcConnectParams {
    std::uint32_t dest_qpn = 0;
    std::uint32_t rq_psn = 0;  // the peer's first PSN
    std::uint32_t sq_psn = 0;  // ours
    ibv_gid dgid{};
    int sgid_index = 1;
    std::uint32_t mtu = 1024;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    std::uint8_t min_rnr_timer = 12;  // 0.64 ms
    std::uint8_t timeout = 14;        // 67 ms
    std::uint8_t retry_cnt = 7;
    std::uint8_t rnr_retry = 7;
    std::uint8_t max_rd_atomic = 16;
    std::uint8_t max_dest_rd_atomic = 16;
    bool to_rts = true;  // false: stop at RTR
};

// An RC QP with its own send and receive CQs.
class RcQp {
  public:
    // With `srq`, receives come from it (the QP has no receive queue).
    RcQp(VerbsDevice& dev, std::uint32_t depth = 256, std::uint32_t max_sge = 4,
         ibv_srq* srq = nullptr);
    ~RcQp();
    RcQp(const RcQp&) = delete;
    RcQp& operator=(const RcQp&) = delete;

    ibv_qp* qp() const { return qp_; }
    std::uint32_t qpn() const { return qp_->qp_num; }
    ibv_cq* send_cq() const { return scq_; }
    ibv_cq* recv_cq() const { return rcq_; }

    void to_init(int access);
    void connect(const RcConnectParams& p);  // RESET/INIT -> RTR (-> RTS)
    ibv_qp_state state() const;

    // Posting; throw on failure.
    void post_recv(std::uint64_t wr_id, std::uint64_t addr, std::uint32_t len, std::uint32_t lkey);
    void post_send(ibv_wr_opcode op, std::uint64_t wr_id, std::uint64_t local_addr,
                   std::uint32_t len, std::uint32_t lkey, std::uint64_t remote_addr = 0,
                   std::uint32_t rkey = 0, std::uint32_t imm = 0, unsigned flags = 0);

  private:
    VerbsDevice& dev_;
    ibv_cq* scq_ = nullptr;
    ibv_cq* rcq_ = nullptr;
    ibv_qp* qp_ = nullptr;
};

// Up to `max` completions, waiting at most timeout_ms for the first.
std::vector<ibv_wc> poll_cq(ibv_cq* cq, int max, int timeout_ms);
std::optional<ibv_wc> poll_one(ibv_cq* cq, int timeout_ms);

// The device's port counters (/sys/class/infiniband/DEV/ports/PORT/hw_counters); empty if the
// device exports none.
std::map<std::string, std::uint64_t> read_hw_counters(const std::string& dev, int port = 1);

const char* wc_status_name(ibv_wc_status status);

}  // namespace metaroce::tools
