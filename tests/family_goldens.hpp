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

// The families in the manifest's order (a parameterized suite's values).
inline std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (auto it = families_manifest().begin(); it != families_manifest().end(); ++it) names.push_back(it.key());
  return names;
}

}  // namespace vkformer::testing
