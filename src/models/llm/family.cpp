#include "llm/family.hpp"

namespace vkformer::models::llm {

// Defined in family_<arch>.cpp, one each (families.def).
#define VKF_FAMILY(architecture, variable) extern const Family variable;
#include "llm/families.def"
#undef VKF_FAMILY

namespace {

constexpr const Family* kFamilies[] = {
#define VKF_FAMILY(architecture, variable) &variable,
#include "llm/families.def"
#undef VKF_FAMILY
};

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
