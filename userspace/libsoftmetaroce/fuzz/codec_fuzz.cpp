// libFuzzer target for the codec: decoding arbitrary bytes must be safe, and whatever decodes
// must re-encode to the same bytes and decode again to the same packet.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "softmetaroce/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::uint8_t> input(data, size);
    for (const std::uint32_t mtu : {256u, 1024u, 4096u}) {
        const metaroce::DecodeOptions options{mtu};
        const auto decoded = metaroce::decode(input, options);
        if (!decoded) continue;
        const std::vector<std::uint8_t> encoded = metaroce::encode(*decoded);
        if (encoded.size() != size || !std::equal(encoded.begin(), encoded.end(), data)) {
            std::abort();  // encode(decode(x)) != x
        }
        const auto again = metaroce::decode(encoded, options);
        if (!again || !(*again == *decoded)) std::abort();
    }
    return 0;
}
