#include "exchange.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "cli.h"

namespace metaroce::tools {
namespace {

constexpr const char* kMagic = "metaroce-exchange";
constexpr int kVersion = 1;

using Clock = std::chrono::steady_clock;

std::runtime_error sys_error(const std::string& what) {
    return std::runtime_error(what + ": " + std::strerror(errno));
}

// "HOST:PORT", "[V6]:PORT" or "PORT" -> host (may be empty) and port.
void split_host_port(const std::string& s, std::string& host, std::string& port) {
    if (!s.empty() && s[0] == '[') {
        const auto close = s.find(']');
        if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') {
            throw std::runtime_error("bad address " + s);
        }
        host = s.substr(1, close - 1);
        port = s.substr(close + 2);
        return;
    }
    const auto colon = s.rfind(':');
    if (colon == std::string::npos) {
        host.clear();
        port = s;
    } else {
        host = s.substr(0, colon);
        port = s.substr(colon + 1);
    }
}

struct AddrInfo {
    addrinfo* list = nullptr;
    ~AddrInfo() {
        if (list != nullptr) freeaddrinfo(list);
    }
};

void resolve(const std::string& host, const std::string& port, bool passive, AddrInfo& out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (passive) hints.ai_flags = AI_PASSIVE;
    const int rc =
        getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &out.list);
    if (rc != 0) throw std::runtime_error("cannot resolve " + host + ":" + port);
}

}  // namespace

std::string format_info(const EndpointInfo& i) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s %d role=%s qpn=0x%06x psn=0x%06x ip=%s mtu=%u addr=0x%llx rkey=0x%x "
                  "len=%llu size=%u count=%u ops=%s",
                  kMagic, kVersion, i.role.c_str(), i.qpn, i.psn, i.ip.c_str(), i.mtu,
                  static_cast<unsigned long long>(i.addr), i.rkey,
                  static_cast<unsigned long long>(i.len), i.size, i.count,
                  i.ops.empty() ? "-" : i.ops.c_str());
    return buf;
}

std::optional<EndpointInfo> parse_info(const std::string& line) {
    std::istringstream in(line);
    std::string magic;
    int version = 0;
    if (!(in >> magic >> version) || magic != kMagic || version != kVersion) return std::nullopt;
    EndpointInfo info;
    std::string field;
    unsigned seen = 0;
    try {
        while (in >> field) {
            const auto eq = field.find('=');
            if (eq == std::string::npos) return std::nullopt;
            const std::string key = field.substr(0, eq);
            const std::string value = field.substr(eq + 1);
            const auto number = [&value] { return std::stoull(value, nullptr, 0); };
            if (key == "role") {
                info.role = value;
            } else if (key == "qpn") {
                info.qpn = static_cast<std::uint32_t>(number());
            } else if (key == "psn") {
                info.psn = static_cast<std::uint32_t>(number());
            } else if (key == "ip") {
                info.ip = value;
            } else if (key == "mtu") {
                info.mtu = static_cast<std::uint32_t>(number());
            } else if (key == "addr") {
                info.addr = number();
            } else if (key == "rkey") {
                info.rkey = static_cast<std::uint32_t>(number());
            } else if (key == "len") {
                info.len = number();
            } else if (key == "size") {
                info.size = static_cast<std::uint32_t>(number());
            } else if (key == "count") {
                info.count = static_cast<std::uint32_t>(number());
            } else if (key == "ops") {
                info.ops = value == "-" ? "" : value;
            } else {
                continue;  // unknown keys are ignored (forward compatible)
            }
            ++seen;
        }
    } catch (const std::exception&) {
        return std::nullopt;
    }
    if (seen < 11) return std::nullopt;
    return info;
}

LineChannel LineChannel::accept_one(const std::string& bind, int timeout_ms) {
    std::string host, port;
    split_host_port(bind, host, port);
    AddrInfo ai;
    resolve(host, port, true, ai);
    const addrinfo* a = ai.list;
    // Prefer IPv6 wildcard (it takes IPv4 too) when no address is given.
    for (const addrinfo* p = ai.list; p != nullptr; p = p->ai_next) {
        if (host.empty() && p->ai_family == AF_INET6) a = p;
    }
    const int lfd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (lfd < 0) throw sys_error("socket");
    const int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a->ai_family == AF_INET6) {
        const int zero = 0;
        setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    }
    if (::bind(lfd, a->ai_addr, a->ai_addrlen) != 0 || listen(lfd, 1) != 0) {
        const auto err = sys_error("listen on " + bind);
        close(lfd);
        throw err;
    }
    pollfd pfd{lfd, POLLIN, 0};
    const int rc = poll(&pfd, 1, timeout_ms);
    if (rc <= 0) {
        close(lfd);
        throw std::runtime_error("no connection on " + bind + " within the timeout");
    }
    const int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    close(lfd);
    if (fd < 0) throw sys_error("accept");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return LineChannel(fd);
}

