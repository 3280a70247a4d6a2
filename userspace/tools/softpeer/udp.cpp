#include "udp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace metaroce::tools {
namespace {

std::runtime_error sys_error(const std::string& what) {
    return std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

NetnsScope::NetnsScope(const std::string& name) {
    if (name.empty()) return;
    const std::string path = name.find('/') == std::string::npos ? "/var/run/netns/" + name : name;
    home_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home_ < 0) throw sys_error("open /proc/self/ns/net");
    const int target = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (target < 0) {
        const auto err = sys_error("open " + path);
        close(home_);
        throw err;
    }
    const int rc = setns(target, CLONE_NEWNET);
    const int saved = errno;
    close(target);
    if (rc != 0) {
        close(home_);
        errno = saved;
        throw sys_error("setns " + path);
    }
}

NetnsScope::~NetnsScope() {
    if (home_ < 0) return;
    if (setns(home_, CLONE_NEWNET) != 0) std::perror("setns back to the original namespace");
    close(home_);
}

std::optional<IpAddress> IpAddress::parse(const std::string& text) {
    IpAddress a;
    if (inet_pton(AF_INET, text.c_str(), &a.v4) == 1) {
        a.family = AF_INET;
        return a;
    }
    if (inet_pton(AF_INET6, text.c_str(), &a.v6) == 1) {
        a.family = AF_INET6;
        // An IPv4-mapped IPv6 address is the IPv4 address.
        if (IN6_IS_ADDR_V4MAPPED(&a.v6)) {
            a.family = AF_INET;
            std::memcpy(&a.v4, &a.v6.s6_addr[12], 4);
        }
        return a;
    }
    return std::nullopt;
}

std::string IpAddress::str() const {
    char buf[INET6_ADDRSTRLEN] = {};
    if (family == AF_INET) {
        inet_ntop(AF_INET, &v4, buf, sizeof buf);
    } else {
        inet_ntop(AF_INET6, &v6, buf, sizeof buf);
    }
    return buf;
}

sockaddr_storage IpAddress::with_port(std::uint16_t port, socklen_t& len) const {
    sockaddr_storage ss{};
    if (family == AF_INET) {
        auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port);
        sin->sin_addr = v4;
        len = sizeof(sockaddr_in);
    } else {
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(port);
        sin6->sin6_addr = v6;
        len = sizeof(sockaddr_in6);
    }
    return ss;
}

bool operator==(const IpAddress& a, const IpAddress& b) {
    if (a.family != b.family) return false;
    if (a.family == AF_INET) return a.v4.s_addr == b.v4.s_addr;
    return std::memcmp(&a.v6, &b.v6, sizeof a.v6) == 0;
}

UdpTransport::UdpTransport(const IpAddress& local, std::uint16_t port, const std::string& netns)
    : local_(local), port_(port), netns_(netns) {
    const NetnsScope in_netns(netns_);
    fd_ = socket(local.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw sys_error("socket");
    const int one = 1;
    if (local.family == AF_INET) {
        setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    } else {
        setsockopt(fd_, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
        setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    }
    // Deep buffers: a peer may send a whole window (256 packets) at once.
    const int bufsize = 8 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof bufsize);
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof bufsize);
    socklen_t len = 0;
    const sockaddr_storage ss = local.with_port(port, len);
    if (bind(fd_, reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
        const auto err = sys_error("bind " + local.str() + ":" + std::to_string(port));
        close(fd_);
        throw err;
    }
}

UdpTransport::~UdpTransport() {
    for (const auto& [port, fd] : send_fds_) close(fd);
    if (raw_fd_ >= 0) close(raw_fd_);
    if (fd_ >= 0) close(fd_);
}

int UdpTransport::send_socket(std::uint16_t src_port) {
    if (src_port == 0 || src_port == port_) return fd_;
    const auto it = send_fds_.find(src_port);
    if (it != send_fds_.end()) return it->second;
    const NetnsScope in_netns(netns_);
    const int fd = socket(local_.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw sys_error("socket");
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (local_.family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    const int bufsize = 1 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof bufsize);
    // Nothing is expected on these sockets; keep their receive buffers small.
    const int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    socklen_t len = 0;
    const sockaddr_storage ss = local_.with_port(src_port, len);
    if (bind(fd, reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
        const auto err = sys_error("bind UDP source port " + std::to_string(src_port));
        close(fd);
        throw err;
    }
    send_fds_[src_port] = fd;
    return fd;
}

void UdpTransport::set_tos(int fd, std::uint8_t tos) {
    const auto it = tos_of_.find(fd);
    if (it != tos_of_.end() && it->second == tos) return;
    const int value = tos;
    if (local_.family == AF_INET) {
        setsockopt(fd, IPPROTO_IP, IP_TOS, &value, sizeof value);
    } else {
        setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &value, sizeof value);
    }
    tos_of_[fd] = tos;
}

void UdpTransport::send(const IpAddress& to, std::uint16_t to_port, std::uint16_t src_port,
                        std::span<const std::uint8_t> bytes, std::uint8_t tos) {
    const int fd = send_socket(src_port);
    set_tos(fd, tos);
    socklen_t len = 0;
    const sockaddr_storage ss = to.with_port(to_port, len);
    for (;;) {
        const ssize_t n =
            sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&ss), len);
        if (n >= 0) return;
        if (errno == EINTR) continue;
        // A full socket buffer is a drop on the wire: the protocol recovers.
        if (errno == EAGAIN || errno == ENOBUFS) return;
        throw sys_error("sendto " + to.str());
    }
}

