#include "softmetaroce/packet.h"

namespace metaroce {

std::string_view to_string(Opcode opcode) {
    switch (opcode) {
        case Opcode::Send:
            return "SEND";
        case Opcode::Write:
            return "WRITE";
        case Opcode::ReadRequest:
            return "READ_REQ";
        case Opcode::ReadResponse:
            return "READ_RESP";
        case Opcode::UdSend:
            return "UD_SEND";
        case Opcode::AtomicCmpSwp:
            return "ATOMIC_CMP_SWP";
        case Opcode::AtomicFetchAdd:
            return "ATOMIC_FETCH_ADD";
        case Opcode::AtomicResponse:
            return "ATOMIC_RESP";
        case Opcode::Ack:
            return "ACK";
    }
    return "OPCODE(?)";
}

std::string_view to_string(Syndrome syndrome) {
    switch (syndrome) {
        case Syndrome::Ack:
            return "ACK";
        case Syndrome::RnrNak:
            return "RNR_NAK";
        case Syndrome::InvalidRequest:
            return "INVALID_REQUEST";
        case Syndrome::RemoteAccess:
            return "REMOTE_ACCESS";
        case Syndrome::RemoteOperational:
            return "REMOTE_OPERATIONAL";
        case Syndrome::Version:
            return "VERSION";
    }
    return "SYNDROME(?)";
}

}  // namespace metaroce
