// TODO(helper): the softmax op family is being written; see docs/ARCHITECTURE.md.
#include "op_common.hpp"

namespace vkformer {

void register_softmax_ops(OpRegistry&) {}

}  // namespace vkformer
