// `vkformer devices`: every Vulkan physical device with what vkformer cares about, which one it
// would use, and the quirks it applies there. `--json` gives the same for scripts and bug reports.
#include <cstdio>
#include <array>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "device_identity.hpp"
#include "format.hpp"
#include "tuning_report.hpp"
#include "version.hpp"
#include "vkformer/error.hpp"

namespace vkformer::cli {

// What `vkformer devices --help` says first.
constexpr const char* kDevicesHelp =
    "List the Vulkan devices: limits, features, driver, the one vkformer uses (*) and the "
    "quirks it applies";

namespace {

// Which device Device::open would pick, and why; the choice itself is the library's.
struct Selection {
  std::string source;    // "--device", "VKFORMER_DEVICE" or "default"
  std::string selector;  // as given; empty for "default"
  std::optional<size_t> position;  // into the enumerated list
  std::string error;     // why nothing was chosen
};

Selection select(const std::vector<DeviceInfo>& devices, const GlobalOptions& globals) {
  Selection s;
  const char* env = std::getenv("VKFORMER_DEVICE");
  if (!globals.device.empty()) {
    s.source = "--device";
    s.selector = globals.device;
  } else if (env && *env) {
    s.source = "VKFORMER_DEVICE";
    s.selector = env;
  } else {
    s.source = "default";
  }
  try {
    s.position = Device::choose(devices, globals.device);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::device_not_found) throw;
    s.error = e.what();
  }
  return s;
}

std::string triple(const std::array<uint32_t, 3>& v) {
  return std::to_string(v[0]) + " x " + std::to_string(v[1]) + " x " + std::to_string(v[2]);
}


void print_text(const std::vector<DeviceInfo>& devices, const Selection& sel) {
  std::printf("%zu Vulkan device%s. ", devices.size(), devices.size() == 1 ? "" : "s");
  if (devices.empty())
    std::printf("\n");
  else if (!sel.position)
    std::printf("None matches %s=%s.\n", sel.source.c_str(), sel.selector.c_str());
  else if (sel.source == "default")
    std::printf("vkformer uses device %u (*), the first in the default order: discrete, "
                "integrated, virtual, cpu.\n",
                devices[*sel.position].index);
  else
    std::printf("vkformer uses device %u (*), chosen by %s=%s.\n", devices[*sel.position].index,
                sel.source.c_str(), sel.selector.c_str());

  auto row = [](const char* key, const std::string& value) {
    std::printf("    %-26s %s\n", key, value.c_str());
  };
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& d = devices[i];
    bool chosen = sel.position && *sel.position == i;
    std::printf("\n%s %u: %s\n", chosen ? "*" : " ", d.index, d.name.c_str());
    row("vendor", d.vendor + " (vendor id " + fmt("0x%04X", d.vendor_id) + ", device id " +
                      fmt("0x%04X", d.device_id) + ")");
    row("type", d.type);
    std::string driver = d.driver_name.empty() ? std::string("(name not reported)") : d.driver_name;
    if (!d.driver_info.empty()) driver += ", " + d.driver_info;
    row("driver", driver);
    row("driver version", d.driver_version);
    row("Vulkan API", d.api_version);
    row("UUID", d.uuid);
    row("subgroup size", std::to_string(d.subgroup_size) + " (min " +
                             std::to_string(d.min_subgroup_size) + ", max " +
                             std::to_string(d.max_subgroup_size) + ")");
    row("subgroup arithmetic", yes_no(d.subgroup_arithmetic));
    row("subgroup shuffle", yes_no(d.subgroup_shuffle));
    row("fp16 arithmetic", yes_no(d.fp16_arithmetic));
    row("16-bit storage", yes_no(d.storage_16bit));
    row("integer dot product",
        d.integer_dot_product
            ? std::string("yes; 4x8-bit packed accelerated: signed ") +
                  yes_no(d.integer_dot_4x8_packed_signed_accelerated) + ", unsigned " +
                  yes_no(d.integer_dot_4x8_packed_unsigned_accelerated) + ", mixed " +
                  yes_no(d.integer_dot_4x8_packed_mixed_accelerated)
            : std::string("no"));
    row("shared memory", bytes_with_exact(d.shared_memory_bytes));
    row("maxStorageBufferRange", bytes_with_exact(d.max_storage_buffer_range));
    row("maxMemoryAllocationSize", bytes_with_exact(d.max_memory_allocation_size));
    row("device-local memory", bytes_with_exact(d.device_local_memory_bytes));
    row("storage offset alignment", std::to_string(d.min_storage_buffer_offset_alignment));
    row("max push constants", human_bytes(d.max_push_constants_size));
    row("max workgroup count", triple(d.max_workgroup_count));
    row("max workgroup size", triple(d.max_workgroup_size));
    row("max workgroup invocations", std::to_string(d.max_workgroup_invocations));
    row("compute units", d.compute_units ? std::to_string(d.compute_units) : std::string("not reported"));
    row("texel buffers", std::to_string(d.max_texel_buffer_elements) + " texels at most, offsets aligned to " +
                             std::to_string(d.min_texel_buffer_offset_alignment));
    row("timestamps", d.timestamps ? std::string("yes, period ") + fmt("%g ns", d.timestamp_period_ns)
                                   : std::string("no"));
    row("cooperative matrix", std::string("NV ") + yes_no(d.cooperative_matrix_nv) + ", KHR " +
                                  yes_no(d.cooperative_matrix_khr));
    auto shapes = [&](const char* api, const std::vector<CooperativeMatrixShape>& list) {
      for (const auto& c : list)
        row("", std::string("  ") + api + " " + std::to_string(c.m) + "x" + std::to_string(c.n) +
                    "x" + std::to_string(c.k) + ": " + c.a_type + " x " + c.b_type + " + " +
                    c.c_type + " -> " + c.d_type + (c.saturating ? " (saturating)" : ""));
    };
    shapes("KHR", d.cooperative_matrix_khr_shapes);
    shapes("NV", d.cooperative_matrix_nv_shapes);
    auto quirks = Device::quirks(d);
    if (quirks.empty()) row("quirks", "none");
    for (size_t q = 0; q < quirks.size(); ++q) {
      row(q == 0 ? "quirks" : "", quirks[q].id);
      for (const auto& line : wrap(quirks[q].reason, 64)) row("", "  " + line);
      row("", "  " + quirks[q].link);
    }
    for (const auto& [key, value] : tuning_rows(d)) row(key.c_str(), value);
  }
  // What this build lacks is the same on every device: said once, after them.
  const auto missing = kernels_not_built();
  if (!missing.empty()) {
    std::printf("\nKernels not built (%zu), so not used on any device:\n", missing.size());
    for (const auto& k : missing) std::printf("    %-26s %s\n", k.name.c_str(), k.reason.c_str());
  }
}

