// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// metaroce-xfer: moves data over an RC QP with every byte checked, for
// tests that must prove a transfer intact (loss, reordering, corruption).
//
//   server:  metaroce-xfer -d mr0 [-o write|read|send] [-s SIZE] [-n ITERS]
//   client:  metaroce-xfer -d mr0 [same options] SERVER_ADDRESS
//
// WRITE: the client writes pattern(i) into slot i % depth of the server
// with immediate i; the server checks the slot and returns a credit.
// SEND: the same with SENDs into posted receives. READ: the client reads
// the server's slots (each holding pattern(slot)) into poisoned buffers and
// checks them. Either way the sending side checks afterwards that its
// source buffers are unchanged (packets carry their pages, and nothing on
// the way may write to them). Exit status 0 only if every byte of every
// message matched and every work request completed successfully.
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::string device;
    std::string server;  // empty: be the server
    std::string op = "write";
    int gid_index = 1;
    int port = 19000;
    uint32_t size = 65536;
    uint32_t depth = 16;
    uint64_t iters = 1000;
    double seconds = 0;  // non-zero: run for this long instead of iters
    int timeout_s = 120;
};

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "metaroce-xfer: %s\n", what.c_str());
    std::exit(2);
}

void usage() {
    std::fprintf(stderr,
                 "usage: metaroce-xfer -d DEV [-x GID_INDEX] [-p PORT] [-o write|read|send]\n"
                 "                     [-s SIZE] [-t DEPTH] [-n ITERS | -D SECONDS] [-T TIMEOUT]\n"
                 "                     [SERVER]\n");
    std::exit(2);
}

Options parse(int argc, char** argv) {
    Options o;
    int c;
    while ((c = getopt(argc, argv, "d:x:p:o:s:t:n:D:T:h")) != -1) {
        switch (c) {
            case 'd': o.device = optarg; break;
            case 'x': o.gid_index = std::atoi(optarg); break;
            case 'p': o.port = std::atoi(optarg); break;
            case 'o': o.op = optarg; break;
            case 's': o.size = std::strtoul(optarg, nullptr, 0); break;
            case 't': o.depth = std::strtoul(optarg, nullptr, 0); break;
            case 'n': o.iters = std::strtoull(optarg, nullptr, 0); break;
            case 'D': o.seconds = std::atof(optarg); break;
            case 'T': o.timeout_s = std::atoi(optarg); break;
            default: usage();
        }
    }
    if (optind < argc) o.server = argv[optind];
    if (o.device.empty() || o.depth == 0 || o.size == 0 ||
        (o.op != "write" && o.op != "read" && o.op != "send"))
        usage();
    return o;
}

// The bytes message i (or slot i, for READ) must hold.
void fill_pattern(uint8_t* buf, uint32_t len, uint64_t i) {
    uint64_t x = i * 0x9e3779b97f4a7c15ULL + 1;
    for (uint32_t off = 0; off < len; off += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::memcpy(buf + off, &x, std::min<uint32_t>(8, len - off));
    }
}

// Index of the first wrong byte, or -1.
long long check_pattern(const uint8_t* buf, uint32_t len, uint64_t i,
                        std::vector<uint8_t>& scratch) {
    scratch.resize(len);
    fill_pattern(scratch.data(), len, i);
    if (std::memcmp(buf, scratch.data(), len) == 0) return -1;
    for (uint32_t k = 0; k < len; k++)
        if (buf[k] != scratch[k]) return k;
    return -1;
}

// What the two sides tell each other over TCP.
struct Endpoint {
    uint32_t qpn, psn, rkey, size, depth;
    uint64_t addr;
    uint8_t gid[16];
};

