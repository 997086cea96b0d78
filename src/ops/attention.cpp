// TODO(helper): the attention op family is being written; see docs/ARCHITECTURE.md.
#include "op_common.hpp"

namespace vkformer {

void register_attention_ops(OpRegistry&) {}

}  // namespace vkformer
