#include "tuning_env.hpp"

#include <cstdlib>
#include <string>

#include "vkformer/error.hpp"

namespace vkformer::vk {

std::optional<int64_t> env_number(const char* name, int64_t lo, int64_t hi) {
  const char* env = std::getenv(name);
  if (!env || !*env) return std::nullopt;
  char* end = nullptr;
  const long long n = std::strtoll(env, &end, 10);
  if (*end != 0 || n < lo || n > hi)
    throw Error(ErrorCode::invalid_argument,
                std::string(name) + "='" + env + "': expected a number from " + std::to_string(lo) +
                    " to " + std::to_string(hi));
  return n;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The decimal number at the start of `text` (consumed), or nullopt where there is none or it
// exceeds UINT32_MAX. Unlike sscanf's %u, no sign, no spaces, and no wrapping.
std::optional<uint32_t> take_number(std::string_view* text) {
  uint64_t n = 0;
  size_t i = 0;
  for (; i < text->size() && is_digit((*text)[i]); ++i) {
    n = n * 10 + static_cast<uint64_t>((*text)[i] - '0');
    if (n > UINT32_MAX) return std::nullopt;
  }
  if (i == 0) return std::nullopt;
  text->remove_prefix(i);
  return static_cast<uint32_t>(n);
}

}  // namespace

EnvOverride::EnvOverride(const char* name) : name_(name) {
  if (const char* env = std::getenv(name)) value_ = env;
}

std::optional<std::vector<uint32_t>> EnvOverride::match(std::string_view pattern) const {
  std::vector<uint32_t> numbers;
  std::string_view rest = value_;
  for (char p : pattern) {
    if (p == '#') {
      std::optional<uint32_t> n = take_number(&rest);
      if (!n) return std::nullopt;
      numbers.push_back(*n);
    } else if (!rest.empty() && rest.front() == p) {
      rest.remove_prefix(1);
    } else {
      return std::nullopt;
    }
  }
  if (!rest.empty()) return std::nullopt;
  return numbers;
}

void EnvOverride::reject(const std::string& problem) const {
  throw Error(ErrorCode::invalid_argument, std::string(name_) + "='" + value_ + "': " + problem);
}

void EnvOverride::check_range(const std::string& what, uint64_t n, uint64_t lo,
                              uint64_t hi) const {
  if (n < lo || n > hi)
    reject(what + " is " + std::to_string(n) + ", expected " + std::to_string(lo) + " to " +
           std::to_string(hi));
}

void EnvOverride::check_workgroup(const std::string& what, uint64_t invocations,
                                  const DeviceInfo& info) const {
  auto check = [&](const char* limit, uint32_t max) {
    if (invocations > max)
      reject(what + " = " + std::to_string(invocations) + " invocations, above " + limit + " = " +
             std::to_string(max) + " of device '" + info.name + "'");
  };
  check("maxComputeWorkGroupInvocations", info.max_workgroup_invocations);
  check("maxComputeWorkGroupSize[0]", info.max_workgroup_size[0]);
}

}  // namespace vkformer::vk
