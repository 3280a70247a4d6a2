// libFuzzer target for protocol v2's parser (kernel/core/mrc_wire.c), the code every packet from
// the network meets first: any bytes are refused with a reason or parse into a packet whose
// payload lies inside the buffer and within its message, and which builds back into the same
// bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" {
#include "mrc_wire.h"
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 0xffff) return 0;
    mrc_pkt pkt;
    mrc_wire_error err = mrc_wire_parse(data, static_cast<uint32_t>(size), &pkt);
    if (err >= MRC_WIRE_NUM_ERRORS) abort();
    if (err != MRC_WIRE_OK) return 0;
    if (pkt.payload < data || pkt.payload + pkt.payload_len != data + size) abort();
    if (uint64_t(pkt.hdr.offset) + pkt.payload_len > pkt.hdr.msg_len) abort();
    uint8_t hdr[MRC_MAX_HDRS_LEN];
    uint32_t n = mrc_wire_build(&pkt, hdr, sizeof(hdr));
    if (n == 0 || n + pkt.payload_len != size || memcmp(hdr, data, n) != 0) abort();
    return 0;
}
