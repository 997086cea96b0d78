// TODO(helper): the matmul op family is being written; see docs/ARCHITECTURE.md.
#include "op_common.hpp"

namespace vkformer {

void register_matmul_ops(OpRegistry&) {}

}  // namespace vkformer
