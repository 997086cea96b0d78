// matmul/linear with a weight stored in another dtype than the activations: quantized ggml
// blocks (vkformer/quant_types.def), bf16, or f16 weights under f32 activations (and
// f32 under f16).
// The weight is always linear's [N, K] (transposed b), so its batch folds into M and one kernel
// family per weight dtype reads its rows directly, dequantizing as it goes.
#include <algorithm>
#include <numeric>
#include <optional>

#include "matmul.hpp"
#include "op_common.hpp"
#include "windows.hpp"

namespace vkformer::ops {

using kernels::Kernel;

namespace {

// shaders/matmul_base.glsl's push block, which the weight kernels share.
using WeightMatmulPush = MatmulPush;

// Matches the push block of shaders/matmul_wq_vec.comp: the above and the norm's epsilon.
struct VecPush {
  WeightMatmulPush base;
  float eps;
};
static_assert(sizeof(VecPush) == sizeof(WeightMatmulPush) + 4);

// Matches the push block of shaders/matmul_wq_texel.comp: the above and its fusion flags.
struct TexelPush {
  WeightMatmulPush base;
  uint32_t flags;  // 1: gated pair, 2: residual
};
static_assert(sizeof(TexelPush) == sizeof(WeightMatmulPush) + 4);

WeightMatmulPush& base_push(WeightMatmulPush& p) { return p; }
WeightMatmulPush& base_push(TexelPush& p) { return p.base; }

// shaders/matmul_wq_texel.comp's QUADS: a lane's outputs in runs of 4 consecutive columns (4-wide
// stores, the residual as texels), where its TN (gated or not) and out's layout allow.
uint32_t texel_quads(uint32_t tn, const WeightMatmulPush& p, const Binding& out, DType act) {
  return tn % 8 == 0 && p.n % 4 == 0 && p.ldo % 4 == 0 &&
         out.window_offset % (4 * dtype_size(act)) == 0;
}

[[noreturn]] void bug(Lowering& l, const std::string& what) {
  throw Error(ErrorCode::internal, l.node().label + ": emit_matmul_weights: " + what);
}

// The tiled and gemv kernels read every weight dtype: one missing is a bug naming the type.
Kernel required_kernel(Lowering& l, kernels::WeightKernel family, DType w) {
  const std::optional<Kernel> k = kernels::weight_kernel(family, w);
  if (!k) bug(l, "no kernel for weights in " + std::string(dtype_name(w)));
  return *k;
}

// The cooperative-matrix kernels of a weight dtype, per API (shaders/matmul_coopmat.comp with
// WEIGHTS).
// One dispatch over [m, k]·[n, k]ᵀ into a dense [m, n]: no batch, no split of K.
WeightMatmulPush single_dispatch_push(uint64_t m, uint64_t n, uint64_t k, float alpha) {
  WeightMatmulPush p{};
  p.m = static_cast<uint32_t>(m);
  p.n = static_cast<uint32_t>(n);
  p.k = static_cast<uint32_t>(k);
  p.batch1 = 1;
  p.alpha = alpha;
  p.splits = 1;
  p.k_split = p.k;
  p.ldo = p.n;
  return p;
}

std::optional<kernels::WeightKernel> coopmat_family(vk::CoopmatApi api) {
  switch (api) {
    case vk::CoopmatApi::khr: return kernels::WeightKernel::matmul_wq_coopmat_khr;
    case vk::CoopmatApi::nv: return kernels::WeightKernel::matmul_wq_coopmat_nv;
    case vk::CoopmatApi::emulated: return kernels::WeightKernel::matmul_wq_coopmat_emu;
    case vk::CoopmatApi::none: break;
  }
  return std::nullopt;
}

// Prompt processing on cooperative matrices: the kernel for weights in w under f16 activations
// where the tuning takes cooperative matrices for an f16 product of this size (kernels::plan_matmul:
// at least one MMA tile each way, or VKFORMER_MATMUL_PATH=coopmat; only devices that report
// cooperative matrices, or VKFORMER_COOPMAT=emulate), else none.
std::optional<Kernel> coopmat_kernel(Lowering& l, DType act, DType w, const WeightMatmulPush& p) {
  const kernels::MatmulTuning& tuning = l.tuning().matmul;
  const std::optional<kernels::WeightKernel> family = coopmat_family(tuning.coopmat_tiles.api);
  if (act != DType::f16 || !family) return std::nullopt;
  const std::optional<Kernel> kernel = kernels::weight_kernel(*family, w);
  if (!kernel || !l.supported(*kernel, act)) return std::nullopt;
  kernels::MatmulProblem problem;
  problem.m = p.m;
  problem.n = p.n;
  problem.k = p.k;
  problem.transpose_b = true;
  problem.dtype = act;
  kernels::MatmulKernels can;
  can.coopmat = true;
  if (kernels::plan_matmul(tuning, problem, can).path != kernels::MatmulPath::coopmat) return std::nullopt;
  return kernel;
}

// Dispatches x * y workgroups, several dispatches where y exceeds the device's grid (rows of
// M on small tiles); the kernels add y_base.
template <typename Push>
void dispatch_rows(Lowering& l, Kernel kernel, DType dtype, const std::vector<Binding>& bindings,
                   Push p, uint64_t x, uint64_t y, const std::vector<uint32_t>& spec) {
  const uint64_t max_y = std::max<uint32_t>(l.info().max_workgroup_count[1], 1);
  for (uint64_t y0 = 0; y0 < y; y0 += max_y) {
    base_push(p).y_base = static_cast<uint32_t>(y0);
    l.dispatch(kernel, dtype, bindings, PushBlock::of(p), l.grid(x, std::min(max_y, y - y0), 1),
               spec);
  }
}

// Whether the texel kernel takes this product: the tuning prefers it, nothing forces the
// storage-buffer paths, and a (4-element texels) and w (32-bit words) fit the device's texel
// views; otherwise the storage-buffer kernels run it.
bool use_texel(Lowering& l, DType act, Kernel kernel, const std::vector<Binding>& operands) {
  const kernels::MatmulTuning& tuning = l.tuning().matmul;
  const std::optional<kernels::MatmulPath> forced = tuning.forced_path;
  if (!tuning.weight_tiles.texel || tuning.texel_tiles.subgroup == 0 || !l.supported(kernel, act))
    return false;
  if (forced && *forced != kernels::MatmulPath::texel) return false;
  uint64_t texels = l.info().max_texel_buffer_elements;
  if (tuning.weight_tiles.texel_limit) texels = std::min(texels, tuning.weight_tiles.texel_limit);
  // matmul_wq_texel.comp's residual, read as 16-byte texels of its bytes like w.
  if (operands.size() > 4 && (operands[4].bytes(l.value(operands[4].value)) + 15) / 16 > texels)
    return false;
  return operands[0].bytes(l.value(operands[0].value)) / (4 * dtype_size(act)) <= texels &&
         (operands[1].bytes(l.value(operands[1].value)) + 15) / 16 <= texels;
}

// The mat-vec of one row (M = 1), fusions included; operands are a, w, bias, out, residual, gamma
// (absent ones bound to a). Weights from texel_gemv_stream_bytes (all, by default) stream through
// shaders/matmul_wq_rows.comp (lanes on consecutive blocks: one stream per workgroup) where its
// rounds keep few enough x blocks per lane; others take shaders/matmul_wq_vec.comp (lanes on
// rows, texel_gemv_tn of them). See kernels::MatmulWeightTiles.
void emit_vec(Lowering& l, const MatmulCall& c, Kernel kernel, DType act,
              const std::vector<Binding>& operands, const WeightMatmulPush& p) {
  const uint32_t sg = l.tuning().matmul.texel_tiles.subgroup;
  const kernels::MatmulWeightTiles& t = l.tuning().matmul.weight_tiles;
  if (sg == 0 || sg > l.info().max_workgroup_size[0]) bug(l, "mat-vec on " + std::to_string(sg) + " lanes");
  const VecPush v{p, c.norm_eps};
  const uint32_t has_bias = c.bias != kNoValue ? 1u : 0u, activation = static_cast<uint32_t>(c.activation),
                 gated = c.gated ? 1u : 0u, residual = c.residual != kNoValue ? 1u : 0u,
                 norm = c.norm != kNoValue ? 1u : 0u;
  const DType w = l.value(operands[1].value).dtype;
  const bool streamed = operands[1].bytes(l.value(operands[1].value)) >= t.texel_gemv_stream_bytes;
  // Rows kernel: R = sg / gcd(KB, sg) rows per group make its rounds of sg blocks whole (a gated
  // group needs pairs of gate and up rows); each lane keeps x's block of every round.
  const uint32_t kb = p.k / 32;
  uint32_t r = sg / std::gcd(kb, sg);
  if (c.gated && r % 2) r *= 2;
  const uint64_t rounds = (uint64_t(r) * kb + sg - 1) / sg;
  const std::optional<Kernel> rows = kernels::weight_kernel(kernels::WeightKernel::matmul_wq_rows, w);
  if (streamed && rows && rounds <= t.texel_rows_max_rounds && l.supported(*rows, act)) {
    const uint32_t outputs = c.gated ? r / 2 : r;
    const uint64_t groups = ceil_div(p.n, outputs);
    // Enough groups per workgroup to share its x blocks, and workgroups for every thread.
    const uint64_t iter = std::clamp<uint64_t>(groups / t.texel_rows_workgroups, 1, 16);
    l.dispatch(*rows, act, operands, PushBlock::of(v), l.grid(ceil_div(groups, iter), 1, 1),
               {sg, kb, r, static_cast<uint32_t>(iter), has_bias, activation, gated, residual, norm});
    return;
  }
  uint32_t tn = t.texel_gemv_tn;
  if (c.gated) tn += tn % 2;  // as many up rows as gate rows
  const uint32_t columns = c.gated ? tn / 2 : tn;
  if (tn == 0) bug(l, "mat-vec tiling of 0 rows per lane");
  l.dispatch(kernel, act, operands, PushBlock::of(v), l.grid(ceil_div(p.n, uint64_t(sg) * columns), 1, 1),
             {sg, tn, has_bias, activation, gated, residual, norm});
}

// One product of p.m x p.n with `operands` (a, w, bias or a, out) bound whole or as windows.
void emit_one(Lowering& l, const MatmulCall& c, DType act, DType w,
              const std::vector<Binding>& operands, const WeightMatmulPush& p) {
  const kernels::MatmulWeightTiles& t = l.tuning().matmul.weight_tiles;
  const DeviceInfo& info = l.info();
  const uint32_t has_bias = c.bias != kNoValue ? 1u : 0u;
  const uint32_t activation = static_cast<uint32_t>(c.activation);
  if (const std::optional<Kernel> vec = kernels::weight_kernel(kernels::WeightKernel::matmul_wq_vec, w);
      vec && p.m == 1 && use_texel(l, act, *vec, operands)) {
    std::vector<Binding> six = operands;
    six.push_back(operands[0]);
    six.push_back(operands[0]);
    emit_vec(l, c, *vec, act, six, p);
    return;
  }
  if (const std::optional<Kernel> coopmat = coopmat_kernel(l, act, w, p)) {
    emit_coopmat(l, *coopmat, c, act, 1, operands, p);
    return;
  }
  if (const std::optional<Kernel> texel = kernels::weight_kernel(kernels::WeightKernel::matmul_wq_texel, w); texel && use_texel(l, act, *texel, operands)) {
    const uint32_t sg = l.tuning().matmul.texel_tiles.subgroup;
    const uint32_t tm = p.m == 1 ? 1 : std::min(t.texel_tm, p.m);
    const uint32_t tn = p.m == 1 ? t.texel_gemv_tn : t.texel_tn;
    if (sg == 0 || tm == 0 || tn == 0 || sg > info.max_workgroup_size[0])
      bug(l, "texel tiling " + std::to_string(tm) + "x" + std::to_string(tn) + " on " +
                 std::to_string(sg) + " lanes");
    std::vector<Binding> five = operands;
    five.push_back(operands[0]);  // no residual
    dispatch_rows(l, *texel, act, five, TexelPush{p, 0}, ceil_div(p.n, uint64_t(sg) * tn),
                  ceil_div(p.m, tm),
                  {sg, tm, tn, has_bias, activation, texel_quads(tn, p, operands[3], act)});
    return;
  }
  const Kernel gemv = required_kernel(l, kernels::WeightKernel::matmul_wq_gemv, w);
  if (p.m <= t.gemv_max_m && l.supported(gemv, act)) {
    uint32_t wg = std::min<uint32_t>({t.gemv_workgroup, info.max_workgroup_invocations,
                                      info.max_workgroup_size[0]});
    const uint32_t lanes = t.gemv_lanes;
    if (lanes == 0 || (lanes & (lanes - 1)) || wg < lanes || wg % lanes ||
        uint64_t(wg) * 4 > info.shared_memory_bytes)
      bug(l, "gemv tiling " + std::to_string(wg) + " invocations / " + std::to_string(lanes) +
                 " lanes");
    dispatch_rows(l, gemv, act, operands, p, ceil_div(p.n, wg / lanes), p.m,
                  {wg, lanes, has_bias, activation});
    return;
  }
  if (t.tm == 0 || t.tn == 0 || t.bm % t.tm || t.bn % t.tn || t.invocations() == 0 ||
      t.invocations() > info.max_workgroup_invocations ||
      t.invocations() > info.max_workgroup_size[0] || t.shared_bytes() > info.shared_memory_bytes)
    bug(l, "tiling " + std::to_string(t.bm) + "x" + std::to_string(t.bn) + "/" +
               std::to_string(t.tm) + "x" + std::to_string(t.tn));
  dispatch_rows(l, required_kernel(l, kernels::WeightKernel::matmul_wq, w), act, operands, p, ceil_div(p.n, t.bn), ceil_div(p.m, t.bm),
                {static_cast<uint32_t>(t.invocations()), t.bm, t.bn, t.tm, t.tn, has_bias,
                 activation, t.shared_memory ? 0u : 1u});
}

}  // namespace

// The whole product with its residual where the coopmat kernel takes it (emit_matmul_with_residual
// checked the bindings).
bool emit_matmul_weights_with_residual(Lowering& l, const MatmulCall& c) {
  const ValueDesc& a = l.value(c.a);
  const ValueDesc& b = l.value(c.b);
  if (!is_float(a.dtype) || !is_weight_type(b.dtype) || !c.transpose_b || b.shape.rank() != 2 ||
      l.value(c.out).dtype != a.dtype)
    return false;
  const uint64_t k = static_cast<uint64_t>(b.shape[1]), n = static_cast<uint64_t>(b.shape[0]);
  WeightMatmulPush p = single_dispatch_push(static_cast<uint64_t>(a.shape.numel()) / k, n, k, c.alpha);
  const std::optional<Kernel> kernel = coopmat_kernel(l, a.dtype, b.dtype, p);
  if (!kernel) return false;
  emit_coopmat(l, *kernel, c, a.dtype, 1,
               {{c.a}, {c.b}, {c.bias != kNoValue ? c.bias : c.a}, {c.out, true}, {c.residual}}, p);
  return true;
}

namespace {

// Rows of a prompt (M > 1) on the tiled texel kernel with the gate and the residual in its
// epilogue (shaders/matmul_wq_texel.comp's run-time flags: one pipeline for every linear of a
// weight type, as its JIT takes lavapipe about a second per variant); the pre-norm is not fused
// there (the caller emits it first). Same conditions as emit_one's texel path, with whole
// bindings only.
bool emit_texel_epilogue(Lowering& l, const MatmulCall& c, uint64_t m, uint64_t n, uint64_t k) {
  const ValueDesc& a = l.value(c.a);
  const DType act = a.dtype, w = l.value(c.b).dtype;
  const std::optional<Kernel> texel = kernels::weight_kernel(kernels::WeightKernel::matmul_wq_texel, w);
  if (!texel || c.norm != kNoValue || m < 2) return false;
  if (c.residual != kNoValue && (l.value(c.residual).dtype != act || l.value(c.residual).bytes() > l.tuning().max_binding_bytes ||
                                 static_cast<uint64_t>(l.value(c.residual).shape.numel()) != m * n))
    return false;
  WeightMatmulPush p = single_dispatch_push(m, n, k, c.alpha);
  if (coopmat_kernel(l, act, w, p)) return false;  // f16 prompts on cooperative matrices
  const std::vector<Binding> operands = {{c.a},
                                         {c.b},
                                         {c.bias != kNoValue ? c.bias : c.a},
                                         {c.out, true},
                                         {c.residual != kNoValue ? c.residual : c.a}};
  if (!use_texel(l, act, *texel, operands)) return false;
  const kernels::MatmulWeightTiles& t = l.tuning().matmul.weight_tiles;
  const uint32_t sg = l.tuning().matmul.texel_tiles.subgroup;
  const uint32_t tm = std::min<uint32_t>(t.texel_tm, p.m);
  uint32_t tn = t.texel_tn;
  if (c.gated) tn += tn % 2;  // as many up columns as gate columns
  const uint32_t columns = c.gated ? tn / 2 : tn;
  if (sg == 0 || tm == 0 || columns == 0 || sg > l.info().max_workgroup_size[0])
    bug(l, "texel tiling " + std::to_string(tm) + "x" + std::to_string(tn) + " on " + std::to_string(sg) +
               " lanes");
  const uint32_t flags = (c.gated ? 1u : 0u) | (c.residual != kNoValue ? 2u : 0u);
  dispatch_rows(l, *texel, act, operands, TexelPush{p, flags}, ceil_div(p.n, uint64_t(sg) * columns),
                ceil_div(p.m, tm),
                {sg, tm, tn, c.bias != kNoValue ? 1u : 0u, static_cast<uint32_t>(c.activation),
                 texel_quads(tn, p, operands[3], act)});
  return true;
}

}  // namespace

bool emit_matmul_weights_fused(Lowering& l, const MatmulCall& c) {
  const ValueDesc& a = l.value(c.a);
  const ValueDesc& b = l.value(c.b);
  const DType act = a.dtype, w = b.dtype;
  const std::optional<Kernel> vec = kernels::weight_kernel(kernels::WeightKernel::matmul_wq_vec, w);
  if (!vec || !is_float(act) || !c.transpose_b || b.shape.rank() != 2) return false;
  const uint64_t k = static_cast<uint64_t>(b.shape[1]);
  const uint64_t n = static_cast<uint64_t>(b.shape[0]) / (c.gated ? 2 : 1);
  const uint64_t m = static_cast<uint64_t>(a.shape.numel()) / k;
  // Whole bindings only (windows of a gated weight would part its gate and up rows).
  const uint64_t limit = l.tuning().max_binding_bytes;
  if (a.bytes() > limit || b.bytes() > limit || l.value(c.out).bytes() > limit) return false;
  if (m != 1) return emit_texel_epilogue(l, c, m, n, k);
  const std::vector<Binding> operands = {
      {c.a}, {c.b}, {c.bias != kNoValue ? c.bias : c.a}, {c.out, true}};
  if (!use_texel(l, act, *vec, operands)) return false;
  // Gamma is read as texels like a: whole texels of a's dtype.
  if (c.norm != kNoValue && (k % 4 || l.value(c.norm).dtype != act)) return false;
  WeightMatmulPush p = single_dispatch_push(1, n, k, c.alpha);
  std::vector<Binding> six = operands;
  six.push_back(c.residual != kNoValue ? Binding{c.residual} : Binding{c.a});
  six.push_back(c.norm != kNoValue ? Binding{c.norm} : Binding{c.a});
  emit_vec(l, c, *vec, act, six, p);
  return true;
}

void emit_matmul_weights(Lowering& l, const MatmulCall& c) {
  const ValueDesc& a = l.value(c.a);
  const ValueDesc& b = l.value(c.b);
  const ValueDesc& o = l.value(c.out);
  const DType act = a.dtype, w = b.dtype;
  if (!is_float(act) || o.dtype != act || !is_weight_type(w) || w == act)
    bug(l, "dtypes a " + std::string(dtype_name(act)) + ", b " + std::string(dtype_name(w)) +
               ", out " + std::string(dtype_name(o.dtype)));
  if (!c.transpose_b || b.shape.rank() != 2 || a.shape.rank() < 2 || b.shape[1] != a.shape[-1])
    bug(l, "b " + b.shape.str() + " is not a transposed [N, K] weight for a " + a.shape.str());
  const uint64_t k = static_cast<uint64_t>(b.shape[1]), n = static_cast<uint64_t>(b.shape[0]);
  const uint64_t m = static_cast<uint64_t>(a.shape.numel()) / k;
  if (is_quantized(w) && k % dtype_block_elements(w))
    bug(l, "K " + std::to_string(k) + " is not whole blocks");
  if (o.shape.numel() != static_cast<int64_t>(m * n))
    bug(l, "out is " + o.shape.str() + " for " + std::to_string(m) + " x " + std::to_string(n));

  WeightMatmulPush p = single_dispatch_push(m, n, k, c.alpha);
  const std::vector<Binding> whole = {
      {c.a}, {c.b}, {c.bias != kNoValue ? c.bias : c.a}, {c.out, true}};
  const uint64_t limit = l.tuning().max_binding_bytes;
  if (a.bytes() <= limit && b.bytes() <= limit && o.bytes() <= limit) {
    emit_one(l, c, act, w, whole, p);
    return;
  }
  // Windows (src/ops/windows.hpp): rows of a (and out), and rows of the weight, whose bytes are
  // whole blocks, with the matching columns of out and elements of bias.
  const uint64_t es = dtype_size(act), row_bytes = dtype_bytes(w, static_cast<int64_t>(k));
  const uint64_t align = window_alignment(l.info());
  const std::string& what = l.node().label;
  const std::vector<Span> n_spans =
      b.bytes() > limit ? split_spans(n, {row_bytes, es}, limit, align, what + ": rows of the weight")
                        : std::vector<Span>{{0, n}};
  const std::vector<Span> m_spans =
      split_spans(m, {k * es, n * es}, limit, align, what + ": rows of x");
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
      WeightMatmulPush q = p;
      q.m = static_cast<uint32_t>(ms.count);
      q.n = static_cast<uint32_t>(ns.count);
      emit_one(l, c, act, w, ops, q);
    }
}

}  // namespace vkformer::ops
