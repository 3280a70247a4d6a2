// QPs of other processes, learned from the RDMA netlink through the rdma tool: their QPNs,
// their peers' QPNs and their first PSNs (what a peer on the path could know).
#include <cstdio>
#include <regex>

#include "fuzz.h"

namespace metaroce::fuzz {
namespace {

std::uint32_t number(const std::string& obj, const char* key) {
    const std::regex re(std::string("\"") + key + "\":([0-9]+)");
    std::smatch m;
    return std::regex_search(obj, m, re) ? static_cast<std::uint32_t>(std::stoul(m[1])) : 0;
}

std::string text(const std::string& obj, const char* key) {
    const std::regex re(std::string("\"") + key + "\":\"([^\"]*)\"");
    std::smatch m;
    return std::regex_search(obj, m, re) ? m[1].str() : std::string();
}

}  // namespace

std::vector<QpInfo> parse_qps(const std::string& json) {
    std::vector<QpInfo> out;
    std::size_t pos = 0;
    while ((pos = json.find('{', pos)) != std::string::npos) {
        const std::size_t end = json.find('}', pos);
        if (end == std::string::npos) break;
        const std::string obj = json.substr(pos, end - pos + 1);
        pos = end + 1;
        QpInfo q;
        q.dev = text(obj, "ifname");
        q.lqpn = number(obj, "lqpn");
        q.rqpn = number(obj, "rqpn");
        q.rq_psn = number(obj, "rq-psn");
        q.sq_psn = number(obj, "sq-psn");
        q.pid = static_cast<int>(number(obj, "pid"));
        q.type = text(obj, "type");
        q.state = text(obj, "state");
        if (q.lqpn != 0 || !q.type.empty()) out.push_back(q);
    }
    return out;
}

std::vector<QpInfo> list_qps() {
    std::FILE* f = popen("rdma -j -d res show qp 2>/dev/null", "r");
    if (f == nullptr) return {};
    std::string json;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) json.append(buf, n);
    pclose(f);
    return parse_qps(json);
}

}  // namespace metaroce::fuzz
