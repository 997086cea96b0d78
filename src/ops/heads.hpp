#pragma once
// The heads copy (shaders/heads.comp) for other ops' lowerings.
#include <cstdint>

#include "lowering.hpp"

namespace vkformer::ops {

// out [B, S, H·D] = x [B, H, S, D] with each row's heads side by side (Graph::concat_heads).
void emit_concat_heads(Lowering& l, uint32_t x, uint32_t out);

}  // namespace vkformer::ops
