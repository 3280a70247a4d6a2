// MetaRoCE over real UDP sockets: a receive socket bound to the local address and UDP port
// 4793 (or another), one send socket per UDP source port (a path's 0xC000 | entropy), the
// IP TOS byte (ECN) on sends and receives, and, for conformance tests, raw IPv4 UDP sends with
// a chosen UDP checksum.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace metaroce::tools {

// While it lives, the calling thread is in network namespace `name` (a name under
// /var/run/netns, or a path such as /proc/PID/ns/net; empty: stay where it is), so that
// sockets made meanwhile belong there. Needs CAP_SYS_ADMIN. Throws std::runtime_error.
class NetnsScope {
  public:
    explicit NetnsScope(const std::string& name);
    ~NetnsScope();
    NetnsScope(const NetnsScope&) = delete;
    NetnsScope& operator=(const NetnsScope&) = delete;

  private:
    int home_ = -1;
};

// An IP address (no port).
struct IpAddress {
    int family = AF_INET;
    in_addr v4{};
    in6_addr v6{};

    static std::optional<IpAddress> parse(const std::string& text);
    std::string str() const;
    sockaddr_storage with_port(std::uint16_t port, socklen_t& len) const;
    friend bool operator==(const IpAddress& a, const IpAddress& b);
};

struct Received {
    std::vector<std::uint8_t> bytes;
    IpAddress from;
    std::uint16_t from_port = 0;
    std::uint8_t tos = 0;  // IP TOS / traffic class: the ECN bits are tos & 3
    bool ce() const { return (tos & 3) == 3; }
};

class UdpTransport {
  public:
    // Binds the receive socket to local:port. Every socket it makes belongs to network
    // namespace `netns` (see NetnsScope; empty: the caller's). Throws std::runtime_error.
    UdpTransport(const IpAddress& local, std::uint16_t port, const std::string& netns = "");
    ~UdpTransport();
    UdpTransport(const UdpTransport&) = delete;
    UdpTransport& operator=(const UdpTransport&) = delete;

    int fd() const { return fd_; }
    const IpAddress& local() const { return local_; }
    std::uint16_t port() const { return port_; }

    // Sends from UDP source port `src_port` (0: the receive socket's port) with the IP TOS
    // byte `tos` (ECN: 0 Not-ECT, 2 ECT(0), 3 CE).
    void send(const IpAddress& to, std::uint16_t to_port, std::uint16_t src_port,
              std::span<const std::uint8_t> bytes, std::uint8_t tos = 0);
    // Opens the raw socket of send_raw() now (in the current network namespace); false if
    // that is not allowed.
    bool open_raw();
    // IPv4 only: builds the UDP header itself (raw socket) so that the checksum can be wrong
    // (`checksum` given) or absent (0). Needs CAP_NET_RAW.
    void send_raw(const IpAddress& to, std::uint16_t to_port, std::uint16_t src_port,
                  std::span<const std::uint8_t> bytes, std::optional<std::uint16_t> checksum);
    // Waits up to timeout_ms (0: do not wait) for a datagram.
    std::optional<Received> recv(int timeout_ms);

  private:
    int send_socket(std::uint16_t src_port);
    void set_tos(int fd, std::uint8_t tos);

    IpAddress local_;
    std::uint16_t port_;
    std::string netns_;
    int fd_ = -1;
    int raw_fd_ = -1;
    std::map<std::uint16_t, int> send_fds_;
    std::map<int, int> tos_of_;  // fd -> TOS last set
};

// The Internet checksum of a UDP datagram over IPv4 (pseudo-header included); never 0.
std::uint16_t udp4_checksum(const in_addr& src, const in_addr& dst,
                            std::span<const std::uint8_t> udp_datagram);

}  // namespace metaroce::tools
