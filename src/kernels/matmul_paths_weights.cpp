// The weight matmul paths: out = activation(alpha * a·Wᵀ + bias) with W [N, K] in another dtype
// than the activations (quantized ggml blocks, vkformer/quant_types.def; bf16; f16 weights under
// f32 activations and f32 under f16), read in its own layout and dequantized on the fly, in the
// order of preference. Each entry: when it can run a problem, when the automatic choice takes
// it, which of linear's fusions its kernel does, how it is emitted, and what `vkformer tune` may
// change in its kernel's configuration (candidate texts in the syntax of its VKFORMER_* override).
// Every weight kernel is a family with one variant per weight dtype (vkf_weight_kernels in
// shaders/kernels.cmake, found with weight_kernel(family, dtype)).
#include <algorithm>
#include <bit>
#include <numeric>
#include <optional>
#include <string>

#include "matmul_emit.hpp"
#include "matmul_paths.hpp"
#include "tunable_candidates.hpp"
#include "vkformer/error.hpp"

namespace vkformer::kernels {

namespace {

using namespace tunable_candidates;

// Matches the push block of shaders/matmul_wq_vec.comp and matmul_wq_rows.comp: the matmul push
// block and the norm's epsilon.
struct VecPush {
  MatmulPush base;
  float eps;
};
static_assert(sizeof(VecPush) == sizeof(MatmulPush) + 4);

// Matches the push block of shaders/matmul_wq_texel.comp: the above and its fusion flags.
struct TexelPush {
  MatmulPush base;
  uint32_t flags;  // 1: gated pair, 2: residual
};
static_assert(sizeof(TexelPush) == sizeof(MatmulPush) + 4);

[[noreturn]] void bug(Lowering& l, const std::string& what) {
  throw Error(ErrorCode::internal, l.node().label + ": emit_matmul_weights: " + what);
}

DType weight(const MatmulQuery& q) { return *q.problem.weight; }

// The family's kernel for the problem's weight dtype, where the manifest declares one.
std::optional<Kernel> kernel_of(WeightKernel family, const MatmulQuery& q) {
  return weight_kernel(family, weight(q));
}

// The gemv and tiled kernels read every weight dtype: one missing is a bug naming the type.
Kernel required_kernel(WeightKernel family, DType w) {
  const std::optional<Kernel> k = weight_kernel(family, w);
  if (!k)
    throw Error(ErrorCode::internal,
                "emit_matmul_weights: no kernel for weights in " + std::string(dtype_name(w)));
  return *k;
}

// ---- The texel-buffer kernels (CPU devices): a and w read through texel buffers.

// Texels a view may hold: the device's limit, or less (VKFORMER_MATMUL_WQ_TEXEL_LIMIT).
uint64_t texel_limit(const MatmulQuery& q) {
  const uint64_t limit = q.tuning.weight_tiles.texel_limit;
  return limit ? std::min(q.problem.max_texels, limit) : q.problem.max_texels;
}

// Whether a texel kernel takes this product: the tuning prefers it, nothing forces the
// storage-buffer paths, the kernel runs here, and a (4-element texels) and w (32-bit words, as
// 16-byte texels) fit the texel views.
bool texel_views(const MatmulQuery& q, std::optional<Kernel> kernel) {
  const MatmulTuning& t = q.tuning;
  const MatmulProblem& p = q.problem;
  if (!kernel || !t.weight_tiles.texel || t.texel_tiles.subgroup == 0 ||
      !q.supported(*kernel, p.dtype))
    return false;
  if (t.forced_path && *t.forced_path != "texel") return false;
  const uint64_t texels = texel_limit(q);
  return p.a_bytes / (4 * dtype_size(p.dtype)) <= texels && (p.b_bytes + 15) / 16 <= texels;
}

// Whether the tuning takes the texel kernels for quantized weights (CPU devices, fixed-size
// subgroups with shuffles): their tunables apply.
bool texel_taken(const Tuning& b) {
  return b.matmul.weight_tiles.texel && b.matmul.texel_tiles.subgroup != 0;
}

// ---- wq_vec: shaders/matmul_wq_vec.comp, the mat-vec of one row (decoding), lanes on
// texel_gemv_tn rows each, every fusion (pre-norm, gated pair, residual) in the kernel.

bool vec_can(const MatmulQuery& q) {
  return q.problem.m == 1 && texel_views(q, kernel_of(WeightKernel::matmul_wq_vec, q));
}
// Every fusion, with whole bindings; the pre-norm alone also over windows of the weight's rows
// (x and gamma whole: each window normalizes x itself; a large vocabulary's output projection).
// The pre-norm reads gamma as texels like a (whole texels).
bool vec_fuses(const MatmulQuery& q) {
  const MatmulProblem& p = q.problem;
  const bool bound = p.whole || (p.one_row_windows && !p.fusions.gated && !p.fusions.residual);
  return bound && (!p.fusions.norm || p.k % 4 == 0);
}

// What the mat-vec kernels share: the lanes (one subgroup per workgroup), the push block with
// the norm's epsilon, and the fusion flags that end their specialization constants.
uint32_t vec_lanes(Lowering& l) {
  const uint32_t sg = l.tuning().matmul.texel_tiles.subgroup;
  if (sg == 0 || sg > l.info().max_workgroup_size[0])
    bug(l, "mat-vec on " + std::to_string(sg) + " lanes");
  return sg;
}
std::vector<uint32_t> vec_spec(std::vector<uint32_t> spec, const MatmulProblem& p) {
  for (uint32_t v : {flag(p.bias), activation_id(p), flag(p.fusions.gated),
                     flag(p.fusions.residual), flag(p.fusions.norm)})
    spec.push_back(v);
  return spec;
}

void vec_emit(Lowering& l, const MatmulEmit& e) {
  const MatmulProblem& p = e.query.problem;
  const uint32_t sg = vec_lanes(l);
  uint32_t tn = l.tuning().matmul.weight_tiles.texel_gemv_tn;
  if (p.fusions.gated) tn += tn % 2;  // as many up rows as gate rows
  const uint32_t columns = p.fusions.gated ? tn / 2 : tn;
  if (tn == 0) bug(l, "mat-vec tiling of 0 rows per lane");
  l.dispatch(*kernel_of(WeightKernel::matmul_wq_vec, e.query), p.dtype, first_operands(e, 6),
             PushBlock::of(VecPush{e.push, p.norm_eps}),
             l.grid(ceil_div(e.push.n, uint64_t(sg) * columns), 1, 1), vec_spec({sg, tn}, p));
}

// Rows per lane (M = 1; also wq_texel's columns per lane for one row).
void vec_tunables(std::vector<Tunable>& list) {
  list.push_back(integer_tunable(
      {.id = "matmul.wq_texel.gemv",
       .env = "VKFORMER_MATMUL_WQ_TEXEL",
       .description = "quantized-weight texel matmul (CPU devices), M = 1: columns per lane",
       .ops = {TuneOp::linear_quantized},
       .measures = one_row},
      {.field = [](Tuning& u) -> uint32_t& { return u.matmul.weight_tiles.texel_gemv_tn; },
       .applies = texel_taken,
       .others = {1, 2, 4, 8, 16}}));
}

// ---- wq_rows: shaders/matmul_wq_rows.comp, the same mat-vec with lanes on consecutive blocks
// (one stream through memory per workgroup). Taken before wq_vec for weights of at least
// texel_gemv_stream_bytes (all, by default: in a decoding step every weight comes from DRAM)
// where its rounds keep at most texel_rows_max_rounds blocks of x per lane; see
// MatmulWeightTiles.

// R = SG / gcd(KB, SG) rows per group make its rounds of SG blocks whole (a gated group needs
// pairs of gate and up rows); each lane keeps x's block of every round.
struct RowsGroups {
  uint32_t kb, r;
  uint64_t rounds;
};
RowsGroups rows_groups(uint32_t sg, uint32_t k, bool gated) {
  RowsGroups g;
  g.kb = k / 32;
  g.r = sg / std::gcd(g.kb, sg);
  if (gated && g.r % 2) g.r *= 2;
  g.rounds = (uint64_t(g.r) * g.kb + sg - 1) / sg;
  return g;
}

bool rows_can(const MatmulQuery& q) {
  const MatmulProblem& p = q.problem;
  const MatmulWeightTiles& t = q.tuning.weight_tiles;
  const std::optional<Kernel> rows = kernel_of(WeightKernel::matmul_wq_rows, q);
  return vec_can(q) && rows && q.supported(*rows, p.dtype) &&
         p.b_bytes >= t.texel_gemv_stream_bytes &&
         rows_groups(q.tuning.texel_tiles.subgroup, static_cast<uint32_t>(p.k), p.fusions.gated)
                 .rounds <= t.texel_rows_max_rounds;
}

void rows_emit(Lowering& l, const MatmulEmit& e) {
  const MatmulProblem& p = e.query.problem;
  const uint32_t sg = vec_lanes(l);
  const RowsGroups g = rows_groups(sg, e.push.k, p.fusions.gated);
  const uint32_t outputs = p.fusions.gated ? g.r / 2 : g.r;
  const uint64_t groups = ceil_div(e.push.n, outputs);
  // Enough groups per workgroup to share its x blocks, and workgroups for every thread.
  const uint64_t iter = std::clamp<uint64_t>(
      groups / l.tuning().matmul.weight_tiles.texel_rows_workgroups, 1, 16);
  l.dispatch(*kernel_of(WeightKernel::matmul_wq_rows, e.query), p.dtype, first_operands(e, 6),
             PushBlock::of(VecPush{e.push, p.norm_eps}), l.grid(ceil_div(groups, iter), 1, 1),
             vec_spec({sg, g.kb, g.r, static_cast<uint32_t>(iter)}, p));
}

// How many workgroups a mat-vec is spread over (each takes up to 16 groups of rows and loads x's
// blocks once for them: fewer, longer workgroups load x less often, more keep every thread busy),
// and the most rounds of blocks a lane keeps x for (x's registers per lane grow with them: K
// beyond SG * max_rounds / rows per group takes wq_vec instead).
//
// Not a tunable: texel_gemv_stream_bytes, the weight size from which mat-vecs take this kernel.
// It pays where the weight comes from DRAM, as every weight does in a decoding step (the model's
// weights exceed the caches), while the tuner times one op at a time with its weight cached
// between runs, where the lanes-on-rows kernel is often faster: it would pick the threshold that
// makes decoding slower (VKFORMER_MATMUL_WQ_STREAM_BYTES sets it by hand).
void rows_tunables(std::vector<Tunable>& list) {
  list.push_back(integer_tunable(
      {.id = "matmul.wq_rows.workgroups",
       .description = "quantized-weight mat-vec with lanes on consecutive blocks (CPU devices), "
                      "M = 1: workgroups per mat-vec",
       .ops = {TuneOp::linear_quantized},
       .measures = one_row},
      {.field = [](Tuning& u) -> uint32_t& { return u.matmul.weight_tiles.texel_rows_workgroups; },
       .applies = texel_taken,
       .others = {4, 8, 16, 32, 64}}));
  list.push_back(integer_tunable(
      {.id = "matmul.wq_rows.max_rounds",
       .description = "quantized-weight mat-vec with lanes on consecutive blocks (CPU devices), "
                      "M = 1: most rounds of x blocks a lane keeps (larger K take the "
                      "lanes-on-rows kernel)",
       .ops = {TuneOp::linear_quantized},
       .measures = one_row},
      {.field = [](Tuning& u) -> uint32_t& { return u.matmul.weight_tiles.texel_rows_max_rounds; },
       .applies = texel_taken,
       .others = {16, 32, 64, 96}}));
}

// ---- wq_idot: shaders/matmul_wq_idot.comp, the mat-vec of a few rows on integer dot products
// (VK_KHR_shader_integer_dot_product, REQUIRES integer_dot): each workgroup quantizes its rows of
// x to 8 bits per 32-value block in shared memory and dots them with the weight's raw quantized
// values, four 8-bit lanes at a time; bias and activation in its epilogue.

// Its tiling, constants of the path: 16 lanes per output on a workgroup of up to 128, up to 8
// rows of x at once (one read of the weight for all of them), and 64 blocks of K per pass, fewer
// where the device's shared memory does not hold them (not fewer for short rows: one pipeline
// for every K).
struct IdotTiling {
  uint32_t workgroup, lanes, rows, chunk;
  uint64_t shared_bytes() const {  // the shader's xq, xd, xs and red
    return uint64_t(rows) * chunk * (8 * 4 + 4 + 8) + uint64_t(rows) * workgroup * 4;
  }
};
IdotTiling idot_tiling(const DeviceInfo& info, uint64_t m) {
  IdotTiling t;
  t.workgroup = std::min<uint32_t>({128, info.max_workgroup_invocations, info.max_workgroup_size[0]});
  t.workgroup = 1u << (31 - std::countl_zero(t.workgroup));  // a power of 2
  t.lanes = std::min<uint32_t>(16, t.workgroup);
  t.rows = static_cast<uint32_t>(std::min<uint64_t>(m, 8));
  t.chunk = 64;
  while (t.shared_bytes() > info.shared_memory_bytes && t.chunk > 1) t.chunk /= 2;
  return t;
}

bool idot_can(const MatmulQuery& q) {
  const std::optional<Kernel> kernel = kernel_of(WeightKernel::matmul_wq_idot, q);
  return kernel && q.supported(*kernel, q.problem.dtype);
}
// Products of up to integer_dot_rows rows (the tuning: 8 where the device reports packed 8-bit
// dot products accelerated, 0 elsewhere, so lavapipe never takes it unless told), and not where
// VKFORMER_MATMUL_PATH forces a float path.
bool idot_takes(const MatmulQuery& q) {
  return !q.tuning.forced_path && q.problem.m <= q.tuning.weight_tiles.integer_dot_rows;
}

void idot_emit(Lowering& l, const MatmulEmit& e) {
  const MatmulProblem& p = e.query.problem;
  const IdotTiling t = idot_tiling(l.info(), e.push.m);
  if (t.shared_bytes() > l.info().shared_memory_bytes)
    bug(l, "integer-dot mat-vec needs " + std::to_string(t.shared_bytes()) + " bytes of shared memory");
  dispatch_tiles(l, *kernel_of(WeightKernel::matmul_wq_idot, e.query), p.dtype, first_operands(e, 4),
                 e.push, ceil_div(e.push.n, t.workgroup / t.lanes), ceil_div(e.push.m, t.rows), 1,
                 {t.workgroup, t.lanes, flag(p.bias), activation_id(p), t.rows, t.chunk});
}

// Up to how many rows products take it (0: never), on devices with the feature.
void idot_tunables(std::vector<Tunable>& list) {
  list.push_back(integer_tunable(
      {.id = "matmul.wq_idot.rows",
       .env = "VKFORMER_MATMUL_INTEGER_DOT",
       .description = "quantized-weight mat-vec on 8-bit integer dot products: up to how many "
                      "rows (0: never)",
       .ops = {TuneOp::linear_quantized},
       .measures = [](const TuneShape& s) { return s.m <= 8; }},
      {.field = [](Tuning& u) -> uint32_t& { return u.matmul.weight_tiles.integer_dot_rows; },
       .applies = [](const Tuning&) { return true; },
       .others = {0, 1, 4, 8},
       .fits = [](const DeviceInfo& info, uint32_t) { return info.integer_dot_product; }}));
}

// ---- wq_coopmat: shaders/matmul_coopmat.comp with WEIGHTS (matmul_wq_coopmat_*, one family per
// API): prompts on cooperative matrices, each 8-element chunk of a weight tile dequantized into
// the f16 stage; the residual in the epilogue.

std::optional<Kernel> coopmat_kernel(const MatmulQuery& q) {
  switch (q.tuning.coopmat_tiles.api) {
    case vk::CoopmatApi::khr: return kernel_of(WeightKernel::matmul_wq_coopmat_khr, q);
    case vk::CoopmatApi::nv: return kernel_of(WeightKernel::matmul_wq_coopmat_nv, q);
    case vk::CoopmatApi::emulated: return kernel_of(WeightKernel::matmul_wq_coopmat_emu, q);
    case vk::CoopmatApi::none: break;
  }
  return std::nullopt;
}

bool coopmat_can(const MatmulQuery& q) {
  const std::optional<Kernel> kernel = coopmat_kernel(q);
  return q.problem.dtype == DType::f16 && kernel && q.supported(*kernel, q.problem.dtype) &&
         q.tuning.coopmat_tiles.usable();
}
// Where an f16 product of the same size would take cooperative matrices (the float list's
// coopmat: at least one MMA tile each way, or VKFORMER_MATMUL_PATH=coopmat, and not where it
// forces the general kernel).
bool coopmat_takes(const MatmulQuery& q) {
  const std::optional<std::string>& forced = q.tuning.forced_path;
  const MatmulCoopmatTiles& c = q.tuning.coopmat_tiles;
  const MatmulProblem& p = q.problem;
  if (forced == "coopmat") return true;
  return forced != "general" && p.m >= c.m && p.n >= c.n && p.k >= c.k;
}
bool coopmat_fuses(const MatmulQuery& q) {
  const MatmulProblem& p = q.problem;
  return !p.fusions.norm && !p.fusions.gated && p.whole;
}
void coopmat_emit(Lowering& l, const MatmulEmit& e) { emit_coopmat(l, *coopmat_kernel(e.query), e); }

// ---- wq_texel: shaders/matmul_wq_texel.comp (CPU devices): one subgroup per workgroup computes
// texel_tm rows x (subgroup * texel_tn) columns (M = 1: one row of texel_gemv_tn per lane); the
// gated pair and the residual of prompt rows in its epilogue (run-time flags: one pipeline for
// every linear of a weight type, as its JIT takes lavapipe about a second per variant).

bool texel_can(const MatmulQuery& q) {
  return texel_views(q, kernel_of(WeightKernel::matmul_wq_texel, q));
}
// The gated pair and the residual of more than one row (the pre-norm is emitted apart), with
// whole bindings; the residual (a in its place without one) is read as 16-byte texels too.
bool texel_fuses(const MatmulQuery& q) {
  const MatmulProblem& p = q.problem;
  const uint64_t residual = p.fusions.residual ? p.residual_bytes : p.a_bytes;
  return !p.fusions.norm && p.m >= 2 && p.whole && (residual + 15) / 16 <= texel_limit(q);
}

// shaders/matmul_wq_texel.comp's QUADS: a lane's outputs in runs of 4 consecutive columns (4-wide
// stores, the residual as texels), where its TN (gated or not) and out's layout allow.
uint32_t texel_quads(uint32_t tn, const MatmulPush& p, const Binding& out, DType act) {
  return tn % 8 == 0 && p.n % 4 == 0 && p.ldo % 4 == 0 &&
         out.window_offset % (4 * dtype_size(act)) == 0;
}

void texel_emit(Lowering& l, const MatmulEmit& e) {
  const MatmulProblem& p = e.query.problem;
  const MatmulWeightTiles& t = l.tuning().matmul.weight_tiles;
  const uint32_t sg = l.tuning().matmul.texel_tiles.subgroup;
  const MatmulPush& push = e.push;
  const uint32_t tm = push.m == 1 ? 1 : std::min(t.texel_tm, push.m);
  uint32_t tn = push.m == 1 ? t.texel_gemv_tn : t.texel_tn;
  if (p.fusions.gated) tn += tn % 2;  // as many up columns as gate columns
  const uint32_t columns = p.fusions.gated ? tn / 2 : tn;
  if (sg == 0 || tm == 0 || columns == 0 || sg > l.info().max_workgroup_size[0])
    bug(l, "texel tiling " + std::to_string(tm) + "x" + std::to_string(tn) + " on " +
               std::to_string(sg) + " lanes");
  const uint32_t flags = flag(p.fusions.gated) | (p.fusions.residual ? 2u : 0u);
  const std::vector<Binding> operands = first_operands(e, 5);
  dispatch_tiles(l, *kernel_of(WeightKernel::matmul_wq_texel, e.query), p.dtype, operands,
                 TexelPush{push, flags}, ceil_div(push.n, uint64_t(sg) * columns),
                 ceil_div(push.m, tm), 1,
                 {sg, tm, tn, flag(p.bias), activation_id(p),
                  texel_quads(tn, push, operands[3], p.dtype)});
}

// The block for M > 1: rows x columns per lane (M = 1: matmul.wq_texel.gemv, with wq_vec).
void texel_tunables(std::vector<Tunable>& list) {
  struct Block {
    uint32_t tm, tn;
  };
  list.push_back(list_tunable<Block>(
      {.id = "matmul.wq_texel.block",
       .env = "VKFORMER_MATMUL_WQ_TEXEL",
       .description = "quantized-weight texel matmul (CPU devices), M > 1: TMxTN per lane",
       .ops = {TuneOp::linear_quantized},
       .measures = several_rows},
      {.applies = texel_taken,
       .current = [](const Tuning& b) {
         return Block{b.matmul.weight_tiles.texel_tm, b.matmul.weight_tiles.texel_tn};
       },
       .others = {{8, 2}, {4, 4}, {16, 2}, {4, 8}, {8, 8}, {16, 4}},
       .text = [](const Block& b) { return join({b.tm, b.tn}); },
       .apply = [](Tuning& u, const Block& b) {
         u.matmul.weight_tiles.texel_tm = b.tm, u.matmul.weight_tiles.texel_tn = b.tn;
       }}));
}

// The storage-buffer kernels' tunables apply where the texel kernels are not taken (GPUs).
bool storage_taken(const Tuning& b) {
  return !b.matmul.weight_tiles.texel && b.matmul.weight_tiles.shared_memory;
}

// ---- wq_gemv: shaders/matmul_wq_gemv.comp, the mat-vec for M <= gemv_max_m: `lanes`
// invocations per output split its row of W by blocks.

bool gemv_can(const MatmulQuery& q) {
  const Kernel gemv = required_kernel(WeightKernel::matmul_wq_gemv, weight(q));
  return q.problem.m <= q.tuning.weight_tiles.gemv_max_m && q.supported(gemv, q.problem.dtype);
}

void gemv_emit(Lowering& l, const MatmulEmit& e) {
  const MatmulWeightTiles& t = l.tuning().matmul.weight_tiles;
  const DeviceInfo& info = l.info();
  const MatmulProblem& p = e.query.problem;
  const uint32_t wg = std::min<uint32_t>({t.gemv_workgroup, info.max_workgroup_invocations,
                                          info.max_workgroup_size[0]});
  const uint32_t lanes = t.gemv_lanes;
  if (lanes == 0 || (lanes & (lanes - 1)) || wg < lanes || wg % lanes ||
      uint64_t(wg) * 4 > info.shared_memory_bytes)
    bug(l, "gemv tiling " + std::to_string(wg) + " invocations / " + std::to_string(lanes) +
               " lanes");
  dispatch_tiles(l, required_kernel(WeightKernel::matmul_wq_gemv, weight(e.query)), p.dtype,
                 first_operands(e, 4), e.push, ceil_div(e.push.n, wg / lanes), e.push.m, 1,
                 {wg, lanes, flag(p.bias), activation_id(p)});
}

// WG/LANES: LANES invocations per output (a power of 2 dividing WG).
void gemv_tunables(std::vector<Tunable>& list) {
  struct Pair {
    uint32_t wg, lanes;
  };
  list.push_back(list_tunable<Pair>(
      {.id = "matmul.wq.gemv",
       .description = "quantized-weight mat-vec (GPUs), M = 1: WG/LANES (lanes per output)",
       .ops = {TuneOp::linear_quantized},
       .measures = one_row},
      {.applies = storage_taken,
       .current = [](const Tuning& b) {
         return Pair{b.matmul.weight_tiles.gemv_workgroup, b.matmul.weight_tiles.gemv_lanes};
       },
       .others = {{64, 8}, {128, 8}, {128, 16}, {128, 32}, {256, 16}, {256, 32}, {64, 16}, {32, 32}},
       .fits = [](const DeviceInfo& info, const Tuning&, const Pair& p) {
         return is_pow2(p.lanes) && p.wg >= p.lanes && p.wg % p.lanes == 0 &&
                workgroup_fits(info, p.wg) && uint64_t(p.wg) * 4 <= info.shared_memory_bytes;
       },
       .text = [](const Pair& p) { return join({p.wg, p.lanes}, "/"); },
       .apply = [](Tuning& u, const Pair& p) {
         u.matmul.weight_tiles.gemv_workgroup = p.wg, u.matmul.weight_tiles.gemv_lanes = p.lanes;
       }}));
}

// ---- wq_tiled: shaders/matmul_wq.comp, any problem: a bm x bn output tile per workgroup, tm x tn
// per invocation, K staged 32 (one block) at a time (or read directly on CPU devices).

bool tiled_can(const MatmulQuery&) { return true; }

void tiled_emit(Lowering& l, const MatmulEmit& e) {
  const MatmulWeightTiles& t = l.tuning().matmul.weight_tiles;
  const DeviceInfo& info = l.info();
  const MatmulProblem& p = e.query.problem;
  if (t.tm == 0 || t.tn == 0 || t.bm % t.tm || t.bn % t.tn || t.invocations() == 0 ||
      t.invocations() > info.max_workgroup_invocations ||
      t.invocations() > info.max_workgroup_size[0] || t.shared_bytes() > info.shared_memory_bytes)
    bug(l, "tiling " + std::to_string(t.bm) + "x" + std::to_string(t.bn) + "/" +
               std::to_string(t.tm) + "x" + std::to_string(t.tn));
  dispatch_tiles(l, required_kernel(WeightKernel::matmul_wq, weight(e.query)), p.dtype,
                 first_operands(e, 4), e.push, ceil_div(e.push.n, t.bn), ceil_div(e.push.m, t.bm), 1,
                 {static_cast<uint32_t>(t.invocations()), t.bm, t.bn, t.tm, t.tn, flag(p.bias),
                  activation_id(p), flag(!t.shared_memory)});
}

// BMxBN/TMxTN, staged 32 of K at a time (GPUs, M > 1).
void tiled_tunables(std::vector<Tunable>& list) {
  struct Tiles {
    uint32_t bm, bn, tm, tn;
  };
  list.push_back(list_tunable<Tiles>(
      {.id = "matmul.wq.tiles",
       .description = "quantized-weight matmul staged in shared memory (GPUs), M > 1: BMxBN/TMxTN",
       .ops = {TuneOp::linear_quantized},
       .measures = several_rows},
      {.applies = storage_taken,
       .current = [](const Tuning& b) {
         const MatmulWeightTiles& w = b.matmul.weight_tiles;
         return Tiles{w.bm, w.bn, w.tm, w.tn};
       },
       .others = {{64, 64, 4, 4}, {32, 32, 4, 4}, {64, 32, 4, 4}, {32, 64, 4, 4}, {128, 64, 8, 4},
                  {128, 128, 8, 8}, {64, 64, 8, 8}},
       .fits = [](const DeviceInfo& info, const Tuning& b, const Tiles& x) {
         MatmulWeightTiles m = b.matmul.weight_tiles;
         m.bm = x.bm, m.bn = x.bn, m.tm = x.tm, m.tn = x.tn;
         return workgroup_fits(info, m.invocations()) && m.shared_bytes() <= info.shared_memory_bytes;
       },
       .text = [](const Tiles& x) { return join({x.bm, x.bn}) + "/" + join({x.tm, x.tn}); },
       .apply = [](Tuning& u, const Tiles& x) {
         MatmulWeightTiles& v = u.matmul.weight_tiles;
         v.bm = x.bm, v.bn = x.bn, v.tm = x.tm, v.tn = x.tn;
       }}));
}

// In the order of preference; the last takes every problem. A kernel for some weight types only
// (a mat-vec for the K-quants, say) says so in its `can` (its family's weight_kernel() for the
// type, or the type itself); one that needs a device feature (an integer-dot-product mat-vec on
// VK_KHR_shader_integer_dot_product) declares it with REQUIRES in shaders/kernels.cmake, so that
// `q.supported` is false where the device lacks it, and goes before the paths it should beat.
const MatmulPathEntry kWeightPaths[] = {
    {.name = "wq_idot", .can = idot_can, .takes = idot_takes, .emit = idot_emit,
     .tunables = idot_tunables},
    {.name = "wq_rows", .can = rows_can, .fuses = vec_fuses, .emit = rows_emit,
     .tunables = rows_tunables},
    {.name = "wq_vec", .can = vec_can, .fuses = vec_fuses, .emit = vec_emit,
     .tunables = vec_tunables},
    {.name = "wq_coopmat", .can = coopmat_can, .takes = coopmat_takes, .fuses = coopmat_fuses,
     .emit = coopmat_emit},  // tuned with the float list's coopmat (matmul.coopmat)
    {.name = "wq_texel", .can = texel_can, .fuses = texel_fuses, .emit = texel_emit,
     .tunables = texel_tunables},
    {.name = "wq_gemv", .can = gemv_can, .emit = gemv_emit, .tunables = gemv_tunables},
    {.name = "wq_tiled", .can = tiled_can, .emit = tiled_emit, .tunables = tiled_tunables},
};

}  // namespace

std::span<const MatmulPathEntry> weight_matmul_paths() { return kWeightPaths; }

}  // namespace vkformer::kernels
