// The family goldens (tests/golden_families, written by tests/fixtures/make_family_models.py): what
// manifest.json says of each family (its GGUF files, prompts with transformers' logits, greedy
// texts) and the list of families, for every test that runs them. The including target defines
// VKF_FAMILIES_GOLDEN_DIR.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace vkformer::testing {

inline const nlohmann::json& families_manifest() {
  static const nlohmann::json m =
      nlohmann::json::parse(std::ifstream(std::filesystem::path(VKF_FAMILIES_GOLDEN_DIR) / "manifest.json"));
  return m;
}

// A file the manifest names (a GGUF, a logits .npy), where it lies.
inline std::filesystem::path family_file(const nlohmann::json& name) {
  return std::filesystem::path(VKF_FAMILIES_GOLDEN_DIR) / name.get<std::string>();
}

// The family's GGUF of weight type `type` ("f32", "f16", "q8_0").
inline std::filesystem::path family_gguf(const std::string& family, const std::string& type = "f32") {
  return family_file(families_manifest()[family]["gguf"][type]);
}

// The families in the manifest's order (a parameterized suite's values).
inline std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (auto it = families_manifest().begin(); it != families_manifest().end(); ++it) names.push_back(it.key());
  return names;
}

}  // namespace vkformer::testing
