// split_heads and concat_heads: copies between [B, S, C] and the head-major [B, H, S, D].
#include "op_common.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace {

struct HeadsPush {
  uint32_t n;       // elements of the head-major side, in units of the kernel's vector width
  uint32_t d;       // head width
  uint32_t s;       // sequence length
  uint32_t h;       // heads
  uint32_t c;       // row length of the packed [B, S, C] side
  uint32_t offset;  // first column of head 0 in a packed row
};

// One copy kernel serves both directions. The packed side is [B, S, C] with the heads' columns
// starting at `offset`; when D, C and offset are multiples of 4 the vec4 variant moves 4
// elements per invocation and every size is passed in units of 4.
void lower_heads_copy(Lowering& l, int64_t B, int64_t H, int64_t S, int64_t D, int64_t C,
                      int64_t offset, bool concat) {
  const DType dtype = l.value(l.input(0)).dtype;
  const bool vec4 = D % 4 == 0 && C % 4 == 0 && offset % 4 == 0;
  const int64_t w = vec4 ? 4 : 1;
  HeadsPush p{};
  p.n = static_cast<uint32_t>(B * H * S * D / w);
  p.d = static_cast<uint32_t>(D / w);
  p.s = static_cast<uint32_t>(S);
  p.h = static_cast<uint32_t>(H);
  p.c = static_cast<uint32_t>(C / w);
  p.offset = static_cast<uint32_t>(offset / w);
  l.dispatch(vec4 ? Kernel::heads_vec4 : Kernel::heads, dtype,
             {{l.input(0)}, {l.output(), true}}, PushBlock::of(p),
             ops::elementwise_grid(l, p.n), {ops::kElementwiseWorkgroup, concat ? 1u : 0u});
}

void lower_split_heads(Lowering& l) {
  const auto& a = attrs<SplitHeadsAttrs>(l);
  const Shape& x = l.value(l.input(0)).shape;  // [B, S, C]
  lower_heads_copy(l, x[0], a.heads, x[1], a.width / a.heads, x[2], a.offset, false);
}

void lower_concat_heads(Lowering& l) {
  const Shape& x = l.value(l.input(0)).shape;  // [B, H, S, D]
  lower_heads_copy(l, x[0], x[1], x[2], x[3], x[1] * x[3], 0, true);
}

}  // namespace

Tensor Graph::split_heads(Tensor x, int heads, int64_t width, int64_t offset) {
  const std::string op = "split_heads";
  ops::require_float(impl(), op, "x", x);
  ops::require_rank(impl(), op, "x", x, 3, 3);
  const int64_t C = x.shape[2];
  if (heads < 1)
    shape_error(impl().label(op), "heads must be at least 1, got " + std::to_string(heads));
  if (offset < 0 || offset > C)
    shape_error(impl().label(op), "x is " + describe(x) + ": offset " + std::to_string(offset) +
                                      " is outside the last dim [0, " + std::to_string(C) + "]");
  if (width == -1) width = C - offset;
  if (width <= 0)
    shape_error(impl().label(op), "x is " + describe(x) + ": width must be positive, got " +
                                      std::to_string(width));
  if (offset + width > C)
    shape_error(impl().label(op), "x is " + describe(x) + ": columns [" + std::to_string(offset) +
                                      ", " + std::to_string(offset + width) +
                                      ") do not fit in the last dim " + std::to_string(C));
  if (width % heads != 0)
    shape_error(impl().label(op), "x is " + describe(x) + ": width " + std::to_string(width) +
                                      " is not divisible by " + std::to_string(heads) + " heads");
  Shape out{x.shape[0], heads, x.shape[1], width / heads};
  return impl().add_node(OpKind::split_heads, op, {x.id}, SplitHeadsAttrs{heads, width, offset},
                         out, x.dtype);
}

Tensor Graph::concat_heads(Tensor x) {
  const std::string op = "concat_heads";
  ops::require_float(impl(), op, "x", x);
  ops::require_rank(impl(), op, "x", x, 4, 4);
  Shape out{x.shape[0], x.shape[2], x.shape[1] * x.shape[3]};
  return impl().add_node(OpKind::concat_heads, op, {x.id}, {}, out, x.dtype);
}

void register_heads_ops(OpRegistry& r) {
  r.add(OpKind::split_heads, lower_split_heads);
  r.add(OpKind::concat_heads, lower_concat_heads);
}

}  // namespace vkformer
