// embedding (table lookup) and positional_encoding (the sinusoidal table of "Attention Is All
// You Need", as PyTorch's transformer tutorial computes it).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "op_common.hpp"
#include "windows.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace {

// Offsets, table rows and sequence lengths stay below this so the shader's i32 position
// arithmetic (offset + run-time offset + s, each clamped first) cannot overflow.
constexpr int64_t kMaxPositions = int64_t{1} << 29;

struct EmbeddingPush {
  uint32_t n;      // tokens * D, in units of the kernel's vector width
  uint32_t d;      // D, in the same units
  uint32_t vocab;  // V
  uint32_t first;  // the table's rows bound by this dispatch: [first, first + count)
  uint32_t count;
};

struct PositionalEncodingPush {
  uint32_t n;
  uint32_t d;
  uint32_t s;
  uint32_t rows;   // rows of the table
  int32_t base;    // the static offset, added to the run-time one
  float scale;
};

// The kernel for a table in a weight dtype (bf16 or ggml blocks), dequantizing as it copies.
Kernel weight_table_kernel(Lowering& l, DType table) {
  if (const std::optional<Kernel> k = kernels::weight_kernel(kernels::WeightKernel::embedding_wq, table))
    return *k;
  throw Error(ErrorCode::internal, l.node().label + ": no embedding kernel for tables in " +
                                       std::string(dtype_name(table)));
}

void lower_embedding(Lowering& l) {
  const uint32_t ids = l.input(0), table = l.input(1);
  const DType dtype = l.value(table).dtype, out_dtype = l.value(l.output()).dtype;
  const int64_t vocab = l.value(table).shape[0], d = l.value(table).shape[1];
  // Ids that come from a graph input are checked when they are set, so a bad id is an error
  // naming the input; any other ids rely on the shader's clamp.
  l.require_index_bound(ids, 0, vocab, "an id of a table of " + std::to_string(vocab) + " rows");

  // A weight-dtype table is read in groups of 4 (a quantized row is whole blocks) or elements.
  const bool weights = !is_float(dtype);
  const bool vec4 = weights ? is_quantized(dtype) : d % 4 == 0;
  const int64_t w = vec4 ? 4 : 1;
  const int64_t tokens = l.value(ids).shape.numel();
  const Kernel kernel = weights ? weight_table_kernel(l, dtype)
                                : vec4 ? Kernel::embedding_vec4 : Kernel::embedding;
  // Tables and outputs beyond one binding: windows of tokens (ids and out) times windows of
  // table rows; every token span visits every row span.
  const uint64_t row_bytes = dtype_bytes(dtype, d);
  const uint64_t out_row_bytes = static_cast<uint64_t>(d) * dtype_size(out_dtype);
  const uint64_t limit = l.tuning().max_binding_bytes, align = ops::window_alignment(l.info());
  const std::string& what = l.node().label;
  const std::vector<ops::Span> token_spans =
      ops::split_spans(tokens, {4, out_row_bytes}, limit, align, what + ": tokens");
  const std::vector<ops::Span> row_spans =
      ops::split_spans(vocab, {row_bytes}, limit, align, what + ": rows of the table");
  for (const ops::Span& ts : token_spans)
    for (const ops::Span& rs : row_spans) {
      // The weight kernels take D in elements.
      EmbeddingPush p{static_cast<uint32_t>(ts.count * d / w),
                      static_cast<uint32_t>(weights ? d : d / w),
                      static_cast<uint32_t>(vocab), static_cast<uint32_t>(rs.first),
                      static_cast<uint32_t>(rs.count)};
      std::vector<Binding> bindings = {{ids}, {table}, {l.output(), true}};
      if (token_spans.size() > 1) {
        bindings[0] = ops::window(ids, false, ts.first * 4, ts.count * 4);
        bindings[2] = ops::window(l.output(), true, ts.first * out_row_bytes,
                                  ts.count * out_row_bytes);
      }
      if (row_spans.size() > 1)
        // Whole words (weights.glsl loads 32 bits), within the table's bytes.
        bindings[1] = ops::window(table, false, rs.first * row_bytes,
                                  std::min((rs.count * row_bytes + 3) / 4 * 4,
                                           l.value(table).bytes() - rs.first * row_bytes));
      bindings[1].read_bytes = std::min(ts.count, rs.count) * row_bytes;  // a row per id at most
      l.dispatch(kernel, out_dtype, bindings, PushBlock::of(p), ops::elementwise_grid(l, p.n),
                 {ops::kElementwiseWorkgroup});
    }
}

