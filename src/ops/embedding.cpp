// TODO(helper): the embedding op family is being written; see docs/ARCHITECTURE.md.
#include "op_common.hpp"

namespace vkformer {

void register_embedding_ops(OpRegistry&) {}

}  // namespace vkformer
