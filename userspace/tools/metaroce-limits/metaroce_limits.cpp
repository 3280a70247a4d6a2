// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// metaroce-limits: creates verbs objects of one kind until the device (or the memory cgroup)
// says no, for selftests/metaroce/limits.sh.
//
//   metaroce-limits -d DEV -k pd|cq|qp|mr|ah [-a min|max] [-n CAP] [-s MR_BYTES] [-H] [-l]
//
// -a max asks for the largest attributes the device advertises (QP: max_qp_wr work requests
// and max_sge SGEs each way and 256 bytes inline; CQ: max_cqe entries); -a min for the
// smallest. Stops at the first failure or after CAP objects. Prints one line
//
//   kind=qp limit=L created=N errno=E
//
// (L: the device's advertised maximum of the kind, E: the errno of the creation that failed,
// 0 if CAP was reached). -H then prints "holding" and waits for standard input to close, so the
// caller can look at the memory in use; -l exits without destroying anything (the kernel then
// cleans up when the device file closes). Exit status 0 when it ran, 2 on a setup error.
#include <infiniband/verbs.h>

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// The kernel's METAROCE_MAX_INLINE: the device has no attribute that says it.
constexpr uint32_t kMaxInline = 256;

struct Options {
    std::string device;
    std::string kind;
    bool max_attrs = true;
    uint64_t cap = UINT64_MAX;
    size_t mr_bytes = 4096;
    bool hold = false;
    bool leave = false;
};

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "metaroce-limits: %s\n", what.c_str());
    std::exit(2);
}

[[noreturn]] void usage() {
    std::fprintf(stderr,
                 "usage: metaroce-limits -d DEV -k pd|cq|qp|mr|ah [-a min|max] [-n CAP]\n"
                 "                       [-s MR_BYTES] [-H] [-l]\n");
    std::exit(2);
}

Options parse(int argc, char** argv) {
    Options o;
    int c;
    while ((c = getopt(argc, argv, "d:k:a:n:s:Hlh")) != -1) {
        switch (c) {
            case 'd': o.device = optarg; break;
            case 'k': o.kind = optarg; break;
            case 'a':
                if (std::strcmp(optarg, "min") && std::strcmp(optarg, "max")) usage();
                o.max_attrs = !std::strcmp(optarg, "max");
                break;
            case 'n': o.cap = std::strtoull(optarg, nullptr, 0); break;
            case 's': o.mr_bytes = std::strtoull(optarg, nullptr, 0); break;
            case 'H': o.hold = true; break;
            case 'l': o.leave = true; break;
            default: usage();
        }
    }
    if (o.device.empty() || o.kind.empty() || !o.mr_bytes) usage();
    return o;
}

ibv_context* open_device(const std::string& name) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list) die("no RDMA devices");
    ibv_context* ctx = nullptr;
    for (int i = 0; i < n && !ctx; i++)
        if (name == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    if (!ctx) die("cannot open " + name + ": " + std::strerror(errno));
    return ctx;
}

// The objects made so far, of whichever kind, destroyed in reverse order.
class Objects {
  public:
    Objects(ibv_context* ctx, const Options& o) : ctx_(ctx), o_(o) {
        if (ibv_query_device(ctx, &attr_)) die("ibv_query_device failed");
        pd_ = ibv_alloc_pd(ctx);
        if (!pd_) die(std::string("ibv_alloc_pd: ") + std::strerror(errno));
    }

    // The advertised maximum of the kind.
    uint64_t limit() const {
        const std::string& k = o_.kind;
        if (k == "pd") return attr_.max_pd;
        if (k == "cq") return attr_.max_cq;
        if (k == "qp") return attr_.max_qp;
        if (k == "mr") return attr_.max_mr;
        if (k == "ah") return attr_.max_ah;
        usage();
    }

    // Creates one more object; false (errno set) when that failed.
    bool create_one() {
        const std::string& k = o_.kind;
        if (k == "pd") return keep(pds_, ibv_alloc_pd(ctx_));
        if (k == "cq") return keep(cqs_, make_cq(o_.max_attrs ? attr_.max_cqe : 1));
        if (k == "qp") return keep(qps_, make_qp());
        if (k == "mr") return keep(mrs_, make_mr());
        if (k == "ah") return keep(ahs_, make_ah());
        usage();
    }

