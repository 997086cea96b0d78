#pragma once
// Reading the tuning overrides (VKFORMER_* environment variables) of src/vk/tuning*.cpp.
#include <cstdint>
#include <optional>

namespace vkformer::vk {

// The whole number in environment variable `name`, or nullopt where it is unset or empty.
// Throws invalid_argument naming the variable unless it is a number in [lo, hi].
std::optional<int64_t> env_number(const char* name, int64_t lo, int64_t hi);

}  // namespace vkformer::vk
