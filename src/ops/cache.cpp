// KV-cache writes: update_cache appends rows to a persistent device tensor at a position read at
// run time, so a decoder step graph is recorded once and replayed for every token.
#include "op_common.hpp"
#include "windows.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace {

struct UpdateCachePush {
  uint32_t total, n, t, d, heads;
  uint32_t stride_b, stride_h, stride_i, offset;
  uint32_t bh_base;  // the first (b, h) of the cache's window
};

void lower_update_cache(Lowering& l) {
  const auto& a = attrs<UpdateCacheAttrs>(l);
  const ValueDesc& cache = l.value(l.input(0));
  const Shape& rows = l.value(l.input(1)).shape;  // [B, H, n, D], or packed [B, n, C]
  const int64_t H = cache.shape[1], T = cache.shape[2], D = cache.shape[3];
  const int64_t n = a.packed ? rows[1] : rows[2];
  UpdateCachePush p{};
  p.total = static_cast<uint32_t>(cache.shape[0] * H * n * D);
  p.n = static_cast<uint32_t>(n);
  p.t = static_cast<uint32_t>(T);
  p.d = static_cast<uint32_t>(D);
  p.heads = static_cast<uint32_t>(H);
  if (a.packed) {
    const int64_t C = rows[2];
    p.stride_b = static_cast<uint32_t>(n * C);
    p.stride_h = static_cast<uint32_t>(D);
    p.stride_i = static_cast<uint32_t>(C);
    p.offset = static_cast<uint32_t>(a.offset);
  } else {
    p.stride_b = static_cast<uint32_t>(H * n * D);
    p.stride_h = static_cast<uint32_t>(n * D);
    p.stride_i = static_cast<uint32_t>(D);
  }
  l.require_index_bound(l.input(2), 0, T - n + 1,
                        "the position of " + std::to_string(n) + " new row(s) in a cache of " +
                            std::to_string(T) + " rows");
  // A cache beyond one binding: windows of whole (b, h) slices of T rows.
  const uint64_t slice = static_cast<uint64_t>(T * D) * dtype_size(cache.dtype);
  const std::vector<ops::Span> spans =
      ops::split_spans(static_cast<uint64_t>(cache.shape[0] * H), {slice},
                       l.tuning().max_binding_bytes, ops::window_alignment(l.info()),
                       l.node().label + ": (batch, head) slices of the cache");
  for (const ops::Span& s : spans) {
    p.total = static_cast<uint32_t>(s.count * n * D);
    p.bh_base = static_cast<uint32_t>(s.first);
    Binding out{l.output(), true};
    if (spans.size() > 1) out = ops::window(l.output(), true, s.first * slice, s.count * slice);
    l.dispatch(Kernel::update_cache, cache.dtype, {{l.input(1)}, {l.input(2)}, out},
               PushBlock::of(p), ops::elementwise_grid(l, p.total), {ops::kElementwiseWorkgroup});
  }
}

}  // namespace

Tensor Graph::update_cache(Tensor cache, Tensor rows, Tensor position) {
  const std::string op = "update_cache";
  ops::require_rank(impl(), op, "cache", cache, 4, 4);
  ops::require_rank(impl(), op, "rows", rows, 4, 4);
  ops::require_float(impl(), op, "rows", rows);
  ops::require_dtype(impl(), op, "position", position, DType::i32);
  if (!impl().externals.count(cache.id))
    shape_error(impl().label(op), "cache must be a tensor made by Graph::external");
  if (position.shape.numel() != 1)
    shape_error(impl().label(op), "position must hold one value, got " + describe(position));
  if (rows.dtype != cache.dtype || rows.shape[0] != cache.shape[0] ||
      rows.shape[1] != cache.shape[1] || rows.shape[3] != cache.shape[3] ||
      rows.shape[2] > cache.shape[2])
    shape_error(impl().label(op), "rows " + describe(rows) + " do not fit cache " + describe(cache) +
                                      " (expected [B, H, n <= T, D] of the cache's dtype)");
  return impl().add_node(OpKind::update_cache, op, {cache.id, rows.id, position.id},
                         UpdateCacheAttrs{}, cache.shape, cache.dtype);
}

void register_cache_ops(OpRegistry& r) { r.add(OpKind::update_cache, lower_update_cache); }

}  // namespace vkformer
