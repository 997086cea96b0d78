#pragma once
// Reading the tuning overrides (VKFORMER_* environment variables) of src/kernels/tuning*.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vkformer/device.hpp"

namespace vkformer::vk {

// The whole number in environment variable `name`, or nullopt where it is unset or empty.
// Throws invalid_argument naming the variable unless it is a number in [lo, hi].
std::optional<int64_t> env_number(const char* name, int64_t lo, int64_t hi);

// The largest block or tile side an override may ask for: beyond any device's workgroup and
// shared memory, and small enough that sizes computed from a few of them fit 64 bits.
constexpr uint32_t kMaxTileSide = 65536;

// One override with a structured value ("64x64x16/4x4/direct"), parsed the same way for every
// variable, and the errors that name it: "VKFORMER_MATMUL_TILES='63x64x16/4x4': BM 63 is not a
// multiple of TM 4".
class EnvOverride {
 public:
  explicit EnvOverride(const char* name);
  bool set() const { return !value_.empty(); }  // unset and empty alike mean no override
  // The numbers of the value where it has the form `pattern`, in which each '#' is a decimal
  // number (digits only: no sign or spaces, at most UINT32_MAX) and every other character
  // itself, with nothing after: "#x#x#/#x#" gives {64, 64, 16, 4, 4} for "64x64x16/4x4".
  std::optional<std::vector<uint32_t>> match(std::string_view pattern) const;
  // Throws invalid_argument: "NAME='value': problem".
  [[noreturn]] void reject(const std::string& problem) const;
  // Rejects unless lo <= n <= hi: "BM is 0, expected 1 to 65536".
  void check_range(const std::string& what, uint64_t n, uint64_t lo, uint64_t hi) const;
  // Rejects a workgroup of `invocations` (what: how they are counted) beyond the device's limits,
  // naming the limit and its value.
  void check_workgroup(const std::string& what, uint64_t invocations, const DeviceInfo& info) const;

 private:
  const char* name_;
  std::string value_;
};

}  // namespace vkformer::vk