class Socket {
   public:
    explicit Socket(const Options& o) {
        addrinfo hints{}, *res = nullptr;
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = o.server.empty() ? AI_PASSIVE : 0;
        std::string port = std::to_string(o.port);
        if (getaddrinfo(o.server.empty() ? nullptr : o.server.c_str(), port.c_str(), &hints, &res))
            die("cannot resolve " + o.server);
        int s = socket(res->ai_family, res->ai_socktype, 0);
        if (s < 0) die("socket");
        if (o.server.empty()) {
            int one = 1;
            setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
            if (bind(s, res->ai_addr, res->ai_addrlen) || listen(s, 1)) die("bind/listen");
            fd_ = accept(s, nullptr, nullptr);
            close(s);
        } else {
            auto deadline = Clock::now() + std::chrono::seconds(o.timeout_s);
            while (connect(s, res->ai_addr, res->ai_addrlen)) {
                if (Clock::now() > deadline) die("cannot connect to " + o.server);
                close(s);
                usleep(100000);
                s = socket(res->ai_family, res->ai_socktype, 0);
            }
            fd_ = s;
        }
        freeaddrinfo(res);
        if (fd_ < 0) die("accept");
    }
    ~Socket() { close(fd_); }
    void send_all(const void* p, size_t n) {
        if (write(fd_, p, n) != static_cast<ssize_t>(n)) die("socket write");
    }
    // Returns when the peer sends a byte or closes the connection.
    void wait_closed_or_byte() {
        char c;
        while (read(fd_, &c, 1) < 0 && errno == EINTR) {
        }
    }
    void recv_all(void* p, size_t n) {
        auto* c = static_cast<char*>(p);
        while (n) {
            ssize_t r = read(fd_, c, n);
            if (r <= 0) die("socket read");
            c += r;
            n -= r;
        }
    }

   private:
    int fd_ = -1;
};

class Xfer {
   public:
    explicit Xfer(const Options& o) : o_(o) {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        for (int i = 0; i < n && !ctx_; i++)
            if (o.device == ibv_get_device_name(list[i])) ctx_ = ibv_open_device(list[i]);
        ibv_free_device_list(list);
        if (!ctx_) die("no device " + o.device);
        ibv_port_attr port{};
        if (ibv_query_port(ctx_, 1, &port)) die("query_port");
        mtu_ = port.active_mtu;
        if (ibv_query_gid(ctx_, 1, o.gid_index, &gid_)) die("query_gid");
        pd_ = ibv_alloc_pd(ctx_);
        cq_ = ibv_create_cq(ctx_, 4 * o.depth + 16, nullptr, nullptr, 0);
        buf_.resize(static_cast<size_t>(o.size) * o.depth);
        credit_buf_.resize(64);
        mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(),
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
        // (an int: the ibv_reg_mr macro mixes enums, which C++20 frowns upon)
        const int local_write = IBV_ACCESS_LOCAL_WRITE;
        credit_mr_ = ibv_reg_mr(pd_, credit_buf_.data(), credit_buf_.size(), local_write);
        if (!pd_ || !cq_ || !mr_ || !credit_mr_) die("resources");
        ibv_qp_init_attr init{};
        init.send_cq = cq_;
        init.recv_cq = cq_;
        init.qp_type = IBV_QPT_RC;
        init.cap.max_send_wr = 2 * o.depth + 4;
        init.cap.max_recv_wr = 2 * o.depth + 4;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        qp_ = ibv_create_qp(pd_, &init);
        if (!qp_) die("create_qp");
    }

