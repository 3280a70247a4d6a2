// The out-of-band exchange of metaroce-peer and metaroce-interop: one TCP connection, one line
// of text each way per step (like perftest's exchange of QPN, PSN and GID):
//
//   1. HELLO: each side sends `metaroce-exchange 1 key=value...` (EndpointInfo) describing
//      its QP (QPN, first PSN, IP address, path MTU), its role, the buffer it exposes (target)
//      and the workload; both check that the roles are complementary and the workloads equal.
//   2. Each side connects its QP, the target posts its receives, then sends `READY`; each
//      waits for the other's READY before any packet is sent.
//   3. The initiator runs the workload and sends `DONE ok` (or `DONE fail <why>`); the target
//      then checks what landed in its memory and receive queue and answers `RESULT ok` or
//      `RESULT fail <why>`. Both exit 0 only on `ok` from both.
//
// The server side listens (--listen [ADDR:]PORT), the client connects (--connect HOST:PORT);
// either side may be the target.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace metaroce::tools {

struct EndpointInfo {
    std::string role;          // "target" or "initiator"
    std::uint32_t qpn = 0;     // the QP to send to
    std::uint32_t psn = 0;     // its sq_psn: the other side's rq_psn
    std::string ip;            // address of its GID (IPv4 dotted quad or IPv6)
    std::uint32_t mtu = 1024;  // path MTU in bytes; both sides must use the same
    std::uint64_t addr = 0;    // target: virtual address of the exposed buffer
    std::uint32_t rkey = 0;    // target: its rkey
    std::uint64_t len = 0;     // target: its length
    std::uint32_t size = 0;    // workload: message size
    std::uint32_t count = 0;   // workload: messages per operation
    std::string ops;           // workload: comma-separated write,read,send

    friend bool operator==(const EndpointInfo&, const EndpointInfo&) = default;
};

std::string format_info(const EndpointInfo& info);
std::optional<EndpointInfo> parse_info(const std::string& line);

class LineChannel;

// Opens the exchange: listens if `listen` is set, else connects to `connect`.
LineChannel open_channel(const std::string& listen, const std::string& connect, int timeout_ms);
// Step 1: sends ours, returns theirs; throws unless the roles are complementary and the
// workloads and path MTUs equal.
EndpointInfo exchange_hello(LineChannel& channel, const EndpointInfo& mine, int timeout_ms);

// A TCP connection carrying lines. Throws std::runtime_error on failure and timeouts.
class LineChannel {
  public:
    // Listens on `bind` ("PORT" or "ADDR:PORT") and accepts one connection.
    static LineChannel accept_one(const std::string& bind, int timeout_ms);
    // Connects to "HOST:PORT" ([v6]:PORT for IPv6), retrying until the timeout.
    static LineChannel connect_to(const std::string& where, int timeout_ms);

    LineChannel(LineChannel&& other) noexcept;
    LineChannel& operator=(LineChannel&&) = delete;
    ~LineChannel();

    void send_line(const std::string& line);
    std::string recv_line(int timeout_ms);
    // A line if one arrives within timeout_ms (0: only if one is already there).
    std::optional<std::string> try_recv_line(int timeout_ms);

  private:
    explicit LineChannel(int fd) : fd_(fd) {}
    int fd_ = -1;
    std::string buffer_;
};

}  // namespace metaroce::tools
