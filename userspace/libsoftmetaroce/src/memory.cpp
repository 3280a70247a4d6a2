#include "softmetaroce/memory.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

namespace metaroce {

std::uint64_t ReceiveWqe::total_length() const {
    std::uint64_t total = 0;
    for (const Sge& sge : sges) total += sge.length;
    return total;
}

bool MemoryModel::register_region(std::uint32_t key, std::uint64_t addr, std::uint32_t length,
                                  std::uint32_t access_flags) {
    if (key_taken(key)) return false;
    if (addr > std::numeric_limits<std::uint64_t>::max() - length) return false;
    regions_[key] = Region{addr, access_flags, std::vector<std::uint8_t>(length, 0)};
    return true;
}

bool MemoryModel::deregister_region(std::uint32_t key) { return regions_.erase(key) != 0; }

bool MemoryModel::key_taken(std::uint32_t key) const {
    return regions_.count(key) != 0 || fast_reg_keys_.count(key) != 0;
}

const MemoryModel::Region* MemoryModel::find(std::uint32_t key) const {
    if (const auto it = regions_.find(key); it != regions_.end()) return &it->second;
    // A fast-registration region is found only under the key of the registration in force.
    if (const auto it = fast_reg_keys_.find(key); it != fast_reg_keys_.end()) {
        return &fast_regs_.at(it->second).region;
    }
    return nullptr;
}

MemoryModel::Region* MemoryModel::find(std::uint32_t key) {
    return const_cast<Region*>(std::as_const(*this).find(key));
}

MemoryModel::FastRegId MemoryModel::alloc_fast_reg_region(std::uint32_t max_length) {
    const FastRegId id = next_fast_reg_id_++;
    fast_regs_[id] = FastRegRegion{max_length, std::nullopt, Region{}};
    return id;
}

bool MemoryModel::free_fast_reg_region(FastRegId id) {
    const auto it = fast_regs_.find(id);
    if (it == fast_regs_.end()) return false;
    if (it->second.key) fast_reg_keys_.erase(*it->second.key);
    fast_regs_.erase(it);
    return true;
}

bool MemoryModel::fast_register(FastRegId id, std::uint32_t key, std::uint64_t addr,
                                std::uint32_t length, std::uint32_t access_flags) {
    const auto it = fast_regs_.find(id);
    if (it == fast_regs_.end()) return false;
    FastRegRegion& fr = it->second;
    if (fr.key || length > fr.max_length || key_taken(key)) return false;
    if (addr > std::numeric_limits<std::uint64_t>::max() - length) return false;
    fr.region = Region{addr, access_flags, std::vector<std::uint8_t>(length, 0)};
    fr.key = key;
    fast_reg_keys_[key] = id;
    return true;
}

bool MemoryModel::fast_reg_valid(std::uint32_t key) const { return fast_reg_keys_.count(key) != 0; }

bool MemoryModel::invalidate(std::uint32_t key) {
    const auto it = fast_reg_keys_.find(key);
    if (it == fast_reg_keys_.end()) return false;
    fast_regs_.at(it->second).key.reset();
    fast_reg_keys_.erase(it);
    return true;
}

std::optional<std::uint32_t> MemoryModel::fast_reg_key(FastRegId id) const {
    const auto it = fast_regs_.find(id);
    return it == fast_regs_.end() ? std::nullopt : it->second.key;
}

std::span<const std::uint8_t> MemoryModel::fast_reg_bytes(FastRegId id) const {
    const auto it = fast_regs_.find(id);
    if (it == fast_regs_.end()) return {};
    return it->second.region.bytes;
}

AccessResult MemoryModel::check(std::uint32_t key, std::uint64_t addr, std::uint64_t len,
                                std::uint32_t needed) const {
    const Region* region = find(key);
    if (region == nullptr) return AccessResult::BadKey;
    if ((region->access_flags & needed) != needed) return AccessResult::NoRights;
    // Overflow-free form of region->addr <= addr && addr + len <= region end.
    const std::uint64_t size = region->bytes.size();
    if (addr < region->addr || len > size || addr - region->addr > size - len) {
        return AccessResult::OutOfBounds;
    }
    return AccessResult::Ok;
}

AccessResult MemoryModel::write(std::uint32_t key, std::uint64_t addr,
                                std::span<const std::uint8_t> data, std::uint32_t needed) {
    const AccessResult result = check(key, addr, data.size(), needed);
    if (result != AccessResult::Ok) return result;
    Region& region = *find(key);
    std::copy(data.begin(), data.end(), region.bytes.begin() + (addr - region.addr));
    return AccessResult::Ok;
}

AccessResult MemoryModel::read(std::uint32_t key, std::uint64_t addr, std::uint32_t len,
                               std::uint32_t needed, std::vector<std::uint8_t>& out) const {
    const AccessResult result = check(key, addr, len, needed);
    if (result != AccessResult::Ok) return result;
    const Region& region = *find(key);
    const auto begin = region.bytes.begin() + (addr - region.addr);
    out.assign(begin, begin + len);
    return AccessResult::Ok;
}

AccessResult MemoryModel::atomic(std::uint32_t key, std::uint64_t addr, AtomicOp op,
                                 std::uint64_t swap_add, std::uint64_t compare,
                                 std::uint32_t needed, std::uint64_t& original) {
    const AccessResult result = check(key, addr, sizeof(std::uint64_t), needed);
    if (result != AccessResult::Ok) return result;
    if (addr % sizeof(std::uint64_t) != 0) return AccessResult::Misaligned;
    Region& region = *find(key);
    std::uint8_t* word = region.bytes.data() + (addr - region.addr);
    std::uint64_t value = 0;
    std::memcpy(&value, word, sizeof value);
    original = value;
    if (op == AtomicOp::FetchAdd) {
        value += swap_add;
    } else if (value == compare) {
        value = swap_add;
    }
    std::memcpy(word, &value, sizeof value);
    return AccessResult::Ok;
}

std::optional<std::uint64_t> MemoryModel::load_word(std::uint32_t key, std::uint64_t addr) const {
    if (check(key, addr, sizeof(std::uint64_t), 0) != AccessResult::Ok) return std::nullopt;
    const Region& region = *find(key);
    std::uint64_t value = 0;
    std::memcpy(&value, region.bytes.data() + (addr - region.addr), sizeof value);
    return value;
}

bool MemoryModel::store_word(std::uint32_t key, std::uint64_t addr, std::uint64_t value) {
    if (check(key, addr, sizeof(std::uint64_t), 0) != AccessResult::Ok) return false;
    Region& region = *find(key);
    std::memcpy(region.bytes.data() + (addr - region.addr), &value, sizeof value);
    return true;
}

bool MemoryModel::valid_receive_buffer(const ReceiveWqe& wqe) const {
    return std::all_of(wqe.sges.begin(), wqe.sges.end(), [this](const Sge& sge) {
        return check(sge.lkey, sge.addr, sge.length, access::kLocalWrite) == AccessResult::Ok;
    });
}

void MemoryModel::scatter(const ReceiveWqe& wqe, std::uint64_t offset,
                          std::span<const std::uint8_t> data) {
    for (const Sge& sge : wqe.sges) {
        if (data.empty()) return;
        if (offset >= sge.length) {
            offset -= sge.length;
            continue;
        }
        const std::uint64_t room = sge.length - offset;
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(room, data.size()));
        write(sge.lkey, sge.addr + offset, data.first(n), access::kLocalWrite);
        data = data.subspan(n);
        offset = 0;
    }
}

std::vector<std::uint8_t> MemoryModel::gather(const ReceiveWqe& wqe, std::uint64_t len) const {
    std::vector<std::uint8_t> out;
    for (const Sge& sge : wqe.sges) {
        if (out.size() >= len) break;
        const auto n =
            static_cast<std::uint32_t>(std::min<std::uint64_t>(sge.length, len - out.size()));
        std::vector<std::uint8_t> part;
        if (read(sge.lkey, sge.addr, n, 0, part) != AccessResult::Ok) break;
        out.insert(out.end(), part.begin(), part.end());
    }
    return out;
}

std::span<std::uint8_t> MemoryModel::region_bytes(std::uint32_t key) {
    Region* region = find(key);
    if (region == nullptr) return {};
    return region->bytes;
}

std::span<const std::uint8_t> MemoryModel::region_bytes(std::uint32_t key) const {
    const Region* region = find(key);
    if (region == nullptr) return {};
    return region->bytes;
}

}  // namespace metaroce
