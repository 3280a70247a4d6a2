// The independent C++ model of protocol v2's paths and streams (docs/protocol-v2.md sections
// 3-6 and 8), written from the spec alone. The choices it had to make where the spec was silent
// are now the spec's Appendix A; the differential test (userspace/transport/tests) holds it and
// the C core to the same answers.
#pragma once

#include "softmetaroce/v2/path_ack.h"
#include "softmetaroce/v2/path_map.h"
#include "softmetaroce/v2/path_receiver.h"
#include "softmetaroce/v2/path_sender.h"
#include "softmetaroce/v2/requester.h"
#include "softmetaroce/v2/ring_map.h"
#include "softmetaroce/v2/seq.h"
#include "softmetaroce/v2/stream_map.h"
#include "softmetaroce/v2/stream_receiver.h"
#include "softmetaroce/v2/stream_segment.h"
#include "softmetaroce/v2/stream_sender.h"
#include "softmetaroce/v2/wire.h"
