#include "device_select.hpp"

#include <algorithm>
#include <cctype>

#include "vkformer/error.hpp"

namespace vkformer::vk {

namespace {

int type_rank(const std::string& type) {
  static const char* order[] = {"discrete", "integrated", "virtual", "cpu", "other"};
  for (int i = 0; i < 5; ++i)
    if (type == order[i]) return i;
  return 5;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool is_index(const std::string& s) {
  return !s.empty() && s.size() < 6 && std::all_of(s.begin(), s.end(), ::isdigit);
}

}  // namespace

std::string list_devices(const std::vector<DeviceInfo>& devices) {
  if (devices.empty()) return "  (no Vulkan devices found)\n";
  std::string s;
  for (auto& d : devices)
    s += "  " + std::to_string(d.index) + ": " + d.name + " [" + d.type + ", " + d.vendor +
         ", uuid " + d.uuid + "]\n";
  return s;
}

size_t select_device(const std::vector<DeviceInfo>& devices, const std::string& selector) {
  if (devices.empty())
    throw Error(ErrorCode::device_not_found,
                "no Vulkan device found: install a Vulkan driver (for the CPU: Debian's "
                "mesa-vulkan-drivers provides lavapipe)");
  if (selector.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < devices.size(); ++i)
      if (type_rank(devices[i].type) < type_rank(devices[best].type)) best = i;
    return best;
  }
  if (is_index(selector)) {
    size_t idx = std::stoul(selector);
    for (size_t i = 0; i < devices.size(); ++i)
      if (devices[i].index == idx) return i;
  } else {
    std::string sel = lower(selector);
    std::string sel_hex;  // UUIDs may be written with dashes
    for (char c : sel)
      if (c != '-') sel_hex += c;
    for (size_t i = 0; i < devices.size(); ++i)
      if (devices[i].uuid == sel_hex) return i;
    for (size_t i = 0; i < devices.size(); ++i)
      if (lower(devices[i].name).find(sel) != std::string::npos) return i;
  }
  throw Error(ErrorCode::device_not_found,
              "no Vulkan device matches '" + selector +
                  "' (an index, a name substring or a UUID); devices present:\n" +
                  list_devices(devices));
}

}  // namespace vkformer::vk
