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

}  // namespace vkformer::vk
