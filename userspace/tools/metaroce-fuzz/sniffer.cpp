#include "sniffer.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "softmetaroce/codec.h"
#include "udp.h"

namespace metaroce::fuzz {

Sniffer::Sniffer(const std::string& netns, const std::string& dut_ip) {
    inet_pton(AF_INET, dut_ip.c_str(), &dut_addr_);
    try {
        const tools::NetnsScope in_netns(netns);
        fd_ = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_IP));
    } catch (const std::exception&) {
        fd_ = -1;
    }
    if (fd_ >= 0) {
        const int size = 4 << 20;
        setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    }
}

Sniffer::~Sniffer() {
    if (fd_ >= 0) close(fd_);
}

std::optional<Sighting> Sniffer::poll() {
    std::uint8_t buf[2048];
    for (;;) {
        sockaddr_ll from{};
        socklen_t len = sizeof from;
        const ssize_t n =
            recvfrom(fd_, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
        if (n <= 0) return std::nullopt;
        if (from.sll_pkttype == PACKET_OUTGOING) continue;
        if (static_cast<std::size_t>(n) < sizeof(iphdr)) continue;
        iphdr ip;
        std::memcpy(&ip, buf, sizeof ip);
        const std::size_t ihl = ip.ihl * 4u;
        if (ip.protocol != IPPROTO_UDP || ip.saddr != dut_addr_ ||
            static_cast<std::size_t>(n) < ihl + sizeof(udphdr) + METAROCE_BTH_LEN)
            continue;
        udphdr udp;
        std::memcpy(&udp, buf + ihl, sizeof udp);
        if (ntohs(udp.dest) != METAROCE_UDP_PORT) continue;
        const std::span<const std::uint8_t> payload(buf + ihl + sizeof udp,
                                                    static_cast<std::size_t>(n) - ihl - sizeof udp);
        const auto probe = probe_bth(payload);
        if (!probe) continue;
        Sighting s;
        s.dut_qpn = probe->sqpn;
        if (probe->opcode == METAROCE_OP_ACK) {
            const auto p = decode(payload);
            if (!p.ok() || p->ack().is_nak()) continue;
            s.ack = true;
            s.psn = p->ack().cum_psn;
        } else {
            s.psn = probe->psn;
        }
        return s;
    }
}

}  // namespace metaroce::fuzz