nlohmann::ordered_json device_json(const DeviceInfo& d, bool chosen) {
  nlohmann::ordered_json j;
  j["index"] = d.index;
  j["chosen"] = chosen;
  put_device_identity(j, d);
  j["driver_name"] = d.driver_name;
  j["driver_info"] = d.driver_info;
  j["driver_version"] = d.driver_version;
  j["api_version"] = d.api_version;
  j["subgroup_size"] = d.subgroup_size;
  j["min_subgroup_size"] = d.min_subgroup_size;
  j["max_subgroup_size"] = d.max_subgroup_size;
  j["subgroup_arithmetic"] = d.subgroup_arithmetic;
  j["fp16_arithmetic"] = d.fp16_arithmetic;
  j["storage_16bit"] = d.storage_16bit;
  j["integer_dot_product"] = d.integer_dot_product;
  j["integer_dot_4x8_packed_accelerated"] = {
      {"signed", d.integer_dot_4x8_packed_signed_accelerated},
      {"unsigned", d.integer_dot_4x8_packed_unsigned_accelerated},
      {"mixed", d.integer_dot_4x8_packed_mixed_accelerated}};
  j["shared_memory_bytes"] = d.shared_memory_bytes;
  j["max_storage_buffer_range"] = d.max_storage_buffer_range;
  j["max_memory_allocation_size"] = d.max_memory_allocation_size;
  j["device_local_memory_bytes"] = d.device_local_memory_bytes;
  j["min_storage_buffer_offset_alignment"] = d.min_storage_buffer_offset_alignment;
  j["max_push_constants_size"] = d.max_push_constants_size;
  j["max_workgroup_count"] = d.max_workgroup_count;
  j["max_workgroup_size"] = d.max_workgroup_size;
  j["max_workgroup_invocations"] = d.max_workgroup_invocations;
  j["timestamps"] = d.timestamps;
  j["timestamp_period_ns"] = d.timestamp_period_ns;
  j["cooperative_matrix_nv"] = d.cooperative_matrix_nv;
  j["cooperative_matrix_khr"] = d.cooperative_matrix_khr;
  const std::pair<const char*, const std::vector<CooperativeMatrixShape>*> lists[] = {
      {"cooperative_matrix_khr_shapes", &d.cooperative_matrix_khr_shapes},
      {"cooperative_matrix_nv_shapes", &d.cooperative_matrix_nv_shapes}};
  for (const auto& [key, list] : lists) {
    j[key] = nlohmann::ordered_json::array();
    for (const auto& c : *list)
      j[key].push_back({{"m", c.m}, {"n", c.n}, {"k", c.k}, {"a", c.a_type}, {"b", c.b_type},
                        {"c", c.c_type}, {"d", c.d_type}, {"saturating", c.saturating}});
  }
  j["subgroup_shuffle"] = d.subgroup_shuffle;
  j["compute_units"] = d.compute_units;
  j["max_texel_buffer_elements"] = d.max_texel_buffer_elements;
  j["min_texel_buffer_offset_alignment"] = d.min_texel_buffer_offset_alignment;
  j["quirks"] = nlohmann::ordered_json::array();
  for (const auto& q : Device::quirks(d))
    j["quirks"].push_back({{"id", q.id}, {"reason", q.reason}, {"link", q.link}});
  j["tuning"] = tuning_json(d);
  return j;
}

