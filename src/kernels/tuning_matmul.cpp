#include "tuning_matmul.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tuning_env.hpp"
#include "vkformer/error.hpp"

namespace vkformer::kernels {

namespace {

// CPU devices, shapes the texel kernel cannot take: one workgroup of 8 invocations (one SIMD
// vector on lavapipe) computes 4 rows x 16 columns reading A and B directly: rows uniform across
// the workgroup (TY = 1), 8 accumulators per invocation, and no barriers.
MatmulTiles cpu_matmul_tiles() { return {.bm = 4, .bn = 16, .bk = 1, .tm = 4, .tn = 2, .shared_memory = false}; }

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

std::string str(uint64_t n) { return std::to_string(n); }

bool coopmat_fits(const MatmulCoopmatTiles& t, const DeviceInfo& info) {
  return t.invocations() <= info.max_workgroup_invocations &&
         t.invocations() <= info.max_workgroup_size[0] &&
         t.shared_bytes() <= info.shared_memory_bytes;
}

bool power_of_two(uint64_t x) { return x && !(x & (x - 1)); }

// The emulation's subgroups are its own: the device's size where that is one of 4..128 (each
// emulated subgroup then is one real subgroup), else 32.
uint32_t emulated_subgroup(const DeviceInfo& info) {
  const uint32_t s = info.subgroup_size;
  return power_of_two(s) && s >= 4 && s <= 128 ? s : 32;
}

// VKFORMER_COOPMAT=auto|emulate|off: the device's own cooperative matrices (KHR, else NV), the
// emulation on any device (tests, experiments), or none.
vk::CoopmatApi coopmat_api_for(const DeviceInfo& info) {
  vk::EnvOverride env("VKFORMER_COOPMAT");
  const std::optional<std::vector<uint32_t>> auto_ = env.match("auto"),
                                             emulate = env.match("emulate"), off = env.match("off");
  if (!env.set() || auto_) return vk::coopmat_api(info);
  if (emulate) return vk::CoopmatApi::emulated;
  if (off) return vk::CoopmatApi::none;
  env.reject("expected auto, emulate or off");
}

// The static table: the MMA shape vk::coopmat_mnk answers, and the first configuration of
// coopmat_configs() that fits the device's workgroup and shared-memory limits.
MatmulCoopmatTiles coopmat_tiles_for(const DeviceInfo& info, vk::CoopmatApi api) {
  MatmulCoopmatTiles t;
  if (api == vk::CoopmatApi::none) return t;
  const std::optional<vk::MmaShape> shape = vk::coopmat_mnk(info, api, vk::kCoopmatF16F32);
  if (!shape) return t;
  t.m = shape->m, t.n = shape->n, t.k = shape->k;
  t.subgroup = api == vk::CoopmatApi::emulated ? emulated_subgroup(info) : info.subgroup_size;
  for (const CoopmatConfig& c : coopmat_configs()) {
    t.config = c;
    if (coopmat_fits(t, info)) {
      t.api = api;
      return t;
    }
  }
  return MatmulCoopmatTiles{};
}

// VKFORMER_MATMUL_COOPMAT="MxNxK/WMxWN/TMxTN/BK[/SG]": the cooperative-matrix tiling (MMA shape,
// subgroups, tiles per subgroup, k-steps per slice, and for the emulation its subgroup size),
// for tests and tuning experiments. Rejected, naming the rule, unless the device's API offers
// the shape and the tiling fits.
bool coopmat_tiles_from_env(const DeviceInfo& info, MatmulCoopmatTiles* t) {
  vk::EnvOverride env("VKFORMER_MATMUL_COOPMAT");
  if (!env.set()) return false;
  std::optional<std::vector<uint32_t>> v = env.match("#x#x#/#x#/#x#/#/#");
  if (!v) {
    v = env.match("#x#x#/#x#/#x#/#");
    if (v) v->push_back(0);
  }
  if (!v)
    env.reject("expected MxNxK/WMxWN/TMxTN/BK or MxNxK/WMxWN/TMxTN/BK/SG (whole numbers: the MMA "
               "shape, subgroups, tiles per subgroup, k-steps per slice, subgroup size)");
  const std::vector<uint32_t>& x = *v;
  if (t->api == vk::CoopmatApi::none)
    env.reject("device '" + info.name + "' has no cooperative matrices that vkformer can use " +
               "(VKFORMER_COOPMAT=emulate runs the emulation on any device)");
  const char* names[] = {"WM", "WN", "TM", "TN", "BK"};
  for (size_t i = 0; i < 5; ++i) env.check_range(names[i], x[3 + i], 1, 16);
  const vk::MmaShape shape{x[0], x[1], x[2]};
  const std::vector<vk::MmaShape> offered = vk::coopmat_shapes(info, t->api, vk::kCoopmatF16F32);
  if (std::find(offered.begin(), offered.end(), shape) == offered.end()) {
    std::string list;
    for (const vk::MmaShape& o : offered) list += (list.empty() ? "" : ", ") + o.str();
    env.reject("MMA shape " + shape.str() + " is not one that " + vk::coopmat_api_name(t->api) +
               " cooperative matrices offer for f16 x f16 + f32 here (" + list + ")");
  }
  MatmulCoopmatTiles n = *t;
  n.m = shape.m, n.n = shape.n, n.k = shape.k;
  n.config = {x[3], x[4], x[5], x[6], x[7]};
  if (x[8] != 0) {
    if (t->api != vk::CoopmatApi::emulated && x[8] != info.subgroup_size)
      env.reject("SG " + str(x[8]) + " is not the subgroup size of device '" + info.name +
                 "' (" + str(info.subgroup_size) + "); only the emulation takes another");
    if (!power_of_two(x[8]) || x[8] < 4 || x[8] > 128)
      env.reject("SG " + str(x[8]) + " is not a power of two from 4 to 128");
    n.subgroup = x[8];
  }
  env.check_workgroup("SG*WM*WN", n.invocations(), info);
  if (n.shared_bytes() > info.shared_memory_bytes)
    env.reject(str(n.shared_bytes()) + " bytes of shared memory, above " +
               "maxComputeSharedMemorySize = " + str(info.shared_memory_bytes) + " of device '" +
               info.name + "'");
  *t = n;
  return true;
}

// Weights in another dtype (shaders/matmul_wq*.comp). GPUs: 64 x 64 tiles of 4 x 4 staged in
// shared memory and 16 lanes per mat-vec output, shrunk to the device's limits. CPU devices
// (a workgroup per thread, barriers costly): the general kernel's direct 4 x 16 tiles of 4 x 2
// (one SIMD vector of 8 invocations, rows uniform), and one invocation per mat-vec output.
MatmulWeightTiles weight_tiles_for(const DeviceInfo& info, bool cpu_device) {
  MatmulWeightTiles w;
  if (cpu_device) {
    w.bm = 4;
    w.bn = 16;
    w.tm = 4;
    w.tn = 2;
    w.shared_memory = false;
    w.gemv_workgroup = 8;
    w.gemv_lanes = 1;
    w.texel = true;  // storage-buffer loads are lane loops there (bench/RESULTS.md)
  } else {
    w.bm = w.bn = 64;
    w.gemv_workgroup = 128;
    w.gemv_lanes = 16;
  }
  while ((w.invocations() > info.max_workgroup_invocations ||
          w.invocations() > info.max_workgroup_size[0] ||
          w.shared_bytes() > info.shared_memory_bytes) && w.bm > w.tm) {
    w.bm /= 2;
    w.bn /= 2;
  }
  w.gemv_workgroup = std::min<uint32_t>({w.gemv_workgroup, info.max_workgroup_invocations,
                                         info.max_workgroup_size[0]});
  w.gemv_lanes = std::min(w.gemv_lanes, w.gemv_workgroup);
  // The integer-dot mat-vec (wq_idot) is off until a GPU run has measured it: it changes the
  // numerics (8-bit activations) and does not take linear's fusions, so a decoding layer would
  // get more dispatches than with wq_gemv. `vkformer tune` (matmul.wq_idot.rows) and
  // VKFORMER_MATMUL_INTEGER_DOT turn it on where a device measures it faster.
  w.integer_dot_rows = 0;
  return w;
}

// VKFORMER_MATMUL_TILES="BMxBNxBK/TMxTN[/direct]" replaces the general tiling (for tuning
// experiments and for tests that run the GPU tiling on a CPU device). Rejected, naming the rule
// that fails, unless it fits the device: tiles divisible by the per-invocation block, workgroup
// and shared memory within limits.
bool matmul_tiles_from_env(const DeviceInfo& info, MatmulTiles* out) {
  vk::EnvOverride env("VKFORMER_MATMUL_TILES");
  if (!env.set()) return false;
  const std::optional<std::vector<uint32_t>> staged = env.match("#x#x#/#x#"),
                                             direct_loads = env.match("#x#x#/#x#/direct");
  const bool direct = direct_loads.has_value();
  const std::optional<std::vector<uint32_t>>& v = direct ? direct_loads : staged;
  if (!v) env.reject("expected BMxBNxBK/TMxTN or BMxBNxBK/TMxTN/direct (whole numbers)");
  const char* names[] = {"BM", "BN", "BK", "TM", "TN"};
  for (size_t i = 0; i < 5; ++i) env.check_range(names[i], (*v)[i], 1, vk::kMaxTileSide);
  MatmulTiles m;
  m.bm = (*v)[0], m.bn = (*v)[1], m.bk = direct ? 1 : (*v)[2], m.tm = (*v)[3], m.tn = (*v)[4];
  m.shared_memory = !direct;
  if (m.bm % m.tm) env.reject("BM " + str(m.bm) + " is not a multiple of TM " + str(m.tm));
  if (m.bn % m.tn) env.reject("BN " + str(m.bn) + " is not a multiple of TN " + str(m.tn));
  env.check_workgroup("(BM/TM)*(BN/TN)", m.invocations(), info);
  if (m.shared_bytes() > info.shared_memory_bytes)
    env.reject(std::string(direct ? "4*(BM+BN+2)" : "4*BK*(BM+BN+2)") + " = " +
               str(m.shared_bytes()) + " bytes of shared memory, above " +
               "maxComputeSharedMemorySize = " + str(info.shared_memory_bytes) + " of device '" +
               info.name + "'");
  *out = m;
  return true;
}

// One register block of the texel kernel ("the first block (B transposed)"): TM*TN accumulators
// per invocation (at most 128) and QB k-quads per fetch batch (at most 16).
void check_texel_block(const vk::EnvOverride& env, const std::string& block, uint32_t tm, uint32_t tn,
                       uint32_t qb) {
  env.check_range("TM of " + block, tm, 1, 128);
  env.check_range("TN of " + block, tn, 1, 128);
  env.check_range("QB of " + block, qb, 1, 16);
  if (uint64_t(tm) * tn > 128)
    env.reject("TM*TN of " + block + " is " + str(uint64_t(tm) * tn) + ", expected at most 128");
}

// VKFORMER_MATMUL_TEXEL="TMxTNxQB/TMxTNxQB[/M]": the texel kernel's blocks with B transposed and
// not (TN of the second a multiple of 4, TM*TN <= 128 each), and the M from which B [K, N] is
// transposed first (0: never).
void texel_tiles_from_env(MatmulTexelTiles* t) {
  vk::EnvOverride env("VKFORMER_MATMUL_TEXEL");
  if (!env.set()) return;
  std::optional<std::vector<uint32_t>> v = env.match("#x#x#/#x#x#");
  if (v)
    v->push_back(t->transpose_min_m);
  else
    v = env.match("#x#x#/#x#x#/#");
  if (!v)
    env.reject("expected TMxTNxQB/TMxTNxQB or TMxTNxQB/TMxTNxQB/M (whole numbers: the blocks "
               "with B transposed and not, and the M from which B is transposed first)");
  const std::vector<uint32_t>& x = *v;
  check_texel_block(env, "the first block (B transposed)", x[0], x[1], x[2]);
  check_texel_block(env, "the second block (B not transposed)", x[3], x[4], x[5]);
  if (x[4] % 4)
    env.reject("TN " + str(x[4]) + " of the second block (B not transposed) is not a multiple "
               "of 4");
  t->tm = x[0], t->tn = x[1], t->qb = x[2];
  t->tm_nn = x[3], t->tn_nn = x[4], t->qb_nn = x[5];
  t->transpose_min_m = x[6];
}

// The paths of the float list (matmul_paths_float.cpp) that VKFORMER_MATMUL_PATH may force.
std::optional<std::string> path_from_env() {
  const char* env = std::getenv("VKFORMER_MATMUL_PATH");
  if (!env || !*env || std::strcmp(env, "auto") == 0) return std::nullopt;
  for (const char* path : {"general", "texel", "gemv", "coopmat"})
    if (std::strcmp(env, path) == 0) return path;
  vk::EnvOverride("VKFORMER_MATMUL_PATH").reject("expected auto, general, texel, gemv or coopmat");
}

uint32_t splits_from_env() {
  return static_cast<uint32_t>(vk::env_number("VKFORMER_MATMUL_SPLIT_K", 1, 64).value_or(0));
}

// VKFORMER_MATMUL_WQ_TEXEL="TMxTN/TN": the quantized-weight texel kernel's block for M > 1 and
// the columns per lane for M = 1 (TM*TN <= 128), for tuning experiments.
void weight_texel_from_env(MatmulWeightTiles* w) {
  vk::EnvOverride env("VKFORMER_MATMUL_WQ_TEXEL");
  if (!env.set()) return;
  const std::optional<std::vector<uint32_t>> v = env.match("#x#/#");
  if (!v) env.reject("expected TMxTN/TN (whole numbers: the block for M > 1, columns for M = 1)");
  check_texel_block(env, "the block", (*v)[0], (*v)[1], 1);
  check_texel_block(env, "the mat-vec block", 1, (*v)[2], 1);
  w->texel_tm = (*v)[0], w->texel_tn = (*v)[1], w->texel_gemv_tn = (*v)[2];
}

void weight_texel_limit_from_env(MatmulWeightTiles* w) {
  if (auto limit = vk::env_number("VKFORMER_MATMUL_WQ_TEXEL_LIMIT", 1, INT64_MAX))
    w->texel_limit = static_cast<uint64_t>(*limit);
  // VKFORMER_MATMUL_WQ_STREAM_BYTES: the weight size from which mat-vecs stream through the rows
  // kernel (0, the default: all; tests set more to run the lanes-on-rows kernel).
  if (auto bytes = vk::env_number("VKFORMER_MATMUL_WQ_STREAM_BYTES", 0, INT64_MAX))
    w->texel_gemv_stream_bytes = static_cast<uint64_t>(*bytes);
}

// VKFORMER_MATMUL_INTEGER_DOT=rows: products of up to this many rows take the integer-dot paths
// (0: none), on any device with the feature (tests run them on lavapipe this way).
void integer_dot_from_env(MatmulWeightTiles* w) {
  if (auto rows = vk::env_number("VKFORMER_MATMUL_INTEGER_DOT", 0, 64))
    w->integer_dot_rows = static_cast<uint32_t>(*rows);
}

}  // namespace

const std::vector<CoopmatConfig>& coopmat_configs() {
  // {warps_m, warps_n, tiles_m, tiles_n, bk_tiles}. At 16x16x16: 128x128 tiles (4 subgroups of
  // 4x4 MMA tiles, the shape of the fast cuBLAS-style kernels), 64x64 with two k-steps per slice,
  // a tall 64x32 one, a 48x32 one with an odd tile count, and one subgroup with one tile for
  // devices with little shared memory.
  static const std::vector<CoopmatConfig> configs = {
      {2, 2, 4, 4, 1}, {2, 2, 2, 2, 2}, {4, 1, 1, 2, 2}, {1, 2, 3, 1, 2}, {1, 1, 1, 1, 1},
  };
  return configs;
}

uint64_t MatmulCoopmatTiles::shared_bytes() const {
  const uint64_t pad = 8;  // halves per row: keeps 16-byte rows apart in the banks
  const uint64_t a = uint64_t(bm()) * (bk() + pad);
  const uint64_t b = std::max(uint64_t(bn()) * (bk() + pad), uint64_t(bk()) * (bn() + pad));
  const uint64_t warps = uint64_t(config.warps_m) * config.warps_n;
  uint64_t bytes = 2 * (a + b) * 2 + warps * m * n * 4;
  if (api == vk::CoopmatApi::emulated) bytes += warps * (uint64_t(m) * k + uint64_t(k) * n) * 2;
  return bytes;
}

std::string MatmulCoopmatTiles::str() const {
  return vk::MmaShape{m, n, k}.str() + "/" + std::to_string(config.warps_m) + "x" +
         std::to_string(config.warps_n) + "/" + std::to_string(config.tiles_m) + "x" +
         std::to_string(config.tiles_n) + "/" + std::to_string(config.bk_tiles) + "/" +
         std::to_string(subgroup);
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
  t.coopmat_tiles = coopmat_tiles_for(info, coopmat_api_for(info));
  t.weight_tiles = weight_tiles_for(info, cpu_device);
  t.weight_tiles.texel = t.weight_tiles.texel && t.texel_tiles.subgroup > 0;
  weight_texel_from_env(&t.weight_tiles);
  weight_texel_limit_from_env(&t.weight_tiles);
  integer_dot_from_env(&t.weight_tiles);
  texel_tiles_from_env(&t.texel_tiles);
  t.forced_path = path_from_env();
  t.forced_splits = splits_from_env();
  if (matmul_tiles_from_env(info, &t.tiles) && !t.forced_path) t.forced_path = "general";
  if (coopmat_tiles_from_env(info, &t.coopmat_tiles) && !t.forced_path) t.forced_path = "coopmat";
  return t;
}

}  // namespace vkformer::kernels
