// TODO(helper): the layer_norm op family is being written; see docs/ARCHITECTURE.md.
#include "op_common.hpp"

namespace vkformer {

void register_layer_norm_ops(OpRegistry&) {}

}  // namespace vkformer
