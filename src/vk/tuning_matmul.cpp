#include "tuning_matmul.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tuning_env.hpp"
#include "vkformer/error.hpp"

namespace vkformer::vk {

namespace {

// CPU devices, shapes the texel kernel cannot take: one workgroup of 8 invocations (one SIMD
// vector on lavapipe) computes 4 rows x 16 columns reading A and B directly: rows uniform across
// the workgroup (TY = 1), 8 accumulators per invocation, and no barriers.
MatmulTiles cpu_matmul_tiles() {
  MatmulTiles m;
  m.bm = 4;
  m.bn = 16;
  m.bk = 1;
  m.tm = 4;
  m.tn = 2;
  m.shared_memory = false;
  return m;
}

bool fits(const MatmulTiles& m, const DeviceInfo& info) {
  return m.invocations() <= info.max_workgroup_invocations &&
         m.invocations() <= info.max_workgroup_size[0] &&
         m.shared_bytes() <= info.shared_memory_bytes;
}

// GPUs: discrete ones (large register files, 48+ KiB of shared memory) get 128 x 128 tiles of
// 8 x 8 blocks per invocation, as in the classic SGEMM kernels; others 64 x 64 tiles of 4 x 4.
// Both use 256 invocations. Shrunk until they fit the device's limits.
MatmulTiles gpu_matmul_tiles(const DeviceInfo& info) {
  MatmulTiles m;
  if (info.type == "discrete" && info.shared_memory_bytes >= 48 * 1024) {
    m.bm = m.bn = 128;
    m.tm = m.tn = 8;
  }
  while (!fits(m, info) && m.bm > m.tm) {
    m.bm /= 2;
    m.bn /= 2;
  }
  return m;
}

// Measured on lavapipe 22.3 (LLVM 15, 8 lanes of 256 bits, AVX-512 host): 16-row blocks, 16 x 2
// with B transposed (4 quads a batch) and 16 x 4 without (2 quads), reach about half of the
// device's FMA rate on 512 to 2048 cubes. Their 32 and 64 accumulators do not stay in registers
// (every texel fetch is a call, and registers are caller-saved), but spilling costs less than the
// fetches a smaller block needs: 8 x 4 and 12 x 2 blocks ran 10 to 25% slower, 4 x 4 40% slower.
// VKFORMER_MATMUL_TEXEL overrides (other CPUs may prefer other blocks).
MatmulTexelTiles texel_tiles(const DeviceInfo& info) {
  MatmulTexelTiles t;
  bool fixed = info.min_subgroup_size == info.max_subgroup_size && info.subgroup_size >= 4 &&
               info.subgroup_size <= 64 && info.subgroup_size <= info.max_workgroup_size[0];
  t.subgroup = info.subgroup_shuffle && fixed ? info.subgroup_size : 0;
  return t;
}

// Splitting K pays when the output tiles cannot fill the device: aim for two workgroups per
// compute unit. Drivers that do not report their compute units get a guess by device type.
MatmulSplitK split_k_for(const DeviceInfo& info, bool cpu_device) {
  MatmulSplitK s;
  if (cpu_device) return s;
  uint32_t units = info.compute_units;
  if (units == 0) units = info.type == "discrete" ? 64 : 16;
  s.target_workgroups = 2 * units;
  return s;
}

// The MMA shape for f16 x f16 + f32 -> f32 at subgroup scope: 16 x 16 x 16 where offered (the
// most common), else the largest such shape.
MatmulCoopmatTiles coopmat_tiles(const DeviceInfo& info) {
  MatmulCoopmatTiles t;
  if (!info.cooperative_matrix_nv) return t;
  const CooperativeMatrixShape* best = nullptr;
  for (const auto& s : info.cooperative_matrix_nv_shapes) {
    if (s.a_type != "f16" || s.b_type != "f16" || s.c_type != "f32" || s.d_type != "f32")
      continue;
    if (s.m == 16 && s.n == 16 && s.k == 16) {
      best = &s;
      break;
    }
    if (!best || s.m * s.n * s.k > best->m * best->n * best->k) best = &s;
  }
  if (!best) return t;
  t.m = best->m;
  t.n = best->n;
  t.k = best->k;
  t.subgroup = info.subgroup_size;
  if (t.invocations() > info.max_workgroup_invocations ||
      t.invocations() > info.max_workgroup_size[0] || t.shared_bytes() > info.shared_memory_bytes)
    t.m = t.n = t.k = 0;
  return t;
}

[[noreturn]] void bad_env(const char* name, const char* value, const std::string& expected) {
  throw Error(ErrorCode::invalid_argument,
              std::string(name) + "='" + value + "': expected " + expected);
}

// VKFORMER_MATMUL_TILES="BMxBNxBK/TMxTN[/direct]" replaces the general tiling (for tuning
// experiments and for tests that run the GPU tiling on a CPU device). Rejected unless it fits the
// device: tiles divisible by the per-invocation block, workgroup and shared memory within limits.
bool matmul_tiles_from_env(const DeviceInfo& info, MatmulTiles* out) {
  const char* env = std::getenv("VKFORMER_MATMUL_TILES");
  if (!env || !*env) return false;
  MatmulTiles m;
  unsigned bm = 0, bn = 0, bk = 0, tm = 0, tn = 0;
  char mode[16] = {};
  int fields = std::sscanf(env, "%ux%ux%u/%ux%u/%15s", &bm, &bn, &bk, &tm, &tn, mode);
  bool direct = fields == 6 && std::string(mode) == "direct";
  m.bm = bm;
  m.bn = bn;
  m.bk = direct ? 1 : bk;
  m.tm = tm;
  m.tn = tn;
  m.shared_memory = !direct;
  bool ok = (fields == 5 || direct) && bm && bn && bk && tm && tn && bm % tm == 0 &&
            bn % tn == 0 && fits(m, info);
  if (!ok)
    bad_env("VKFORMER_MATMUL_TILES", env,
            "BMxBNxBK/TMxTN or BMxBNxBK/TMxTN/direct with BM % TM == 0, BN % TN == 0, "
            "(BM/TM)*(BN/TN) invocations and 4*BK*(BM+BN+2) bytes of shared memory within the "
            "limits of device '" + info.name + "'");
  *out = m;
  return true;
}

// VKFORMER_MATMUL_TEXEL="TMxTNxQB/TMxTNxQB[/M]": the texel kernel's blocks with B transposed and
// not (TN of the second a multiple of 4, TM*TN <= 128 each), and the M from which B [K, N] is
// transposed first (0: never).
void texel_tiles_from_env(MatmulTexelTiles* t) {
  const char* env = std::getenv("VKFORMER_MATMUL_TEXEL");
  if (!env || !*env) return;
  unsigned v[7] = {};
  v[6] = t->transpose_min_m;
  int fields = std::sscanf(env, "%ux%ux%u/%ux%ux%u/%u", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                           &v[6]);
  bool ok = (fields == 6 || fields == 7) &&
            std::all_of(v, v + 6, [](unsigned x) { return x > 0; }) && v[0] * v[1] <= 128 &&
            v[3] * v[4] <= 128 && v[4] % 4 == 0 && v[2] <= 16 && v[5] <= 16;
  if (!ok)
    bad_env("VKFORMER_MATMUL_TEXEL", env,
            "TMxTNxQB/TMxTNxQB[/M] (B transposed / not, and the M from which B is transposed "
            "first) with TM*TN <= 128, QB <= 16 and the second TN a multiple of 4");
  t->tm = v[0], t->tn = v[1], t->qb = v[2];
  t->tm_nn = v[3], t->tn_nn = v[4], t->qb_nn = v[5];
  t->transpose_min_m = v[6];
}

std::optional<MatmulPath> path_from_env() {
  const char* env = std::getenv("VKFORMER_MATMUL_PATH");
  if (!env || !*env || std::strcmp(env, "auto") == 0) return std::nullopt;
  for (MatmulPath p : {MatmulPath::general, MatmulPath::texel, MatmulPath::gemv,
                       MatmulPath::coopmat})
    if (std::strcmp(env, path_name(p)) == 0) return p;
  bad_env("VKFORMER_MATMUL_PATH", env, "auto, general, texel, gemv or coopmat");
}

uint32_t splits_from_env() {
  return static_cast<uint32_t>(env_number("VKFORMER_MATMUL_SPLIT_K", 1, 64).value_or(0));
}

uint32_t pow2_at_least(uint64_t x) {
  uint32_t p = 1;
  while (p < x) p *= 2;
  return p;
}

}  // namespace

uint32_t MatmulCoopmatTiles::shared_bytes() const {
  const uint32_t pad = 8;  // halves per row: keeps 16-byte rows apart in the banks
  uint32_t a = bm() * (bk() + pad);
  uint32_t b = std::max(bn() * (bk() + pad), bk() * (bn() + pad));
  return (a + b) * 2 + warps_m * warps_n * m * n * 4;
}

const char* path_name(MatmulPath path) {
  switch (path) {
    case MatmulPath::general: return "general";
    case MatmulPath::texel: return "texel";
    case MatmulPath::gemv: return "gemv";
    case MatmulPath::coopmat: return "coopmat";
  }
  return "?";
}

MatmulTuning matmul_tuning_for(const DeviceInfo& info, bool cpu_device) {
  MatmulTuning t;
  t.tiles = cpu_device ? cpu_matmul_tiles() : gpu_matmul_tiles(info);
  t.texel_tiles = texel_tiles(info);
  t.prefer_texel = cpu_device && t.texel_tiles.subgroup > 0;
  t.prefer_gemv = !cpu_device;
  t.gemv_tiles.workgroup = std::min<uint32_t>({t.gemv_tiles.workgroup,
                                               info.max_workgroup_invocations,
                                               info.max_workgroup_size[0]});
  t.split_k = split_k_for(info, cpu_device);
  t.coopmat_tiles = coopmat_tiles(info);
  texel_tiles_from_env(&t.texel_tiles);
  t.forced_path = path_from_env();
  t.forced_splits = splits_from_env();
  if (matmul_tiles_from_env(info, &t.tiles) && !t.forced_path) t.forced_path = MatmulPath::general;
  return t;
}

bool matmul_path_fits(MatmulPath path, const MatmulTuning& t, const MatmulProblem& p,
                      const MatmulKernels& k) {
  switch (path) {
    case MatmulPath::general: return true;
    case MatmulPath::texel:
      return k.texel && t.texel_tiles.subgroup > 0 && p.k % 4 == 0 &&
             (p.transpose_b || p.n % 4 == 0) && p.texel_fits;
    case MatmulPath::gemv: return k.gemv && p.m <= t.gemv_tiles.max_m;
    case MatmulPath::coopmat:
      return k.coopmat && t.coopmat_tiles.m > 0 && p.dtype == DType::f16;
  }
  return false;
}

MatmulPlan plan_matmul(const MatmulTuning& t, const MatmulProblem& p, const MatmulKernels& k) {
  MatmulPlan plan;
  auto can = [&](MatmulPath path) { return matmul_path_fits(path, t, p, k); };
  const MatmulCoopmatTiles& c = t.coopmat_tiles;
  if (t.forced_path && can(*t.forced_path))
    plan.path = *t.forced_path;
  else if (t.prefer_gemv && can(MatmulPath::gemv))
    plan.path = MatmulPath::gemv;  // decoding: B is read once, nothing to tile
  else if (can(MatmulPath::coopmat) && p.m >= c.m && p.n >= c.n && p.k >= c.k)
    plan.path = MatmulPath::coopmat;
  else if (t.prefer_texel && can(MatmulPath::texel))
    plan.path = MatmulPath::texel;

  switch (plan.path) {
    case MatmulPath::texel: {
      const MatmulTexelTiles& x = t.texel_tiles;
      plan.transpose_b_first = !p.transpose_b && k.transpose && x.transpose_min_m > 0 &&
                               p.m >= x.transpose_min_m;
      const bool nt = p.transpose_b || plan.transpose_b_first;
      plan.tm = std::min<uint32_t>(nt ? x.tm : x.tm_nn, pow2_at_least(p.m));  // small M: fewer
      plan.tn = nt ? x.tn : x.tn_nn;                                             // wasted rows
      plan.qb = nt ? x.qb : x.qb_nn;
      break;
    }
    case MatmulPath::gemv: plan.gemv_m = pow2_at_least(p.m); break;
    case MatmulPath::coopmat: break;
    case MatmulPath::general: {
      if (!t.tiles.shared_memory) break;
      plan.vec4 = p.k % 4 == 0 && (p.transpose_b || p.n % 4 == 0) && t.tiles.bk % 4 == 0;
      if (!k.split) break;
      const uint64_t tiles = ((p.m + t.tiles.bm - 1) / t.tiles.bm) *
                             ((p.n + t.tiles.bn - 1) / t.tiles.bn) * p.batch;
      const MatmulSplitK& s = t.split_k;
      uint64_t splits = 1;
      if (t.forced_splits)
        splits = t.forced_splits;
      else if (tiles < s.target_workgroups && p.k >= 2 * uint64_t(s.min_k))
        splits = std::min<uint64_t>({(s.target_workgroups + tiles - 1) / tiles, s.max_splits,
                                     p.k / s.min_k});
      // Each split gets a whole number of BK slices, and none is empty.
      const uint64_t slices = (p.k + t.tiles.bk - 1) / t.tiles.bk;
      plan.splits = static_cast<uint32_t>(std::max<uint64_t>(1, std::min(splits, slices)));
      break;
    }
  }
  return plan;
}

}  // namespace vkformer::vk