void print_json(const std::vector<DeviceInfo>& devices, const Selection& sel) {
  nlohmann::ordered_json j;
  j["vkformer_version"] = VKFORMER_VERSION;
  nlohmann::ordered_json s;
  s["source"] = sel.source;
  s["selector"] = sel.selector;
  s["index"] = sel.position ? nlohmann::ordered_json(devices[*sel.position].index)
                            : nlohmann::ordered_json(nullptr);
  if (!sel.error.empty()) s["error"] = sel.error;
  j["selection"] = s;
  j["devices"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < devices.size(); ++i)
    j["devices"].push_back(device_json(devices[i], sel.position && *sel.position == i));
  j["kernels_not_built"] = nlohmann::ordered_json::array();
  for (const auto& k : kernels_not_built())
    j["kernels_not_built"].push_back({{"name", k.name}, {"reason", k.reason}});
  std::cout << j.dump(2) << "\n";
}

}  // namespace

Command add_devices_command(CLI::App& app, const GlobalOptions& globals) {
  auto* sub = app.add_subcommand("devices", kDevicesHelp);
  auto json = std::make_shared<bool>(false);
  sub->add_flag("--json", *json,
                "Print JSON instead of text (keys as in vkformer::DeviceInfo; sizes in bytes)");
  return {sub, [&globals, json]() {
            auto devices = Device::enumerate(globals.instance_options());
            Selection sel = select(devices, globals);
            if (*json)
              print_json(devices, sel);
            else
              print_text(devices, sel);
            std::fflush(stdout);
            // The listing is still useful when the selector matches nothing, but it is an error.
            if (!sel.position) throw Error(ErrorCode::device_not_found, sel.error);
            return 0;
          }};
}

}  // namespace vkformer::cli