// Rows [first, first + rows) of the sinusoidal table for width d, in f32:
//   pe[pos, 2i] = sin(pos * div_term[i]), pe[pos, 2i + 1] = cos(pos * div_term[i]),
//   div_term = exp(arange(0, d, 2) * (-ln(10000) / d)).
// Computed here rather than in the shader, with PyTorch's float32 arithmetic:
// - GLSL's sin/cos are only specified to about 2^-11 absolute error (and GPUs do that badly for
//   large arguments), far from the ~1e-7 a float32 table has.
// - What a model trained with PyTorch saw is PyTorch's table, and its dominant error is the
//   rounding of div_term and of the angle pos * div_term to float32 (for pos ~ 5000 that moves
//   the angle by ~5e-4). So div_term and the angle are computed and rounded in float32 exactly
//   as torch does (int64 arange and the Python scalar converted to float32, float32 products).
//   exp, sin and cos of those float arguments are evaluated in double and rounded to float:
//   correctly rounded, where PyTorch's vectorized expf/sinf/cosf are within 1 ulp of that.
// For odd d the last column is a sine with no cosine partner (PyTorch's tutorial code needs an
// even d_model).
HostTensor sinusoid_table(int64_t first, int64_t rows, int64_t d) {
  const float c = static_cast<float>(-std::log(10000.0) / static_cast<double>(d));
  std::vector<float> div_term((d + 1) / 2);
  for (int64_t i = 0; i < static_cast<int64_t>(div_term.size()); ++i) {
    float arg = static_cast<float>(2 * i) * c;  // float32 product, as torch's mul
    div_term[i] = static_cast<float>(std::exp(static_cast<double>(arg)));
  }
  std::vector<float> pe(static_cast<size_t>(rows * d));
  for (int64_t r = 0; r < rows; ++r) {
    const float pos = static_cast<float>(first + r);
    float* row = pe.data() + r * d;
    for (int64_t i = 0; i < static_cast<int64_t>(div_term.size()); ++i) {
      const float angle = pos * div_term[i];  // float32 product, as torch's position * div_term
      row[2 * i] = static_cast<float>(std::sin(static_cast<double>(angle)));
      if (2 * i + 1 < d) row[2 * i + 1] = static_cast<float>(std::cos(static_cast<double>(angle)));
    }
  }
  return HostTensor::from_f32(Shape{rows, d}, pe);
}

void lower_positional_encoding(Lowering& l) {
  const auto& a = attrs<PositionalEncodingAttrs>(l);
  // Copies, not references: Lowering::constant() below grows the value table.
  const Shape shape = l.value(l.input(0)).shape;
  const DType dtype = l.value(l.input(0)).dtype;
  const int64_t d = shape.back(), s = shape[-2];
  PositionalEncodingPush p{};
  p.n = static_cast<uint32_t>(shape.numel());
  p.d = static_cast<uint32_t>(d);
  p.s = static_cast<uint32_t>(s);
  p.scale = a.input_scale;
  uint32_t table, offset_binding;
  if (a.has_offset_tensor) {
    // The run-time offset can point anywhere: the whole table, clamped in the shader.
    table = l.constant(sinusoid_table(0, a.max_len, d));
    offset_binding = l.input(1);
    // 0 <= offset + offset_tensor[0] and offset + offset_tensor[0] + S <= max_len: a graph input
    // (or constant) is checked, a value computed on the device is clamped.
    l.require_index_bound(l.input(1), -a.offset, a.max_len - a.offset - s + 1,
                          "offset " + std::to_string(a.offset) + " + offset_tensor + " + std::to_string(s) +
                              " rows must stay within the table's positions [0, " +
                              std::to_string(a.max_len) + "]");
    p.rows = static_cast<uint32_t>(a.max_len);
    p.base = static_cast<int32_t>(a.offset);
  } else {
    // Only the rows this graph reads; the static offset is folded into the table.
    table = l.constant(sinusoid_table(a.offset, s, d));
    offset_binding = table;  // not read (DYNAMIC = 0), but every binding needs a buffer
    p.rows = static_cast<uint32_t>(s);
    p.base = 0;
  }
  l.dispatch(Kernel::positional_encoding, dtype,
             {{l.input(0)}, {table}, {offset_binding}, {l.output(), true}}, PushBlock::of(p),
             ops::elementwise_grid(l, p.n),
             {ops::kElementwiseWorkgroup, a.has_offset_tensor ? 1u : 0u});
}

}  // namespace

