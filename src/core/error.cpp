#include "vkformer/error.hpp"

namespace vkformer {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::shape_mismatch: return "shape mismatch";
    case ErrorCode::device_not_found: return "device not found";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::out_of_memory: return "out of memory";
    case ErrorCode::device_lost: return "device lost";
    case ErrorCode::vulkan: return "vulkan error";
    case ErrorCode::io: return "i/o error";
    case ErrorCode::format: return "format error";
    case ErrorCode::internal: return "internal error";
  }
  return "error";
}

}  // namespace vkformer
