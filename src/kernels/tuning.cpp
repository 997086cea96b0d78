#include "tuning.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "instance.hpp"
#include "tuning_cache.hpp"
#include "tuning_env.hpp"
#include "vkformer/error.hpp"

namespace vkformer::kernels {

Tuning tuning_for(const DeviceInfo& info, bool tuned) {
  Tuning t;
  t.reduction_workgroup = std::min<uint32_t>(256, info.max_workgroup_invocations);
  t.use_subgroup_reductions = info.subgroup_arithmetic && !vk::env_flag("VKFORMER_NO_SUBGROUP_OPS");
  t.quirks = vk::device_quirks(info);
  // A workgroup runs on one CPU thread: small workgroups for reductions, and every kernel's CPU
  // configuration (tuning_matmul.cpp, tuning_attention.cpp).
  if (vk::has_quirk(t.quirks, vk::QuirkId::cpu_workgroup_per_thread)) {
    t.cpu_device = true;
    t.reduction_workgroup = 64;
  }
  t.matmul = matmul_tuning_for(info, t.cpu_device);
  t.attention = attention_tiles_for(info, t.cpu_device, t.use_subgroup_reductions);
  t.max_binding_bytes = info.max_storage_buffer_range;
  // At least 4 KiB: every op's smallest window (one row, aligned) must still fit.
  if (auto limit = vk::env_number("VKFORMER_MAX_BINDING_BYTES", 4096, INT64_MAX))
    t.max_binding_bytes = std::min<uint64_t>(t.max_binding_bytes, static_cast<uint64_t>(*limit));
  if (tuned) apply_tuned_choices(info, &t);
  return t;
}

}  // namespace vkformer::kernels
