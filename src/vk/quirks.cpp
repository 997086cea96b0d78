#include "quirks.hpp"

#include <algorithm>

#include "instance.hpp"

namespace vkformer::vk {

namespace {

struct QuirkRule {
  Quirk quirk;
  bool (*applies)(const DeviceInfo&);
};

// The quirk table. Keep each rule narrow (vendor + driver) with a reason and a link.
const QuirkRule kQuirkRules[] = {
    {{QuirkId::cpu_workgroup_per_thread, "cpu-workgroup-per-thread",
      "CPU implementations run a workgroup on one thread: shared memory is ordinary memory and "
      "barrier() is a real cost, so reductions use small workgroups and matmul reads its operands "
      "directly instead of staging them in shared memory",
      "https://docs.mesa3d.org/drivers/llvmpipe.html"},
     [](const DeviceInfo& d) { return d.type == "cpu"; }},
};

}  // namespace

std::vector<Quirk> device_quirks(const DeviceInfo& info) {
  std::vector<Quirk> quirks;
  // Tests run the GPU configuration of every kernel on a CPU device this way (see README).
  if (env_flag("VKFORMER_TUNING_AS_GPU")) return quirks;
  for (const QuirkRule& rule : kQuirkRules)
    if (rule.applies(info)) quirks.push_back(rule.quirk);
  return quirks;
}

bool has_quirk(const std::vector<Quirk>& quirks, QuirkId which) {
  return std::any_of(quirks.begin(), quirks.end(), [which](const Quirk& q) { return q.which == which; });
}

}  // namespace vkformer::vk
