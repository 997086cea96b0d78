#pragma once
// An Executor or Model is used by one thread at a time (README, "Threads"). Two threads inside
// one at once would race on its staging memory, command buffer and caches; this turns that into
// an error for the second one instead of corrupt results.
#include <atomic>
#include <string>

#include "vkformer/error.hpp"

namespace vkformer {

class ExclusiveUse {
 public:
  // Held for the duration of one call; the call that finds the object in use throws.
  class Scope {
   public:
    explicit Scope(ExclusiveUse& use, const char* what) : use_(use) {
      if (use_.busy_.exchange(true, std::memory_order_acquire))
        throw Error(ErrorCode::invalid_argument,
                    std::string(what) + ": already in use by another thread; one " + use_.kind_ +
                        " is used by one thread at a time (give each thread its own)");
    }
    ~Scope() { use_.busy_.store(false, std::memory_order_release); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ExclusiveUse& use_;
  };

  explicit ExclusiveUse(const char* kind) : kind_(kind) {}

 private:
  std::atomic<bool> busy_{false};
  const char* kind_;
};

}  // namespace vkformer