LineChannel LineChannel::connect_to(const std::string& where, int timeout_ms) {
    std::string host, port;
    split_host_port(where, host, port);
    if (host.empty()) throw std::runtime_error("--connect needs HOST:PORT");
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        AddrInfo ai;
        resolve(host, port, false, ai);
        for (const addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
            const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) continue;
            if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                const int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                return LineChannel(fd);
            }
            close(fd);
        }
        if (Clock::now() >= deadline) {
            throw std::runtime_error("cannot connect to " + where + " within the timeout");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

LineChannel open_channel(const std::string& listen, const std::string& connect, int timeout_ms) {
    if (!listen.empty()) return LineChannel::accept_one(listen, timeout_ms);
    if (!connect.empty()) return LineChannel::connect_to(connect, timeout_ms);
    throw std::runtime_error("one of --listen and --connect is needed");
}

EndpointInfo exchange_hello(LineChannel& channel, const EndpointInfo& mine, int timeout_ms) {
    channel.send_line(format_info(mine));
    const std::string line = channel.recv_line(timeout_ms);
    const std::optional<EndpointInfo> theirs = parse_info(line);
    if (!theirs) throw std::runtime_error("exchange: bad HELLO line: " + line);
    const bool complementary = (mine.role == "target" && theirs->role == "initiator") ||
                               (mine.role == "initiator" && theirs->role == "target");
    if (!complementary) {
        throw std::runtime_error("exchange: roles " + mine.role + " and " + theirs->role +
                                 " do not make a pair");
    }
    if (mine.mtu != theirs->mtu) {
        throw std::runtime_error("exchange: path MTUs differ (" + std::to_string(mine.mtu) +
                                 " and " + std::to_string(theirs->mtu) + ")");
    }
    if (mine.size != theirs->size || mine.count != theirs->count || mine.ops != theirs->ops) {
        throw std::runtime_error("exchange: the two sides were given different workloads");
    }
    return *theirs;
}

LineChannel::LineChannel(LineChannel&& other) noexcept
    : fd_(other.fd_), buffer_(std::move(other.buffer_)) {
    other.fd_ = -1;
}

LineChannel::~LineChannel() {
    if (fd_ >= 0) close(fd_);
}

void LineChannel::send_line(const std::string& line) {
    const std::string data = line + "\n";
    std::size_t off = 0;
    while (off < data.size()) {
        const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw sys_error("exchange send");
        }
        off += static_cast<std::size_t>(n);
    }
}

std::optional<std::string> LineChannel::try_recv_line(int timeout_ms) {
    const auto nl = buffer_.find('\n');
    if (nl != std::string::npos) return recv_line(0);
    pollfd pfd{fd_, POLLIN, 0};
    const int rc = poll(&pfd, 1, timeout_ms);
    if (rc < 0 && errno != EINTR) throw sys_error("exchange poll");
    if (rc <= 0) return std::nullopt;
    char chunk[1024];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return std::nullopt;
    if (n < 0) throw sys_error("exchange recv");
    if (n == 0) throw std::runtime_error("exchange: the other side closed the connection");
    buffer_.append(chunk, static_cast<std::size_t>(n));
    if (buffer_.find('\n') == std::string::npos) return std::nullopt;
    return recv_line(0);
}

std::string LineChannel::recv_line(int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        const auto nl = buffer_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            return line;
        }
        pollfd pfd{fd_, POLLIN, 0};
        const int rc = poll(&pfd, 1, remaining_ms(deadline));
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0) throw sys_error("exchange poll");
        if (rc == 0) throw std::runtime_error("exchange: timed out waiting for the other side");
        char chunk[1024];
        const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw sys_error("exchange recv");
        if (n == 0) throw std::runtime_error("exchange: the other side closed the connection");
        buffer_.append(chunk, static_cast<std::size_t>(n));
    }
}

}  // namespace metaroce::tools
