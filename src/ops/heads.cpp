// TODO(helper): the heads op family is being written; see docs/ARCHITECTURE.md.
#include "op_common.hpp"

namespace vkformer {

void register_heads_ops(OpRegistry&) {}

}  // namespace vkformer
