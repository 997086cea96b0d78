// matmul/linear with a weight stored in another dtype than the activations: quantized ggml
// blocks (vkformer/quant_types.def), bf16, or f16 weights under f32 activations (and
// f32 under f16).
// The weight is always linear's [N, K] (transposed b), so its batch folds into M; which kernel
// reads its rows, dequantizing as it goes, the weight list of the matmul path table says
// (src/kernels/matmul_paths_weights.cpp). Here: the shapes, and windows where a tensor exceeds a
// binding.
#include <algorithm>

#include "matmul.hpp"
#include "op_common.hpp"
#include "windows.hpp"

namespace vkformer::ops {

namespace {

// One product of the windows: its push block and operands (a, b, bias or a, out).
struct WeightWindow {
  kernels::MatmulPush push;
  std::vector<Binding> operands;
};

}  // namespace

bool emit_matmul_weights(Lowering& l, const MatmulCall& c, bool fusing) {
  const ValueDesc& a = l.value(c.a);
  const ValueDesc& b = l.value(c.b);
  const ValueDesc& o = l.value(c.out);
  const DType act = a.dtype, w = b.dtype;
  auto bug = [&](const std::string& what) {
    throw Error(ErrorCode::internal, l.node().label + ": emit_matmul_weights: " + what);
  };
  if (!is_float(act) || o.dtype != act || !is_weight_type(w) || w == act)
    bug("dtypes a " + std::string(dtype_name(act)) + ", b " + std::string(dtype_name(w)) +
        ", out " + std::string(dtype_name(o.dtype)));
  if (!c.transpose_b || b.shape.rank() != 2 || a.shape.rank() < 2 || b.shape[1] != a.shape[-1])
    bug("b " + b.shape.str() + " is not a transposed [N, K] weight for a " + a.shape.str());
  const uint64_t k = static_cast<uint64_t>(b.shape[1]), n = static_cast<uint64_t>(b.shape[0]);
  const uint64_t m = static_cast<uint64_t>(a.shape.numel()) / k;
  if (is_quantized(w) && k % dtype_block_elements(w))
    bug("K " + std::to_string(k) + " is not whole blocks");
  if (o.shape.numel() != static_cast<int64_t>(m * n))
    bug("out is " + o.shape.str() + " for " + std::to_string(m) + " x " + std::to_string(n));

  const kernels::MatmulPush p = weight_push(m, n, k, c.alpha);
  const std::vector<Binding> whole = {
      {c.a}, {c.b}, {c.bias != kNoValue ? c.bias : c.a}, {c.out, true}};
  const uint64_t limit = l.tuning().max_binding_bytes;
  std::vector<WeightWindow> windows;
  if (a.bytes() <= limit && b.bytes() <= limit && o.bytes() <= limit) windows.push_back({p, whole});
  // Windows (src/ops/windows.hpp): rows of a (and out), and rows of the weight, whose bytes are
  // whole blocks, with the matching columns of out and elements of bias.
  const uint64_t es = dtype_size(act), row_bytes = dtype_bytes(w, static_cast<int64_t>(k));
  const uint64_t align = window_alignment(l.info());
  const std::string& what = l.node().label;
  const std::vector<Span> n_spans =
      !windows.empty() || b.bytes() <= limit
          ? std::vector<Span>{{0, n}}
          : split_spans(n, {row_bytes, es}, limit, align, what + ": rows of the weight");
  const std::vector<Span> m_spans = !windows.empty() ? std::vector<Span>{}
                                                     : split_spans(m, {k * es, n * es}, limit, align, what + ": rows of x");
  for (const Span& ms : m_spans)
    for (const Span& ns : n_spans) {
      std::vector<Binding> ops = whole;
      if (m_spans.size() > 1) ops[0] = window(c.a, false, ms.first * k * es, ms.count * k * es);
      if (n_spans.size() > 1) {
        // Whole words (the kernels load 32 bits), within the weight's bytes.
        const uint64_t first = ns.first * row_bytes;
        ops[1] = window(c.b, false, first,
                        std::min((ns.count * row_bytes + 3) / 4 * 4, b.bytes() - first));
        if (c.bias != kNoValue) ops[2] = window(c.bias, false, ns.first * es, ns.count * es);
      }
      ops[3] = window(c.out, true, (ms.first * n + ns.first) * es,
                      ((ms.count - 1) * n + ns.count) * es);
      if (c.bias == kNoValue) ops[2] = ops[0];
      kernels::MatmulPush q = p;
      q.m = static_cast<uint32_t>(ms.count);
      q.n = static_cast<uint32_t>(ns.count);
      windows.push_back({q, std::move(ops)});
    }
  // With fusions, every window's kernel must take them, or nothing is emitted.
  if (fusing)
    for (const WeightWindow& w : windows)
      if (!matmul_path_fuses(l, c, w.push, 1, w.operands)) return false;
  for (const WeightWindow& w : windows) emit_matmul_path(l, c, w.push, 1, w.operands);
  return true;
}

}  // namespace vkformer::ops
