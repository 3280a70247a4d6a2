#include "softmetaroce/completion.h"

namespace metaroce {

std::string_view to_string(WcStatus status) {
    switch (status) {
        case WcStatus::Success:
            return "SUCCESS";
        case WcStatus::LocLenErr:
            return "LOC_LEN_ERR";
        case WcStatus::LocQpOpErr:
            return "LOC_QP_OP_ERR";
        case WcStatus::LocProtErr:
            return "LOC_PROT_ERR";
        case WcStatus::WrFlushErr:
            return "WR_FLUSH_ERR";
        case WcStatus::BadRespErr:
            return "BAD_RESP_ERR";
        case WcStatus::LocAccessErr:
            return "LOC_ACCESS_ERR";
        case WcStatus::RemInvReqErr:
            return "REM_INV_REQ_ERR";
        case WcStatus::RemAccessErr:
            return "REM_ACCESS_ERR";
        case WcStatus::RemOpErr:
            return "REM_OP_ERR";
        case WcStatus::RetryExcErr:
            return "RETRY_EXC_ERR";
        case WcStatus::RnrRetryExcErr:
            return "RNR_RETRY_EXC_ERR";
    }
    return "WC_STATUS(?)";
}

}  // namespace metaroce
