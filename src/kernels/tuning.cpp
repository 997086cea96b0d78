#include "tuning.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "instance.hpp"
#include "tuning_cache.hpp"
#include "tuning_env.hpp"
#include "vkformer/error.hpp"

namespace vkformer::vk {

namespace {

struct QuirkRule {
  Quirk quirk;
  bool (*applies)(const DeviceInfo&);
  void (*apply)(Tuning&);
};

// The quirk table. Keep each rule narrow (vendor + driver) with a reason and a link.
const QuirkRule kQuirkRules[] = {
    {{"cpu-workgroup-per-thread",
      "CPU implementations run a workgroup on one thread: shared memory is ordinary memory and "
      "barrier() is a real cost, so reductions use small workgroups and matmul reads its operands "
      "directly instead of staging them in shared memory",
      "https://docs.mesa3d.org/drivers/llvmpipe.html"},
     [](const DeviceInfo& d) { return d.type == "cpu"; },
     [](Tuning& t) {
       t.cpu_device = true;
       t.reduction_workgroup = 64;
     }},
};

}  // namespace

Tuning tuning_for(const DeviceInfo& info, bool tuned) {
  Tuning t;
  t.reduction_workgroup = std::min<uint32_t>(256, info.max_workgroup_invocations);
  t.use_subgroup_reductions = info.subgroup_arithmetic && !env_flag("VKFORMER_NO_SUBGROUP_OPS");
  // Tests run the GPU configuration of every kernel on a CPU device this way (see README).
  const bool as_gpu = env_flag("VKFORMER_TUNING_AS_GPU");
  for (const auto& rule : kQuirkRules)
    if (!as_gpu && rule.applies(info)) {
      rule.apply(t);
      t.quirks.push_back(rule.quirk);
    }
  t.matmul = matmul_tuning_for(info, t.cpu_device);
  t.attention = attention_tiles_for(info, t.cpu_device, t.use_subgroup_reductions);
  t.max_binding_bytes = info.max_storage_buffer_range;
  // At least 4 KiB: every op's smallest window (one row, aligned) must still fit.
  if (auto limit = env_number("VKFORMER_MAX_BINDING_BYTES", 4096, INT64_MAX))
    t.max_binding_bytes = std::min<uint64_t>(t.max_binding_bytes, static_cast<uint64_t>(*limit));
  if (tuned) apply_tuned_choices(info, &t);
  return t;
}

}  // namespace vkformer::vk
