#include "llm/family.hpp"

#include <array>

namespace vkformer::models::llm {

// Defined in family_<arch>.cpp, one each.
extern const Family kLlamaFamily, kQwen2Family, kQwen3Family, kGemma2Family, kGemma3Family,
    kPhi3Family;

namespace {

constexpr std::array<const Family*, 6> kFamilies = {&kLlamaFamily,  &kQwen2Family,  &kQwen3Family,
                                                    &kGemma2Family, &kGemma3Family, &kPhi3Family};

}  // namespace

const Family* find_family(std::string_view architecture) {
  for (const Family* f : kFamilies)
    if (f->architecture == architecture) return f;
  return nullptr;
}

std::string supported_architectures() {
  std::string s;
  for (const Family* f : kFamilies) s += (s.empty() ? "" : ", ") + std::string(f->architecture);
  return s;
}

}  // namespace vkformer::models::llm
