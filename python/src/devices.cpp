// vkformer.devices() and the Device handle the other classes take.
#include <map>
#include <mutex>
#include <optional>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"
#include "tuning_cache.hpp"
#include "vkformer/error.hpp"

namespace vkformer::py {

namespace {

// What `vkformer devices` reports on its "tuning" line (tools/cli/tuning_report.cpp): whether
// `vkformer tune` measured this device and which choices it kept.
nb::dict describe_tuning(const DeviceInfo& d) {
  using State = kernels::TuningCacheState;
  const State s = kernels::tuning_cache_state(d);
  nb::dict out;
  switch (s.status) {
    case State::Status::static_table: out["status"] = "static"; break;
    case State::Status::absent: out["status"] = "not tuned"; break;
    case State::Status::tuned: out["status"] = "tuned"; break;
    case State::Status::ignored: out["status"] = "ignored"; break;
  }
  out["path"] = s.path.empty() ? nb::none() : nb::cast(s.path.string());
  out["problem"] = s.problem.empty() ? nb::none() : nb::cast(s.problem);
  nb::list choices;
  for (const kernels::TunedChoice& c : s.choices) {
    nb::dict e;
    e["tunable"] = c.tunable;
    e["value"] = c.value;
    e["static"] = c.static_value;
    choices.append(e);
  }
  out["choices"] = choices;
  return out;
}

nb::dict describe(const DeviceInfo& d) {
  nb::dict out;
  out["index"] = d.index;
  out["name"] = d.name;
  out["type"] = d.type;
  out["vendor"] = d.vendor;
  out["uuid"] = d.uuid;
  out["driver"] = d.driver_name + (d.driver_info.empty() ? "" : ", " + d.driver_info);
  out["api_version"] = d.api_version;
  out["device_local_memory_bytes"] = d.device_local_memory_bytes;
  out["subgroup_size"] = d.subgroup_size;
  out["fp16_arithmetic"] = d.fp16_arithmetic;
  out["cooperative_matrix"] = d.cooperative_matrix_khr || d.cooperative_matrix_nv;
  out["tuning"] = describe_tuning(d);
  return out;
}

}  // namespace

Device shared_device(const std::string& selector) {
  static std::mutex mutex;
  static auto* opened = new std::map<std::string, Device>;  // never destroyed: see below
  std::lock_guard lock(mutex);
  // Kept until the process ends, never destroyed at exit: static destructors run after the
  // interpreter has torn down the objects that used these devices, in no defined order. A lost
  // device is replaced: the models made on it raise DeviceLostError, new ones get a device that
  // works (the lost one goes with the last model that holds it).
  if (auto it = opened->find(selector); it != opened->end()) {
    if (!it->second.lost()) return it->second;
    opened->erase(it);
  }
  DeviceOptions options;
  options.selector = selector;
  Device device = Device::open(options);
  opened->emplace(selector, device);
  return device;
}

void bind_devices(nb::module_& m) {
  m.def(
      "_devices",
      [](const std::string& selector) {
        std::vector<DeviceInfo> infos;
        size_t chosen = SIZE_MAX;
        {
          nb::gil_scoped_release release;
          infos = Device::enumerate();
          try {
            chosen = Device::choose(infos, selector);
          } catch (const Error&) {
            // No match: every device is still listed, none chosen.
          }
        }
        nb::list out;
        for (size_t i = 0; i < infos.size(); ++i) {
          nb::dict d = describe(infos[i]);
          d["chosen"] = i == chosen;
          out.append(d);
        }
        return out;
      },
      nb::arg("selector") = "");
  m.def(
      "_device_info",
      [](const std::string& selector) {
        std::optional<Device> device;
        {
          nb::gil_scoped_release release;
          device = shared_device(selector);
        }
        return describe(device->info());
      },
      nb::arg("selector") = "");
}

}  // namespace vkformer::py
