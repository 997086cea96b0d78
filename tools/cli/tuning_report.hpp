#pragma once
// How `vkformer devices` shows a device's tuning: the static table, or the choices `vkformer
// tune` measured there (src/kernels/tuning_cache.hpp), and where the cache file is.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "vkformer/device.hpp"

namespace vkformer::cli {

// (key, value) rows for the text listing: "tuning" first, then one row per changed choice.
std::vector<std::pair<std::string, std::string>> tuning_rows(const DeviceInfo& info);
// {"status": "tuned"|"static"|"not tuned"|"ignored", "path", "problem", "choices": [...]}.
nlohmann::ordered_json tuning_json(const DeviceInfo& info);

}  // namespace vkformer::cli