std::uint16_t udp4_checksum(const in_addr& src, const in_addr& dst,
                            std::span<const std::uint8_t> udp) {
    std::uint32_t sum = 0;
    const auto add16 = [&sum](std::uint32_t v) { sum += v; };
    const auto* s = reinterpret_cast<const std::uint8_t*>(&src.s_addr);
    const auto* d = reinterpret_cast<const std::uint8_t*>(&dst.s_addr);
    add16((s[0] << 8) | s[1]);
    add16((s[2] << 8) | s[3]);
    add16((d[0] << 8) | d[1]);
    add16((d[2] << 8) | d[3]);
    add16(IPPROTO_UDP);
    add16(static_cast<std::uint32_t>(udp.size()));
    for (std::size_t i = 0; i < udp.size(); i += 2) {
        const std::uint32_t hi = udp[i];
        const std::uint32_t lo = i + 1 < udp.size() ? udp[i + 1] : 0;
        add16((hi << 8) | lo);
    }
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    const auto csum = static_cast<std::uint16_t>(~sum & 0xffff);
    return csum == 0 ? 0xffff : csum;
}

bool UdpTransport::open_raw() {
    if (raw_fd_ >= 0) return true;
    if (local_.family != AF_INET) return false;
    const NetnsScope in_netns(netns_);
    const int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_UDP);
    if (fd < 0) return false;
    const int small = 4096;  // it sees a copy of every UDP datagram: keep none
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    socklen_t len = 0;
    const sockaddr_storage ss = local_.with_port(0, len);
    if (bind(fd, reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
        close(fd);
        return false;
    }
    raw_fd_ = fd;
    return true;
}

void UdpTransport::send_raw(const IpAddress& to, std::uint16_t to_port, std::uint16_t src_port,
                            std::span<const std::uint8_t> bytes,
                            std::optional<std::uint16_t> checksum) {
    if (local_.family != AF_INET || to.family != AF_INET) {
        throw std::runtime_error("raw UDP sends are IPv4 only");
    }
    if (raw_fd_ < 0 && !open_raw()) throw sys_error("raw socket (needs CAP_NET_RAW)");
    std::vector<std::uint8_t> udp(8 + bytes.size());
    const auto put16 = [&udp](std::size_t at, std::uint16_t v) {
        udp[at] = static_cast<std::uint8_t>(v >> 8);
        udp[at + 1] = static_cast<std::uint8_t>(v);
    };
    put16(0, src_port);
    put16(2, to_port);
    put16(4, static_cast<std::uint16_t>(udp.size()));
    std::copy(bytes.begin(), bytes.end(), udp.begin() + 8);
    put16(6, checksum ? *checksum : udp4_checksum(local_.v4, to.v4, udp));
    socklen_t len = 0;
    const sockaddr_storage ss = to.with_port(0, len);
    if (sendto(raw_fd_, udp.data(), udp.size(), 0, reinterpret_cast<const sockaddr*>(&ss), len) <
        0) {
        throw sys_error("raw sendto");
    }
}

std::optional<Received> UdpTransport::recv(int timeout_ms) {
    pollfd pfd{fd_, POLLIN, 0};
    for (;;) {
        const int rc = poll(&pfd, 1, timeout_ms);
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0) throw sys_error("poll");
        if (rc == 0) return std::nullopt;
        break;
    }
    Received r;
    r.bytes.resize(65536);
    sockaddr_storage from{};
    iovec iov{r.bytes.data(), r.bytes.size()};
    alignas(cmsghdr) char control[128];
    msghdr msg{};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof from;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(fd_, &msg, MSG_DONTWAIT);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return std::nullopt;
        throw sys_error("recvmsg");
    }
    r.bytes.resize(static_cast<std::size_t>(n));
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) ||
            (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)) {
            if (c->cmsg_type == IP_TOS && c->cmsg_level == IPPROTO_IP) {
                r.tos = *reinterpret_cast<const std::uint8_t*>(CMSG_DATA(c));
            } else {
                int tclass = 0;
                std::memcpy(&tclass, CMSG_DATA(c), sizeof tclass);
                r.tos = static_cast<std::uint8_t>(tclass);
            }
        }
    }
    if (from.ss_family == AF_INET) {
        const auto* sin = reinterpret_cast<const sockaddr_in*>(&from);
        r.from.family = AF_INET;
        r.from.v4 = sin->sin_addr;
        r.from_port = ntohs(sin->sin_port);
    } else {
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&from);
        r.from.family = AF_INET6;
        r.from.v6 = sin6->sin6_addr;
        r.from_port = ntohs(sin6->sin6_port);
    }
    return r;
}

}  // namespace metaroce::tools