    void connect(Socket& sock) {
        // Buffers and receives are ready before the other side may use them.
        if (o_.server.empty() && o_.op == "read")
            for (uint32_t s = 0; s < o_.depth; s++) fill_pattern(slot(s), o_.size, s);
        std::mt19937 rng(std::random_device{}());
        Endpoint me{qp_->qp_num, static_cast<uint32_t>(rng() & 0xffffff), mr_->rkey, o_.size,
                    o_.depth, reinterpret_cast<uintptr_t>(buf_.data()), {}};
        std::memcpy(me.gid, gid_.raw, 16);
        sock.send_all(&me, sizeof(me));
        sock.recv_all(&peer_, sizeof(peer_));
        if (peer_.size != o_.size || peer_.depth != o_.depth) die("the two sides disagree on -s/-t");

        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        check(ibv_modify_qp(qp_, &a,
                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
              "modify INIT");
        a = {};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = mtu_;
        a.dest_qp_num = peer_.qpn;
        a.rq_psn = peer_.psn;
        a.max_dest_rd_atomic = 16;
        a.min_rnr_timer = 1;
        a.ah_attr.is_global = 1;
        std::memcpy(a.ah_attr.grh.dgid.raw, peer_.gid, 16);
        a.ah_attr.grh.sgid_index = o_.gid_index;
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.port_num = 1;
        check(ibv_modify_qp(qp_, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              "modify RTR");
        a = {};
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = me.psn;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 16;
        check(ibv_modify_qp(qp_, &a,
                            IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
              "modify RTS");
        if (o_.server.empty() && o_.op != "read")
            for (uint32_t s = 0; s < o_.depth; s++) post_recv(s);
        if (!o_.server.empty())
            for (uint32_t k = 0; k < o_.depth + 2; k++) post_credit_recv(k);
        // Both sides are ready before the first packet.
        char c = 0;
        sock.send_all(&c, 1);
        sock.recv_all(&c, 1);
    }

    int run_server(Socket& sock) {
        if (o_.op == "read") {
            // Passive: wait until the client says it is done. The READ
            // responses carried our slots' pages: they must be as they were.
            char c;
            sock.recv_all(&c, 1);
            for (uint32_t s = 0; s < o_.depth; s++) {
                long long bad = check_pattern(slot(s), o_.size, s, scratch_);
                if (bad >= 0)
                    return fail("read source " + std::to_string(s) + " changed at byte " +
                                std::to_string(bad));
            }
            return 0;
        }
        uint64_t received = 0;
        bool done = false;
        while (!done) {
            ibv_wc wc{};
            if (!poll_one(wc)) return fail("timed out waiting for data");
            if (wc.status != IBV_WC_SUCCESS) return fail_wc(wc);
            if (wc.opcode == IBV_WC_SEND) continue;  // a credit went out
            uint32_t s = static_cast<uint32_t>(wc.wr_id);
            uint64_t i = ntohl(wc.imm_data);
            if (i == 0xffffffffu) break;  // the client's end marker
            uint32_t len = o_.op == "send" ? wc.byte_len : o_.size;
            if (len != o_.size) return fail("message of " + std::to_string(len) + " bytes");
            long long bad = check_pattern(slot(s), o_.size, i, scratch_);
            if (bad >= 0) return fail("message " + std::to_string(i) + " wrong at byte " + std::to_string(bad));
            received++;
            post_recv(s);
            post_credit(static_cast<uint32_t>(i));
            (void)done;
        }
        std::printf("server: %llu messages of %u bytes verified\n",
                    static_cast<unsigned long long>(received), o_.size);
        std::fflush(stdout);
        // Our ACK of the end marker may be lost: keep the QP until the client
        // has its completion (or has gone), or its retries would find no QP.
        sock.wait_closed_or_byte();
        return 0;
    }

    int run_client(Socket& sock) {
        auto start = Clock::now();
        uint64_t posted = 0, completed = 0, credits = o_.depth;
        bool reading = o_.op == "read";
        auto more = [&] {
            if (o_.seconds > 0)
                return std::chrono::duration<double>(Clock::now() - start).count() < o_.seconds;
            return posted < o_.iters;
        };
        while (more() || completed < posted) {
            while (more() && credits > 0 && posted - completed < o_.depth) {
                post_op(posted);
                posted++;
                credits--;
            }
            ibv_wc wc{};
            if (!poll_one(wc)) return fail("timed out waiting for completions");
            if (wc.status != IBV_WC_SUCCESS) return fail_wc(wc);
            if (wc.opcode == IBV_WC_RECV) {  // a credit from the server
                credits++;
                post_credit_recv(static_cast<uint32_t>(wc.wr_id));
                continue;
            }
            completed++;
            if (reading) {
                uint64_t i = wc.wr_id;
                long long bad = check_pattern(slot(i % o_.depth), o_.size, i % o_.depth, scratch_);
                if (bad >= 0)
                    return fail("read " + std::to_string(i) + " wrong at byte " + std::to_string(bad));
                credits++;
            } else {
                // The packets carried the slot's pages: sending must not change them.
                uint64_t i = wc.wr_id;
                long long bad = check_pattern(slot(i % o_.depth), o_.size, i, scratch_);
                if (bad >= 0)
                    return fail("source of " + std::to_string(i) + " changed at byte " +
                                std::to_string(bad));
            }
        }
        double secs = std::chrono::duration<double>(Clock::now() - start).count();
        if (reading) {
            char c = 0;
            sock.send_all(&c, 1);
        } else {
            // Tell the server we are done: a zero-length WRITE with the end marker.
            post_end();
            ibv_wc wc{};
            do {
                if (!poll_one(wc)) return fail("timed out on the end marker");
                if (wc.status != IBV_WC_SUCCESS) return fail_wc(wc);
            } while (wc.wr_id != kEndId);
            char c = 0;
            sock.send_all(&c, 1);  // the server may now tear down its QP
        }
        double mb = static_cast<double>(completed) * o_.size / 1e6;
        std::printf("op=%s size=%u messages=%llu bytes=%.0f seconds=%.3f MB/s=%.2f errors=0\n",
                    o_.op.c_str(), o_.size, static_cast<unsigned long long>(completed), mb * 1e6,
                    secs, mb / secs);
        return 0;
    }

   private:
    static constexpr uint64_t kEndId = ~0ULL;

    uint8_t* slot(uint64_t s) { return buf_.data() + s * o_.size; }

    static void check(int err, const char* what) {
        if (err) die(std::string(what) + ": " + std::strerror(err));
    }

    bool poll_one(ibv_wc& wc) {
        auto deadline = Clock::now() + std::chrono::seconds(o_.timeout_s);
        for (;;) {
            int n = ibv_poll_cq(cq_, 1, &wc);
            if (n < 0) die("poll_cq");
            if (n == 1) return true;
            if (Clock::now() > deadline) return false;
        }
    }

    int fail(const std::string& why) {
        std::fprintf(stderr, "metaroce-xfer: FAILED: %s\n", why.c_str());
        return 1;
    }

    int fail_wc(const ibv_wc& wc) {
        return fail(std::string("completion error: ") + ibv_wc_status_str(wc.status) +
                    " (wr_id " + std::to_string(wc.wr_id) + ")");
    }

    void post_one_recv(uint64_t wr_id, ibv_sge sge, const char* what) {
        ibv_recv_wr wr{}, *bad;
        wr.wr_id = wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        check(ibv_post_recv(qp_, &wr, &bad), what);
    }

    void post_recv(uint32_t s) {
        post_one_recv(s, {reinterpret_cast<uintptr_t>(slot(s)), o_.size, mr_->lkey}, "post_recv");
    }

    void post_credit_recv(uint32_t k) {
        post_one_recv(k, {reinterpret_cast<uintptr_t>(credit_buf_.data()), 0, credit_mr_->lkey},
                      "post_recv (credit)");
    }

    void post_credit(uint32_t i) {
        ibv_send_wr wr{}, *bad;
        wr.wr_id = i;
        wr.opcode = IBV_WR_SEND_WITH_IMM;
        wr.imm_data = htonl(i);
        wr.send_flags = IBV_SEND_SIGNALED;
        check(ibv_post_send(qp_, &wr, &bad), "post_send (credit)");
    }

    void post_op(uint64_t i) {
        uint32_t s = i % o_.depth;
        ibv_sge sge{reinterpret_cast<uintptr_t>(slot(s)), o_.size, mr_->lkey};
        ibv_send_wr wr{}, *bad;
        wr.wr_id = i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED;
        if (o_.op == "read") {
            std::memset(slot(s), 0xa5, o_.size);  // unplaced bytes show
            wr.opcode = IBV_WR_RDMA_READ;
            wr.wr.rdma.remote_addr = peer_.addr + static_cast<uint64_t>(s) * o_.size;
            wr.wr.rdma.rkey = peer_.rkey;
        } else {
            fill_pattern(slot(s), o_.size, i);
            wr.imm_data = htonl(static_cast<uint32_t>(i));
            if (o_.op == "send") {
                wr.opcode = IBV_WR_SEND_WITH_IMM;
            } else {
                wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
                wr.wr.rdma.remote_addr = peer_.addr + static_cast<uint64_t>(s) * o_.size;
                wr.wr.rdma.rkey = peer_.rkey;
            }
        }
        check(ibv_post_send(qp_, &wr, &bad), "post_send");
    }

    void post_end() {
        ibv_send_wr wr{}, *bad;
        wr.wr_id = kEndId;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.imm_data = htonl(0xffffffffu);
        if (o_.op == "send") {
            wr.opcode = IBV_WR_SEND_WITH_IMM;
        } else {
            wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            wr.wr.rdma.remote_addr = peer_.addr;
            wr.wr.rdma.rkey = peer_.rkey;
        }
        check(ibv_post_send(qp_, &wr, &bad), "post_send (end)");
    }

    const Options& o_;
    ibv_context* ctx_ = nullptr;
    ibv_pd* pd_ = nullptr;
    ibv_cq* cq_ = nullptr;
    ibv_mr* mr_ = nullptr;
    ibv_mr* credit_mr_ = nullptr;
    ibv_qp* qp_ = nullptr;
    ibv_mtu mtu_ = IBV_MTU_1024;
    ibv_gid gid_{};
    Endpoint peer_{};
    std::vector<uint8_t> buf_, credit_buf_, scratch_;
};

}  // namespace

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    Xfer x(o);
    Socket sock(o);
    x.connect(sock);
    return o.server.empty() ? x.run_server(sock) : x.run_client(sock);
}
