// The float matmul paths: a and b in one float dtype (f32 or f16), out = activation(alpha * a·b +
// bias) over a batch of matrices, in the order of preference. Each entry: when it can run a
// problem, when the automatic choice takes it, how it is emitted, and what `vkformer tune` may
// change in its kernel's configuration (candidate texts in the syntax of its VKFORMER_* override).
#include <algorithm>
#include <string>

#include "matmul_emit.hpp"
#include "matmul_paths.hpp"
#include "tunable_candidates.hpp"

namespace vkformer::kernels {

namespace {

using namespace tunable_candidates;

uint32_t pow2_at_least(uint64_t x) {
  uint32_t p = 1;
  while (p < x) p *= 2;
  return p;
}

// ---- gemv: shaders/matmul_gemv.comp, all M <= gemv_tiles.max_m rows at once, B streamed once.

bool gemv_can(const MatmulQuery& q) {
  return q.supported(Kernel::matmul_gemv, q.problem.dtype) &&
         q.problem.m <= q.tuning.gemv_tiles.max_m;
}
// GPUs, decoding: B is read once, there is nothing to tile.
bool gemv_takes(const MatmulQuery& q) { return q.tuning.prefer_gemv; }
void gemv_details(const MatmulQuery& q, MatmulPlan& plan) {
  plan.gemv_m = pow2_at_least(q.problem.m);
}

void gemv_emit(Lowering& l, const MatmulEmit& e) {
  const MatmulGemvTiles& t = l.tuning().matmul.gemv_tiles;
  const MatmulProblem& p = e.query.problem;
  const uint32_t gemv_m = e.plan.gemv_m;
  // A power of two within the workgroup limits whose reduction buffer (gemv_m floats per
  // invocation and column it owns) fits in shared memory.
  const uint32_t per_invocation = gemv_m * (p.transpose_b ? t.columns : 1) * 4;
  uint32_t wg = 1;
  while (wg * 2 <= t.workgroup && wg * 2 <= l.info().max_workgroup_invocations &&
         wg * 2 <= l.info().max_workgroup_size[0] &&
         uint64_t(wg) * 2 * per_invocation <= l.info().shared_memory_bytes)
    wg *= 2;
  // Without transposition, columns_nn (a power of 2) columns split the workgroup.
  const uint32_t columns = p.transpose_b ? t.columns : std::min(t.columns_nn, wg);
  if (gemv_m == 0 || columns == 0 || (!p.transpose_b && wg % columns) ||
      uint64_t(wg) * per_invocation > l.info().shared_memory_bytes)
    bad_tiling(l, "gemv tiling m " + std::to_string(gemv_m) + " columns " +
                      std::to_string(columns));
  const bool vec4 = p.transpose_b && e.push.k % 4 == 0;
  dispatch_tiles(l, Kernel::matmul_gemv, p.dtype, first_operands(e, 4), e.push,
                 ceil_div(e.push.n, columns), 1, p.batch,
                 {wg, gemv_m, columns, flag(p.transpose_b), flag(p.bias), activation_id(p),
                  flag(vec4)});
}

// Invocations per workgroup x columns per workgroup (B transposed).
void gemv_tunables(std::vector<Tunable>& list) {
  struct Pair {
    uint32_t wg, columns;
  };
  list.push_back(list_tunable<Pair>(
      {.id = "matmul.gemv",
       .description = "mat-vec for small M (GPUs), B transposed: WGxCOLUMNS (workgroup a power of 2)",
       .ops = {TuneOp::linear},
       .measures = [](const TuneShape& s) { return s.m <= 8; }},
      {.applies = [](const Tuning& b) { return b.matmul.prefer_gemv; },
       .current = [](const Tuning& b) {
         return Pair{b.matmul.gemv_tiles.workgroup, b.matmul.gemv_tiles.columns};
       },
       .others = {{64, 4}, {128, 2}, {128, 8}, {256, 4}, {256, 8}, {64, 8}, {32, 4}},
       .fits = [](const DeviceInfo& info, const Tuning&, const Pair& p) {
         return is_pow2(p.wg) && workgroup_fits(info, p.wg);
       },
       .text = [](const Pair& p) { return join({p.wg, p.columns}); },
       .apply = [](Tuning& u, const Pair& p) {
         u.matmul.gemv_tiles.workgroup = p.wg, u.matmul.gemv_tiles.columns = p.columns;
       }}));
}

// ---- coopmat: shaders/matmul_coopmat.comp on cooperative matrices (f16), the residual fused.

bool coopmat_can(const MatmulQuery& q) {
  const MatmulCoopmatTiles& c = q.tuning.coopmat_tiles;
  return c.api != vk::CoopmatApi::none &&
         q.supported(vk::coopmat_matmul_kernel(c.api), q.problem.dtype) && c.usable() &&
         q.problem.dtype == DType::f16;
}
// At least one MMA tile each way.
bool coopmat_takes(const MatmulQuery& q) {
  const MatmulCoopmatTiles& c = q.tuning.coopmat_tiles;
  const MatmulProblem& p = q.problem;
  return p.m >= c.m && p.n >= c.n && p.k >= c.k;
}
// The residual in the epilogue (bound whole).
bool coopmat_fuses(const MatmulQuery& q) {
  const MatmulProblem& p = q.problem;
  return !p.fusions.norm && !p.fusions.gated && p.whole;
}
void coopmat_emit(Lowering& l, const MatmulEmit& e) {
  emit_coopmat(l, vk::coopmat_matmul_kernel(l.tuning().matmul.coopmat_tiles.api), e);
}

// The configuration (subgroups and tiles per subgroup, k-steps per slice) and the MMA shape, as
// MxNxK/WMxWN/TMxTN/BK/SG: every configuration of coopmat_configs() with the current shape, and
// the current configuration with each other shape the device offers (the weight list's
// wq_coopmat runs the same tiling). Those lists are what tests/coopmat_test.cpp runs through the
// emulation, so the tuner can only pick a configuration checked against the references.
void coopmat_tunables(std::vector<Tunable>& list) {
  Tunable t;
  t.id = "matmul.coopmat";
  t.env = "VKFORMER_MATMUL_COOPMAT";
  t.description = "f16 matmul on cooperative matrices: MxNxK/WMxWN/TMxTN/BK/SG";
  t.ops = {TuneOp::linear, TuneOp::matmul};
  // f16, and at least one MMA tile (smaller M takes the mat-vec on GPUs).
  t.measures = [](const TuneShape& s) {
    return s.dtype == DType::f16 && s.m >= 16 && s.n >= 16 && s.k >= 16;
  };
  t.candidates = [](const DeviceInfo& info, const Tuning& base) {
    Candidates c;
    const MatmulCoopmatTiles& cur = base.matmul.coopmat_tiles;
    if (!cur.usable()) return c.take();
    auto add = [&](MatmulCoopmatTiles x) {
      if (!workgroup_fits(info, x.invocations()) || x.shared_bytes() > info.shared_memory_bytes)
        return;
      c.add(x.str(), [x](Tuning& u) { u.matmul.coopmat_tiles = x; });
    };
    add(cur);
    for (const CoopmatConfig& config : coopmat_configs()) {
      MatmulCoopmatTiles x = cur;
      x.config = config;
      add(x);
    }
    for (const vk::MmaShape& s : vk::coopmat_shapes(info, cur.api, vk::kCoopmatF16F32)) {
      MatmulCoopmatTiles x = cur;
      x.m = s.m, x.n = s.n, x.k = s.k;
      add(x);
    }
    return c.take();
  };
  list.push_back(std::move(t));
}

// ---- texel: shaders/matmul_texel.comp (CPU devices), A and B as texel buffers, one subgroup per
// workgroup; B [K, N] first transposed to [N, K] (a temporary) from transpose_min_m rows on.

bool texel_can(const MatmulQuery& q) {
  const MatmulProblem& p = q.problem;
  const uint64_t es = dtype_size(p.dtype);
  return q.supported(Kernel::matmul_texel, p.dtype) && q.tuning.texel_tiles.subgroup > 0 &&
         p.k % 4 == 0 && (p.transpose_b || p.n % 4 == 0) && p.a_bytes / es / 4 <= p.max_texels &&
         p.b_bytes / es / 4 <= p.max_texels;
}
bool texel_takes(const MatmulQuery& q) { return q.tuning.prefer_texel; }
void texel_details(const MatmulQuery& q, MatmulPlan& plan) {
  const MatmulTexelTiles& x = q.tuning.texel_tiles;
  const MatmulProblem& p = q.problem;
  plan.transpose_b_first = !p.transpose_b && q.supported(Kernel::matmul_transpose, p.dtype) &&
                           x.transpose_min_m > 0 && p.m >= x.transpose_min_m;
  const bool nt = p.transpose_b || plan.transpose_b_first;
  plan.tm = std::min<uint32_t>(nt ? x.tm : x.tm_nn, pow2_at_least(p.m));  // small M: fewer
  plan.tn = nt ? x.tn : x.tn_nn;                                             // wasted rows
  plan.qb = nt ? x.qb : x.qb_nn;
}

// Matches the push block of shaders/matmul_transpose.comp.
struct TransposePush {
  uint32_t k4, n4, blocks;
};

void texel_emit(Lowering& l, const MatmulEmit& e) {
  const MatmulPlan& plan = e.plan;
  const MatmulProblem& p = e.query.problem;
  const uint32_t sg = l.tuning().matmul.texel_tiles.subgroup;
  const bool transposed = p.transpose_b || plan.transpose_b_first;
  if (sg == 0 || sg > l.info().max_workgroup_size[0] || plan.tm == 0 || plan.tn == 0 ||
      plan.qb == 0 || (!transposed && plan.tn % 4))
    bad_tiling(l, "texel tiling " + std::to_string(plan.tm) + "x" + std::to_string(plan.tn) +
                      "x" + std::to_string(plan.qb));
  std::vector<Binding> operands = first_operands(e, 4);
  if (!p.transpose_b && plan.transpose_b_first) {
    const ValueDesc& b = l.value(operands[1].value);
    auto dims = b.shape.dims();
    std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
    const uint32_t bt = l.temp(Shape(dims), b.dtype);
    TransposePush t{};
    t.k4 = e.push.k / 4;
    t.n4 = e.push.n / 4;
    const uint64_t blocks = static_cast<uint64_t>(l.value(operands[1].value).shape.numel()) / 16;
    t.blocks = static_cast<uint32_t>(blocks);
    const uint32_t wg = std::min<uint32_t>(64, l.info().max_workgroup_invocations);
    l.dispatch(Kernel::matmul_transpose, p.dtype, {operands[1], {bt, true}}, PushBlock::of(t),
               l.rows_grid(ceil_div(blocks, wg)), {wg});
    operands[1] = {bt};  // the element strides of B's matrices stay K * N
  }
  dispatch_tiles(l, Kernel::matmul_texel, p.dtype, operands, e.push,
                 ceil_div(e.push.n, uint64_t(sg) * plan.tn), ceil_div(e.push.m, plan.tm), p.batch,
                 {sg, plan.tm, plan.tn, plan.qb, flag(transposed), flag(p.bias), activation_id(p)});
}

// Whether the texel kernels are taken (CPU devices, fixed-size subgroups with shuffles).
bool texel_taken(const Tuning& b) {
  return b.matmul.prefer_texel && b.matmul.texel_tiles.subgroup != 0;
}

// The register blocks, TM rows x TN columns per lane and QB k-quads per fetch batch, as
// VKFORMER_MATMUL_TEXEL writes them (tuning_matmul.cpp measured 16x2x4 / 16x4x2 best on one
// lavapipe; other CPUs, vector widths and cache sizes may differ), and the M from which B [K, N]
// is transposed first.
struct Block {
  uint32_t tm, tn, qb;
};
std::string block_text(const Block& b) { return join({b.tm, b.tn, b.qb}); }

void texel_tunables(std::vector<Tunable>& list) {
  list.push_back(list_tunable<Block>(
      {.id = "matmul.texel.nt",
       .env = "VKFORMER_MATMUL_TEXEL",
       .description = "texel matmul (CPU devices), B transposed as nn.Linear stores it: TMxTNxQB",
       .ops = {TuneOp::linear}},
      {.applies = texel_taken,
       .current = [](const Tuning& b) {
         const MatmulTexelTiles& x = b.matmul.texel_tiles;
         return Block{x.tm, x.tn, x.qb};
       },
       .others = {{16, 2, 2}, {16, 2, 8}, {8, 4, 4}, {8, 2, 4}, {16, 4, 2}, {12, 2, 4}, {32, 1, 4}},
       .text = block_text,
       .apply = [](Tuning& u, const Block& b) {
         MatmulTexelTiles& x = u.matmul.texel_tiles;
         x.tm = b.tm, x.tn = b.tn, x.qb = b.qb;
       }}));
  list.push_back(list_tunable<Block>(
      {.id = "matmul.texel.nn",
       .env = "VKFORMER_MATMUL_TEXEL",
       .description = "texel matmul (CPU devices), B not transposed: TMxTNxQB, TN a multiple of 4",
       .ops = {TuneOp::matmul}},
      {.applies = texel_taken,
       .current = [](const Tuning& b) {
         const MatmulTexelTiles& x = b.matmul.texel_tiles;
         return Block{x.tm_nn, x.tn_nn, x.qb_nn};
       },
       .others = {{16, 4, 4}, {8, 4, 4}, {8, 8, 2}, {16, 8, 1}, {12, 4, 2}},
       .text = block_text,
       .apply = [](Tuning& u, const Block& b) {
         MatmulTexelTiles& x = u.matmul.texel_tiles;
         x.tm_nn = b.tm, x.tn_nn = b.tn, x.qb_nn = b.qb;
       }}));
  list.push_back(integer_tunable(
      {.id = "matmul.texel.transpose_min_m",
       .env = "VKFORMER_MATMUL_TEXEL",
       .description =
           "texel matmul (CPU devices): the M from which B [K, N] is transposed first (0: never)",
       .ops = {TuneOp::matmul}},
      {.field = [](Tuning& u) -> uint32_t& { return u.matmul.texel_tiles.transpose_min_m; },
       .applies = texel_taken,
       .others = {0, 256, 512, 1024, 2048}}));
}

// ---- general: shaders/matmul.comp with the device's tiling, any shape: staged in shared memory
// on GPUs (optionally split over K), direct loads on CPU devices.

bool general_can(const MatmulQuery&) { return true; }
void general_details(const MatmulQuery& q, MatmulPlan& plan) {
  const MatmulTiles& t = q.tuning.tiles;
  const MatmulProblem& p = q.problem;
  if (!t.shared_memory) return;
  plan.vec4 = p.k % 4 == 0 && (p.transpose_b || p.n % 4 == 0) && t.bk % 4 == 0;
  if (!q.supported(Kernel::matmul_split, p.dtype) || !q.supported(Kernel::matmul_reduce, p.dtype))
    return;
  const uint64_t tiles = ((p.m + t.bm - 1) / t.bm) * ((p.n + t.bn - 1) / t.bn) * p.batch;
  const MatmulSplitK& s = q.tuning.split_k;
  uint64_t splits = 1;
  if (q.tuning.forced_splits)
    splits = q.tuning.forced_splits;
  else if (tiles < s.target_workgroups && p.k >= 2 * uint64_t(s.min_k))
    splits = std::min<uint64_t>({(s.target_workgroups + tiles - 1) / tiles, s.max_splits,
                                 p.k / s.min_k});
  // Each split gets a whole number of BK slices, and none is empty.
  const uint64_t slices = (p.k + t.bk - 1) / t.bk;
  plan.splits = static_cast<uint32_t>(std::max<uint64_t>(1, std::min(splits, slices)));
}

// Matches the push block of shaders/matmul_reduce.comp.
struct ReducePush {
  uint32_t total, mn, n, splits;
  float alpha;
};

// With plan.splits > 1, matmul_split writes fp32 partial sums of K ranges to a temporary and
// matmul_reduce adds them.
void general_emit(Lowering& l, const MatmulEmit& e) {
  const MatmulTiles& t = l.tuning().matmul.tiles;
  const DeviceInfo& info = l.info();
  const MatmulProblem& p = e.query.problem;
  if (t.tm == 0 || t.tn == 0 || t.bk == 0 || t.bm % t.tm || t.bn % t.tn || t.invocations() == 0 ||
      t.invocations() > info.max_workgroup_invocations ||
      t.invocations() > info.max_workgroup_size[0] || t.shared_bytes() > info.shared_memory_bytes)
    bad_tiling(l, "matmul tiling " + std::to_string(t.bm) + "x" + std::to_string(t.bn) + "x" +
                      std::to_string(t.bk) + " / " + std::to_string(t.tm) + "x" +
                      std::to_string(t.tn));
  const bool vec4 = e.plan.vec4 && (p.transpose_b || t.bn % 4 == 0);
  const std::vector<uint32_t> spec = {static_cast<uint32_t>(t.invocations()),
                                      t.bm,
                                      t.bn,
                                      t.shared_memory ? t.bk : 1u,
                                      t.tm,
                                      t.tn,
                                      flag(t.shared_memory),
                                      flag(p.transpose_b),
                                      flag(p.bias),
                                      activation_id(p),
                                      flag(vec4)};
  MatmulPush push = e.push;
  const std::vector<Binding> operands = first_operands(e, 4);
  const uint64_t x_tiles = ceil_div(push.n, t.bn), y_tiles = ceil_div(push.m, t.bm);
  // Split K only where out's rows are whole (matmul_reduce writes rows of n, not of ldo) and the
  // fp32 partial sums fit one binding.
  uint64_t splits = push.ldo == push.n ? e.plan.splits : 1;
  const uint64_t mn = uint64_t(push.m) * push.n;
  while (splits > 1 && p.batch * splits * mn * 4 > l.tuning().max_binding_bytes) --splits;
  if (splits <= 1) {
    dispatch_tiles(l, Kernel::matmul, p.dtype, operands, push, x_tiles, y_tiles, p.batch, spec);
    return;
  }
  // Whole BK slices per split, and no empty split.
  const uint64_t slices = ceil_div(push.k, t.bk);
  push.k_split = static_cast<uint32_t>(ceil_div(slices, splits) * t.bk);
  push.splits = ceil_div(push.k, push.k_split);
  const uint32_t part = l.temp(Shape{static_cast<int64_t>(p.batch * push.splits),
                                     static_cast<int64_t>(push.m), static_cast<int64_t>(push.n)},
                               DType::f32);
  dispatch_tiles(l, Kernel::matmul_split, p.dtype,
                 {operands[0], operands[1], operands[0], {part, true}}, push, x_tiles, y_tiles,
                 p.batch * push.splits, spec);

  ReducePush r{};
  const uint64_t total = p.batch * mn;
  r.total = static_cast<uint32_t>(total);
  r.mn = static_cast<uint32_t>(mn);
  r.n = push.n;
  r.splits = push.splits;
  r.alpha = push.alpha;
  const uint32_t wg = std::min<uint32_t>(256, info.max_workgroup_invocations);
  l.dispatch(Kernel::matmul_reduce, p.dtype,
             {{part}, p.bias ? operands[2] : Binding{part}, operands[3]}, PushBlock::of(r),
             l.rows_grid(ceil_div(total, wg)), {wg, flag(p.bias), activation_id(p)});
}

// The shared-memory tiling (GPUs), BMxBNxBK/TMxTN as VKFORMER_MATMUL_TILES writes it, and how
// far K is split (GPUs only, whatever the current target, 0 included).
void general_tunables(std::vector<Tunable>& list) {
  struct Tiles {
    uint32_t bm, bn, bk, tm, tn;
  };
  // M > 8: smaller M takes the mat-vec.
  auto several = [](const TuneShape& s) { return s.m > 8; };
  list.push_back(list_tunable<Tiles>(
      {.id = "matmul.tiles",
       .env = "VKFORMER_MATMUL_TILES",
       .description = "general matmul staged in shared memory (GPUs): BMxBNxBK/TMxTN",
       .ops = {TuneOp::linear, TuneOp::matmul},
       .measures = several},
      {.applies = [](const Tuning& b) {
         return b.matmul.tiles.shared_memory && !b.matmul.prefer_texel;
       },
       .current = [](const Tuning& b) {
         const MatmulTiles& t = b.matmul.tiles;
         return Tiles{t.bm, t.bn, t.bk, t.tm, t.tn};
       },
       .others = {{128, 128, 16, 8, 8}, {128, 128, 8, 8, 8}, {128, 128, 32, 8, 8}, {64, 64, 16, 4, 4},
                  {64, 64, 32, 4, 4}, {128, 64, 16, 8, 4}, {64, 128, 16, 4, 8}, {32, 32, 16, 2, 2}},
       .fits = [](const DeviceInfo& info, const Tuning& b, const Tiles& x) {
         MatmulTiles m = b.matmul.tiles;
         m.bm = x.bm, m.bn = x.bn, m.bk = x.bk, m.tm = x.tm, m.tn = x.tn;
         return workgroup_fits(info, m.invocations()) && m.shared_bytes() <= info.shared_memory_bytes;
       },
       .text = [](const Tiles& x) { return join({x.bm, x.bn, x.bk}) + "/" + join({x.tm, x.tn}); },
       .apply = [](Tuning& u, const Tiles& x) {
         MatmulTiles& m = u.matmul.tiles;
         m.bm = x.bm, m.bn = x.bn, m.bk = x.bk, m.tm = x.tm, m.tn = x.tn;
       }}));
  list.push_back(integer_tunable(
      {.id = "matmul.split_k",
       .description = "general matmul (GPUs): split K while the output has fewer tiles than this "
                      "(0: never)",
       .ops = {TuneOp::linear, TuneOp::matmul},
       .measures = several},
      {.field = [](Tuning& u) -> uint32_t& { return u.matmul.split_k.target_workgroups; },
       .applies = [](const Tuning& b) {
         return !b.cpu_device && b.matmul.tiles.shared_memory && !b.matmul.prefer_texel;
       },
       .others_on = split_targets}));
}

// In the order of preference; the last takes every problem. VKFORMER_MATMUL_PATH may force any
// of them by name where it can run the problem.
const MatmulPathEntry kFloatPaths[] = {
    {.name = "gemv", .can = gemv_can, .takes = gemv_takes, .details = gemv_details,
     .emit = gemv_emit, .tunables = gemv_tunables},
    {.name = "coopmat", .can = coopmat_can, .takes = coopmat_takes, .fuses = coopmat_fuses,
     .emit = coopmat_emit, .tunables = coopmat_tunables},
    {.name = "texel", .can = texel_can, .takes = texel_takes, .details = texel_details,
     .emit = texel_emit, .tunables = texel_tunables},
    {.name = "general", .can = general_can, .details = general_details, .emit = general_emit,
     .tunables = general_tunables},
};

}  // namespace

std::span<const MatmulPathEntry> float_matmul_paths() { return kFloatPaths; }

}  // namespace vkformer::kernels
