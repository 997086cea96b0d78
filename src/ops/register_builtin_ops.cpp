// The one place that lists every op family. Adding a family: write src/ops/<family>.cpp with its
// Graph builder methods and lowerings, declare and call its register function here.
#include "lowering.hpp"

namespace vkformer {

void register_elementwise_ops(OpRegistry& r);

void register_builtin_ops(OpRegistry& r) {
  register_elementwise_ops(r);
}

}  // namespace vkformer