Tensor Graph::embedding(Tensor ids, Tensor table) {
  const std::string op = "embedding";
  ops::require_dtype(impl(), op, "ids", ids, DType::i32);
  ops::require_rank(impl(), op, "ids", ids, 1, 3);
  impl().check(table, op, "table");
  if (!is_weight_type(table.dtype))
    shape_error(impl().label(op), "table must be " + std::string(weight_type_names()) + ", got " +
                                      describe(table));
  ops::require_rank(impl(), op, "table", table, 2, 2);
  if (is_quantized(table.dtype) && table.shape[1] % dtype_block_elements(table.dtype) != 0)
    shape_error(impl().label(op), "table is " + describe(table) + ": its rows must be whole " +
                                      "blocks of " + std::to_string(dtype_block_elements(table.dtype)) +
                                      " elements");
  if (table.shape[0] > INT32_MAX)
    shape_error(impl().label(op), "table is " + describe(table) +
                                      ": more rows than i32 ids can address");
  std::vector<int64_t> out = ids.shape.dims();
  out.push_back(table.shape[1]);
  // A bf16 or quantized table gives f32 rows.
  return impl().add_node(OpKind::embedding, op, {ids.id, table.id}, {}, Shape(out),
                         is_float(table.dtype) ? table.dtype : DType::f32);
}

// Row s of x gets position offset + s, which must lie in the table (offset + S <= max_len). With
// an offset_tensor the position is offset + offset_tensor[0] + s, read at run time: a graph input
// or constant offset_tensor must keep every row in the table (Executor::set_input checks it);
// one computed on the device is clamped to [0, max_len - 1].
Tensor Graph::positional_encoding(Tensor x, const PositionalEncodingOptions& options) {
  const std::string op = "positional_encoding";
  ops::require_float(impl(), op, "x", x);
  ops::require_rank(impl(), op, "x", x, 2, 3);
  const int64_t s = x.shape[-2];
  auto invalid = [&](const std::string& what) {
    throw Error(ErrorCode::invalid_argument, impl().label(op) + ": " + what);
  };
  if (options.max_len < 1 || options.max_len > kMaxPositions)
    invalid("max_len must be in [1, " + std::to_string(kMaxPositions) + "], got " +
            std::to_string(options.max_len));
  if (options.offset < 0) invalid("offset must be >= 0, got " + std::to_string(options.offset));
  ops::require_finite(impl(), op, "input_scale", options.input_scale);
  if (options.offset + s > options.max_len)
    shape_error(impl().label(op), "x is " + describe(x) + ": positions [" +
                                      std::to_string(options.offset) + ", " +
                                      std::to_string(options.offset + s) +
                                      ") do not fit in a table of max_len " +
                                      std::to_string(options.max_len));
  std::vector<uint32_t> inputs{x.id};
  if (options.offset_tensor) {
    ops::require_dtype(impl(), op, "offset_tensor", *options.offset_tensor, DType::i32);
    if (options.offset_tensor->shape != Shape{1})
      shape_error(impl().label(op), "offset_tensor must be [1] i32, got " +
                                        describe(*options.offset_tensor));
    inputs.push_back(options.offset_tensor->id);
  }
  PositionalEncodingAttrs attrs{options.input_scale, options.offset,
                                options.offset_tensor.has_value(), options.max_len};
  return impl().add_node(OpKind::positional_encoding, op, std::move(inputs), attrs, x.shape,
                         x.dtype);
}

void register_embedding_ops(OpRegistry& r) {
  r.add(OpKind::embedding, lower_embedding);
  r.add(OpKind::positional_encoding, lower_positional_encoding);
}

}  // namespace vkformer