    void destroy_all() {
        for (auto it = ahs_.rbegin(); it != ahs_.rend(); ++it) check(ibv_destroy_ah(*it), "ah");
        for (auto it = mrs_.rbegin(); it != mrs_.rend(); ++it) check(ibv_dereg_mr(*it), "mr");
        for (auto it = qps_.rbegin(); it != qps_.rend(); ++it) check(ibv_destroy_qp(*it), "qp");
        for (auto it = cqs_.rbegin(); it != cqs_.rend(); ++it)
            check(ibv_destroy_cq(*it), "cq");
        for (auto it = pds_.rbegin(); it != pds_.rend(); ++it)
            check(ibv_dealloc_pd(*it), "pd");
        if (qp_cq_) check(ibv_destroy_cq(qp_cq_), "cq");
        check(ibv_dealloc_pd(pd_), "pd");
    }

  private:
    template <typename T>
    static bool keep(std::vector<T*>& v, T* obj) {
        if (!obj) return false;
        v.push_back(obj);
        return true;
    }

    static void check(int err, const char* what) {
        if (err) die(std::string("destroying a ") + what + ": " + std::strerror(err));
    }

    ibv_cq* make_cq(int cqe) { return ibv_create_cq(ctx_, cqe, nullptr, nullptr, 0); }

    ibv_qp* make_qp() {
        if (!qp_cq_ && !(qp_cq_ = make_cq(1))) return nullptr;
        ibv_qp_init_attr init{};
        init.send_cq = qp_cq_;
        init.recv_cq = qp_cq_;
        init.qp_type = IBV_QPT_RC;
        if (o_.max_attrs) {
            init.cap.max_send_wr = attr_.max_qp_wr;
            init.cap.max_recv_wr = attr_.max_qp_wr;
            init.cap.max_send_sge = attr_.max_sge;
            init.cap.max_recv_sge = attr_.max_sge;
            init.cap.max_inline_data = kMaxInline;
        } else {
            init.cap.max_send_wr = 1;
            init.cap.max_recv_wr = 1;
            init.cap.max_send_sge = 1;
            init.cap.max_recv_sge = 1;
        }
        return ibv_create_qp(pd_, &init);
    }

    // Every MR registers the same buffer: what is pinned grows with the count (memlock).
    ibv_mr* make_mr() {
        if (mr_buf_.empty()) mr_buf_.assign(o_.mr_bytes, 0x5a);
        return ibv_reg_mr(pd_, mr_buf_.data(), mr_buf_.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ);
    }

    // An AH towards our own GID 1 (the netdev's IPv4 address).
    ibv_ah* make_ah() {
        ibv_ah_attr ah{};
        ah.is_global = 1;
        ah.port_num = 1;
        ah.grh.sgid_index = 1;
        ah.grh.hop_limit = 64;
        if (ibv_query_gid(ctx_, 1, 1, &ah.grh.dgid)) return nullptr;
        return ibv_create_ah(pd_, &ah);
    }

    ibv_context* ctx_;
    const Options& o_;
    ibv_device_attr attr_{};
    ibv_pd* pd_ = nullptr;
    ibv_cq* qp_cq_ = nullptr;
    std::vector<uint8_t> mr_buf_;
    std::vector<ibv_pd*> pds_;
    std::vector<ibv_cq*> cqs_;
    std::vector<ibv_qp*> qps_;
    std::vector<ibv_mr*> mrs_;
    std::vector<ibv_ah*> ahs_;
};

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    ibv_context* ctx = open_device(o.device);
    Objects objs(ctx, o);

    uint64_t created = 0;
    int err = 0;
    while (created < o.cap) {
        errno = 0;
        if (!objs.create_one()) {
            // A provider that fails without saying why still failed.
            err = errno ? errno : EIO;
            break;
        }
        created++;
    }
    std::printf("kind=%s limit=%llu created=%llu errno=%d (%s)\n", o.kind.c_str(),
                static_cast<unsigned long long>(objs.limit()),
                static_cast<unsigned long long>(created), err, err ? std::strerror(err) : "-");
    std::fflush(stdout);

    if (o.hold) {
        std::printf("holding\n");
        std::fflush(stdout);
        char c;
        while (read(0, &c, 1) > 0) {
        }
    }
    if (o.leave) return 0;
    objs.destroy_all();
    ibv_close_device(ctx);
    return 0;
}
