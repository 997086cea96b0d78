#pragma once
// Every failure vkformer reports is a vkformer::Error: a category a program can branch on and a
// message a person can act on (what, where, expected vs got).
#include <stdexcept>
#include <string>

namespace vkformer {

enum class ErrorCode {
  invalid_argument,  // a bad value passed to the API (unknown name, bad option)
  shape_mismatch,    // tensor shapes or dtypes do not fit the op
  device_not_found,  // no Vulkan device, or none matches the selector
  unsupported,       // the device lacks a feature or a limit is exceeded
  out_of_memory,     // a host or device allocation failed
  device_lost,       // the device was lost or timed out; the Device cannot be used any more
  vulkan,            // any other failing VkResult
  io,                // a file could not be read or written
  format,            // a file is corrupt, truncated or of the wrong kind
  internal,          // a bug in vkformer: please report it
};

const char* to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace vkformer
