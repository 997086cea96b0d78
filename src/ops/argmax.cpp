// argmax: greedy decoding's choice of the next token on the device (shaders/argmax.comp), so that
// a decoded token reads back 16 bytes instead of its whole row of logits (Gemma 3: 1 MiB, then
// copied twice more on the host), with what the host needs to refuse NaN or infinite logits.
#include <cstdint>
#include <string>

#include "op_common.hpp"
#include "windows.hpp"

namespace vkformer {

using kernels::Kernel;

namespace {

struct ArgmaxPush {
  uint32_t rows, n;
};
static_assert(sizeof(ArgmaxPush) <= 128);

// Invocations per row: enough to stream a row at full width on a GPU; a power of two (the
// shader's reduction tree).
constexpr uint32_t kArgmaxWorkgroup = 256;

void lower_argmax(Lowering& l) {
  const ValueDesc& x = l.value(l.input(0));
  const uint64_t n = static_cast<uint64_t>(x.shape[x.shape.rank() - 1]);
  const uint64_t rows = static_cast<uint64_t>(x.shape.numel()) / n;
  ops::for_row_windows(l, rows, {{l.input(0)}, {l.output(), true}},
                       {{0, dtype_size(x.dtype) * n}, {1, 4 * sizeof(int32_t)}},
                       l.node().label + ": rows of " + std::to_string(n),
                       [&](const ops::Span& s, std::vector<Binding> bindings) {
                         const ArgmaxPush p{static_cast<uint32_t>(s.count), static_cast<uint32_t>(n)};
                         l.dispatch(Kernel::argmax, x.dtype, std::move(bindings), PushBlock::of(p),
                                    l.rows_grid(s.count), {kArgmaxWorkgroup});
                       });
}

}  // namespace

Tensor Graph::argmax(Tensor x) {
  const std::string op = "argmax";
  ops::require_float(impl(), op, "x", x);
  ops::require_rank(impl(), op, "x", x, 1, 4);
  const int64_t n = x.shape[x.shape.rank() - 1];
  // Indices and -1 must fit an i32.
  if (n < 1 || n > INT32_MAX || static_cast<uint64_t>(x.shape.numel()) > UINT32_MAX)
    shape_error(impl().label(op), "x is " + describe(x) + ": needs rows of 1 to 2^31 - 1 entries, 2^32 in all");
  return impl().add_node(OpKind::argmax, op, {x.id}, std::monostate{}, Shape{x.shape.numel() / n, 4}, DType::i32);
}

void register_argmax_ops(OpRegistry& r) { r.add(OpKind::argmax, lower_argmax); }

}  // namespace vkformer
