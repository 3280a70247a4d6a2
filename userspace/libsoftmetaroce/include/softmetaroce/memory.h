// The target memory model of a protection domain: registered regions with keys, bounds and
// access rights, and the receive WQEs whose scatter lists point into them (protocol.md
// section 6). Regions own their bytes, so tests can inspect exactly what was placed.
//
// Besides the regions registered once (ibv_reg_mr), fast-registration regions (ib_alloc_mr):
// allocated without a registration, then registered under a key (IB_WR_REG_MR), found under
// exactly that key like any region until the registration is invalidated, locally
// (IB_WR_LOCAL_INV) or by a peer's SEND with invalidate, and registered again under another.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

namespace metaroce {

namespace access {
inline constexpr std::uint32_t kLocalWrite = 1u << 0;
inline constexpr std::uint32_t kRemoteWrite = 1u << 1;
inline constexpr std::uint32_t kRemoteRead = 1u << 2;
inline constexpr std::uint32_t kRemoteAtomic = 1u << 3;
}  // namespace access

enum class AccessResult {
    Ok,
    BadKey,       // no region has this key
    NoRights,     // the region does not allow the access
    OutOfBounds,  // the range does not lie inside the region
    Misaligned,   // an atomic's address is not a multiple of 8
};

enum class AtomicOp : std::uint8_t { CompareSwap, FetchAdd };

// One scatter/gather element: `length` bytes at `addr` of the region with key `lkey`.
struct Sge {
    std::uint32_t lkey = 0;
    std::uint64_t addr = 0;
    std::uint32_t length = 0;
};

struct ReceiveWqe {
    std::uint64_t wr_id = 0;
    std::vector<Sge> sges;

    std::uint64_t total_length() const;
};

class MemoryModel {
  public:
    // Registers `length` zeroed bytes at virtual address `addr` under `key` (used both as lkey
    // and rkey). Returns false if the key is taken or the range wraps.
    bool register_region(std::uint32_t key, std::uint64_t addr, std::uint32_t length,
                         std::uint32_t access_flags);
    bool deregister_region(std::uint32_t key);

    // Whether [addr, addr + len) lies in region `key` and the region allows `needed`.
    AccessResult check(std::uint32_t key, std::uint64_t addr, std::uint64_t len,
                       std::uint32_t needed) const;
    AccessResult write(std::uint32_t key, std::uint64_t addr, std::span<const std::uint8_t> data,
                       std::uint32_t needed);
    AccessResult read(std::uint32_t key, std::uint64_t addr, std::uint32_t len,
                      std::uint32_t needed, std::vector<std::uint8_t>& out) const;

    // An atomic on the 64-bit word at `addr` (a multiple of 8) of region `key`, which must
    // allow `needed`: FetchAdd adds `swap_add` (modulo 2^64); CompareSwap stores `swap_add` if
    // the word equals `compare`. The word is a native integer in the host's byte order (as
    // for an IB atomic, protocol.md section 3.4); `original` receives what it held before.
    // Nothing changes unless the result is Ok.
    AccessResult atomic(std::uint32_t key, std::uint64_t addr, AtomicOp op, std::uint64_t swap_add,
                        std::uint64_t compare, std::uint32_t needed, std::uint64_t& original);
    // The native 64-bit word at `addr` of region `key`, if it lies inside (for tests).
    std::optional<std::uint64_t> load_word(std::uint32_t key, std::uint64_t addr) const;
    bool store_word(std::uint32_t key, std::uint64_t addr, std::uint64_t value);

    // Whether every SGE of the WQE names locally writable memory.
    bool valid_receive_buffer(const ReceiveWqe& wqe) const;
    // Copies `data` into the WQE's scatter list starting at byte `offset` of the list. The
    // caller checks offset + size <= total_length() and valid_receive_buffer() first.
    void scatter(const ReceiveWqe& wqe, std::uint64_t offset, std::span<const std::uint8_t> data);
    // Reads `len` bytes of the WQE's scatter list from its start (for tests and tools).
    std::vector<std::uint8_t> gather(const ReceiveWqe& wqe, std::uint64_t len) const;

    // The bytes of a region (empty span if the key is unknown).
    std::span<std::uint8_t> region_bytes(std::uint32_t key);
    std::span<const std::uint8_t> region_bytes(std::uint32_t key) const;

    // Fast registration. A fast-registration region is allocated with room for `max_length`
    // bytes and no registration: no key names it. Returns its id.
    using FastRegId = std::uint32_t;
    FastRegId alloc_fast_reg_region(std::uint32_t max_length);
    // Frees it (ib_dereg_mr), ending its registration if any. False if the id is unknown.
    bool free_fast_reg_region(FastRegId id);
    // Registers region `id` under `key` (lkey and rkey) for `length` bytes at `addr` with
    // `access_flags`: each registration maps `length` fresh zeroed bytes. False, changing
    // nothing, if the id is unknown, the region is registered already (invalidate it first),
    // `length` exceeds its room, the key is taken by any region or the range wraps.
    bool fast_register(FastRegId id, std::uint32_t key, std::uint64_t addr, std::uint32_t length,
                       std::uint32_t access_flags);
    // Whether `key` names a fast-registration region registered under exactly that key: what
    // a SEND with invalidate may name (protocol.md section 6).
    bool fast_reg_valid(std::uint32_t key) const;
    // Ends the registration under `key`: from then on the key names nothing. Local
    // invalidation (IB_WR_LOCAL_INV, the consumer's) and remote (a peer's SEND with
    // invalidate, when it completes: Receiver) are the same. False, changing nothing, unless
    // fast_reg_valid(key).
    bool invalidate(std::uint32_t key);
    // The key region `id` is registered under, if it is.
    std::optional<std::uint32_t> fast_reg_key(FastRegId id) const;
    // The bytes of region `id`'s latest registration, also once it has ended (for tests).
    std::span<const std::uint8_t> fast_reg_bytes(FastRegId id) const;

  private:
    struct Region {
        std::uint64_t addr = 0;
        std::uint32_t access_flags = 0;
        std::vector<std::uint8_t> bytes;
    };

    struct FastRegRegion {
        std::uint32_t max_length = 0;
        std::optional<std::uint32_t> key;  // the registration in force
        Region region;                     // of the latest registration
    };

    const Region* find(std::uint32_t key) const;
    Region* find(std::uint32_t key);
    bool key_taken(std::uint32_t key) const;

    std::map<std::uint32_t, Region> regions_;
    std::map<FastRegId, FastRegRegion> fast_regs_;
    std::map<std::uint32_t, FastRegId> fast_reg_keys_;  // the registrations in force
    FastRegId next_fast_reg_id_ = 1;
};

}  // namespace metaroce
