// rope: rotary position embeddings (Llama, GPT-NeoX, GPT-J) on [.., S, D] rows, in the
// interleaved (GGUF "normal") or neox pairing, with a static and a run-time position offset.
#include <cmath>
#include <string>
#include <vector>

#include "op_common.hpp"
#include "rope.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

using ops::kMaxPosition;

namespace {

struct RopePush {
  uint32_t n;
  uint32_t per_row;
  uint32_t d;
  uint32_t half_dims;
  uint32_t s;
  int32_t base;
};

void lower_rope(Lowering& l) {
  const RopeAttrs a = attrs<RopeAttrs>(l);  // a copy: constant() below grows the value table
  const Shape shape = l.value(l.input(0)).shape;
  const DType dtype = l.value(l.input(0)).dtype;
  const int64_t d = shape.back(), s = shape[-2], rows = shape.numel() / d;
  const uint32_t table = l.constant(ops::rope_inv_freq(a.dims, a.freq_base, a.freq_scale, a.freq_factors));
  RopePush p{};
  p.per_row = static_cast<uint32_t>(d - a.dims / 2);
  p.n = static_cast<uint32_t>(rows * p.per_row);
  p.d = static_cast<uint32_t>(d);
  p.half_dims = static_cast<uint32_t>(a.dims / 2);
  p.s = static_cast<uint32_t>(s);
  p.base = static_cast<int32_t>(a.offset);
  uint32_t offset_binding = table;  // not read without a run-time offset (DYNAMIC = 0)
  if (a.has_offset_tensor) {
    offset_binding = l.input(1);
    // 0 <= offset + offset_tensor[0] and offset + offset_tensor[0] + S <= 2^24: a graph input
    // (or constant) is checked, a value computed on the device is clamped in the shader.
    l.require_index_bound(l.input(1), -a.offset, kMaxPosition - a.offset - s + 1,
                          "offset " + std::to_string(a.offset) + " + offset_tensor + " +
                              std::to_string(s) + " rows must keep positions within [0, 2^24]");
  }
  l.dispatch(Kernel::rope, dtype, {{l.input(0)}, {table}, {offset_binding}, {l.output(), true}},
             PushBlock::of(p), ops::elementwise_grid(l, p.n),
             {ops::kElementwiseWorkgroup, a.style == RopeOptions::Style::neox ? 1u : 0u,
              a.has_offset_tensor ? 1u : 0u});
}

}  // namespace

Tensor Graph::rope(Tensor x, const RopeOptions& options) {
  const std::string op = "rope";
  ops::require_float(impl(), op, "x", x);
  ops::require_rank(impl(), op, "x", x, 2, 4);
  const int64_t d = x.shape.back(), s = x.shape[-2];
  const int64_t dims = ops::check_rope(impl(), op, "x is " + describe(x), d, s, options);
  if (static_cast<uint64_t>(x.shape.numel()) > UINT32_MAX)
    shape_error(impl().label(op), "x is " + describe(x) + ": more than 2^32 elements");
  std::vector<uint32_t> inputs{x.id};
  if (options.offset_tensor) {
    ops::require_dtype(impl(), op, "offset_tensor", *options.offset_tensor, DType::i32);
    if (options.offset_tensor->shape.numel() != 1)
      shape_error(impl().label(op), "offset_tensor must hold one i32 value ([1]), got " +
                                        describe(*options.offset_tensor));
    inputs.push_back(options.offset_tensor->id);
  }
  RopeAttrs attrs{options.style, dims,          options.freq_base,
                  options.freq_scale, options.freq_factors, options.offset,
                  options.offset_tensor.has_value()};
  return impl().add_node(OpKind::rope, op, std::move(inputs), attrs, x.shape, x.dtype);
}

void register_rope_ops(OpRegistry& r) { r.add(OpKind::rope, lower_rope); }

namespace ops {

HostTensor rope_inv_freq(int64_t dims, double freq_base, double freq_scale,
                         const std::vector<float>& freq_factors) {
  std::vector<float> f(static_cast<size_t>(dims / 2));
  for (int64_t i = 0; i < dims / 2; ++i) {
    double inv = std::pow(freq_base, -2.0 * static_cast<double>(i) / static_cast<double>(dims)) * freq_scale;
    if (!freq_factors.empty()) inv /= static_cast<double>(freq_factors[static_cast<size_t>(i)]);
    f[i] = static_cast<float>(inv);
  }
  return HostTensor::from_f32(Shape{dims / 2}, f);
}

int64_t check_rope(const GraphImpl& g, const std::string& op, const std::string& x, int64_t d,
                   int64_t s, const RopeOptions& options) {
  const int64_t dims = options.dims < 0 ? d : options.dims;
  auto invalid = [&](const std::string& what) {
    throw Error(ErrorCode::invalid_argument, g.label(op) + ": " + what);
  };
  if (options.style != RopeOptions::Style::interleaved && options.style != RopeOptions::Style::neox)
    invalid("unknown style " + std::to_string(static_cast<int>(options.style)));
  if (dims < 2 || dims % 2 != 0 || dims > d)
    shape_error(g.label(op), x + ": dims must be even and in [2, " + std::to_string(d) +
                                 "] (the head dim), got " + std::to_string(options.dims));
  if (!std::isfinite(options.freq_base) || !(options.freq_base > 1.0))
    invalid("freq_base must be a finite number > 1, got " + std::to_string(options.freq_base));
  if (!std::isfinite(options.freq_scale) || !(options.freq_scale > 0.0))
    invalid("freq_scale must be a finite number > 0, got " + std::to_string(options.freq_scale));
  if (!options.freq_factors.empty()) {
    if (static_cast<int64_t>(options.freq_factors.size()) != dims / 2)
      invalid("freq_factors has " + std::to_string(options.freq_factors.size()) + " values, expected dims / 2 = " +
              std::to_string(dims / 2) + " (or none)");
    for (size_t i = 0; i < options.freq_factors.size(); ++i)
      if (!std::isfinite(options.freq_factors[i]) || !(options.freq_factors[i] > 0.0f))
        invalid("freq_factors[" + std::to_string(i) + "] is " + std::to_string(options.freq_factors[i]) +
                ", expected a finite number > 0");
  }
  if (options.offset < 0 || options.offset + s > kMaxPosition)
    invalid("positions [offset, offset + S) = [" + std::to_string(options.offset) + ", " +
            std::to_string(options.offset + s) + ") must lie in [0, 2^24]");
  return dims;
}

}  // namespace ops

}  // namespace vkformer
