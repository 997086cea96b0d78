#include "tuning_attention.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "tuning_env.hpp"
#include "vkformer/error.hpp"

namespace vkformer::vk {

namespace {

using Kernel = AttentionTiles::Kernel;

// Whether a workgroup of n invocations is exactly one subgroup on this device: the subgroup
// size is fixed (no variable-size subgroups) and equals n.
bool one_subgroup(const DeviceInfo& info, uint32_t n) {
  const uint32_t lo = info.min_subgroup_size ? info.min_subgroup_size : info.subgroup_size;
  const uint32_t hi = info.max_subgroup_size ? info.max_subgroup_size : info.subgroup_size;
  return n == info.subgroup_size && lo == hi && n >= 1 && n <= 128;
}

// CPU devices (lavapipe: 8 SIMD lanes, one thread per workgroup): the register kernel, one
// SIMD vector per workgroup. Measured on lavapipe 22.3 (B=1, H=8, D=64): texel fetches instead
// of buffer loads 2.9x faster and 4x less JIT time; two query rows per invocation 1.3x faster
// than one (each shuffled K/V chunk feeds both), four another 1.25x (0.6 s of JIT instead of
// 0.25 s), six or eight slower again (spills). Shuffles make one load serve all 8 lanes.
AttentionTiles cpu_attention_tiles(const DeviceInfo& info, bool subgroup_ops) {
  AttentionTiles t;
  t.kernel = Kernel::rows;
  t.shuffle = subgroup_ops && info.subgroup_shuffle && one_subgroup(info, info.subgroup_size);
  t.texel = t.shuffle && info.max_texel_buffer_elements > 0;
  t.lanes = t.shuffle ? info.subgroup_size : std::min<uint32_t>(8, info.max_workgroup_size[0]);
  t.rows_per_lane = 4;
  // One query row (decoding) wastes 7 of the 8 lanes of a workgroup; the unfused chain's
  // matrix-vector products measured 1.4x faster there (Sk = 64..1024, B = 1..4).
  t.automatic_unfused_max_queries = 1;
  // lavapipe turns a shuffle into one vector permute only for 8 lanes of 32 bits (AVX2); with
  // LP_NATIVE_VECTOR_WIDTH=512 (16 lanes) each is a loop over the lanes, and the fused kernel
  // measured 4.5x (D=64) and 13x (D=128) slower than the unfused chain at B=1, H=8/16, S=1024,
  // still 2x without shuffles. The fused kernel stays for what the unfused chain cannot bind.
  t.automatic_unfused_where_it_fits = info.subgroup_size != 8;
  return t;
}

// GPUs: 128 invocations own 32 query rows and walk keys in tiles of 32 (shrunk to the device's
// workgroup limits; attention_launch_for fits them to shared memory per problem): 2 x 4 scores
// and 4 x 4 outputs per invocation, 4 invocations per row in the softmax. (Not yet measured on a
// GPU: chosen for register blocking that halves shared reads per multiply-add, and 22 KiB of
// shared memory at D = 64, which leaves room for two workgroups per multiprocessor.)
AttentionTiles gpu_attention_tiles(const DeviceInfo& info) {
  AttentionTiles t;
  t.kernel = Kernel::tiles;
  t.invocations = std::min<uint32_t>({128, info.max_workgroup_invocations, info.max_workgroup_size[0]});
  t.br = std::min<uint32_t>(t.br, t.invocations);
  return t;
}

std::string str(uint64_t n) { return std::to_string(n); }

std::string subgroup_sizes(const DeviceInfo& info) {
  const uint32_t lo = info.min_subgroup_size ? info.min_subgroup_size : info.subgroup_size;
  const uint32_t hi = info.max_subgroup_size ? info.max_subgroup_size : info.subgroup_size;
  return lo == hi ? str(info.subgroup_size) : str(lo) + " to " + str(hi) + " (not fixed)";
}

// rows/LxR[/shuffle|/texel]: shuffles need subgroup operations and L equal to the device's fixed
// subgroup size; texel reads come with shuffles.
void check_rows(const EnvOverride& env, const AttentionTiles& t, const DeviceInfo& info,
                bool subgroup_ops) {
  env.check_range("LANES", t.lanes, 1, kMaxTileSide);
  env.check_range("ROWS", t.rows_per_lane, 1, 8);
  env.check_workgroup("LANES", t.lanes, info);
  if (!t.shuffle) return;
  const std::string device = "device '" + info.name + "'";
  if (!subgroup_ops)
    env.reject("/shuffle and /texel need subgroup operations: " + device +
               " has no subgroup arithmetic, or VKFORMER_NO_SUBGROUP_OPS is set");
  if (!info.subgroup_shuffle)
    env.reject("/shuffle and /texel need subgroup shuffles, which " + device + " does not have");
  if (!one_subgroup(info, t.lanes))
    env.reject("/shuffle and /texel need LANES equal to the fixed subgroup size: LANES is " +
               str(t.lanes) + ", " + device + " has subgroups of " + subgroup_sizes(info));
  if (t.texel && info.max_texel_buffer_elements == 0)
    env.reject("/texel needs texel buffers: " + device + " has maxTexelBufferElements = 0");
}

// tiles/WGxBRxBC: BR query rows per workgroup of WG invocations, at most one row each.
void check_tiles(const EnvOverride& env, const AttentionTiles& t, const DeviceInfo& info) {
  env.check_range("WG", t.invocations, 1, kMaxTileSide);
  env.check_range("BR", t.br, 1, kMaxTileSide);
  env.check_range("BC", t.bc, 1, kMaxTileSide);
  if (t.br > t.invocations)
    env.reject("BR " + str(t.br) + " is above WG " + str(t.invocations));
  env.check_workgroup("WG", t.invocations, info);
}

// VKFORMER_ATTENTION_TILES="rows/LxR[/shuffle|/texel]" or "tiles/WGxBRxBC" replaces the
// device's choice. Rejected, naming the rule that fails, unless it fits the device.
bool attention_tiles_from_env(const DeviceInfo& info, bool subgroup_ops, AttentionTiles* out) {
  EnvOverride env("VKFORMER_ATTENTION_TILES");
  if (!env.set()) return false;
  AttentionTiles t = *out;
  if (auto v = env.match("tiles/#x#x#")) {
    t.kernel = Kernel::tiles;
    t.invocations = (*v)[0], t.br = (*v)[1], t.bc = (*v)[2];
    check_tiles(env, t, info);
    *out = t;
    return true;
  }
  struct RowsForm {
    const char* pattern;
    bool shuffle, texel;
  };
  for (RowsForm f : {RowsForm{"rows/#x#", false, false}, RowsForm{"rows/#x#/shuffle", true, false},
                     RowsForm{"rows/#x#/texel", true, true}})
    if (auto v = env.match(f.pattern)) {
      t.kernel = Kernel::rows;
      t.lanes = (*v)[0], t.rows_per_lane = (*v)[1];
      t.shuffle = f.shuffle, t.texel = f.texel;
      check_rows(env, t, info, subgroup_ops);
      *out = t;
      return true;
    }
  env.reject("expected rows/LANESxROWS, rows/LANESxROWS/shuffle, rows/LANESxROWS/texel or "
             "tiles/WGxBRxBC (whole numbers)");
}

}  // namespace

AttentionTiles attention_tiles_for(const DeviceInfo& info, bool cpu_device, bool subgroup_ops) {
  AttentionTiles t = cpu_device ? cpu_attention_tiles(info, subgroup_ops) : gpu_attention_tiles(info);
  attention_tiles_from_env(info, subgroup_ops, &t);
  // Path::automatic takes the unfused chain for up to N queries: to time both paths of a decode.
  if (auto n = env_number("VKFORMER_ATTENTION_UNFUSED_MAX_QUERIES", 0, INT32_MAX))
    t.automatic_unfused_max_queries = *n;
  return t;
}

bool attention_launch_for(const AttentionTiles& tiles, const DeviceInfo& info,
                          const AttentionProblem& pr, AttentionLaunch* out) {
  const int64_t sq = pr.sq, d = pr.d, dv = pr.dv;
  if (d > kFusedAttentionMaxHeadDim || dv > kFusedAttentionMaxHeadDim) return false;
  AttentionLaunch l;
  l.kernel = tiles.kernel;
  if (tiles.kernel == Kernel::rows) {
    l.invocations = tiles.lanes;
    l.shuffle = tiles.shuffle;
    // Texel reads need whole 4-element texels per row and every texel within the view limit.
    const uint64_t texels =
        static_cast<uint64_t>(pr.b * pr.h) * static_cast<uint64_t>(std::max(pr.sq, pr.sk)) *
        static_cast<uint64_t>(std::max(d, dv)) / 4;
    l.texel = tiles.texel && d % 4 == 0 && dv % 4 == 0 && texels <= info.max_texel_buffer_elements;
    l.rows_per_lane = tiles.rows_per_lane;
    // Wide heads: fewer rows per invocation keep the unrolled kernel (its registers and JIT
    // time) in check.
    if (d + dv > 128) l.rows_per_lane = std::min<uint32_t>(l.rows_per_lane, 2);
    if (d + dv > 256) l.rows_per_lane = 1;
    // No more rows per workgroup than the problem has.
    while (l.rows_per_lane > 1 && uint64_t(l.invocations) * (l.rows_per_lane - 1) >= uint64_t(sq))
      --l.rows_per_lane;
    l.rows = l.invocations * l.rows_per_lane;
    *out = l;
    return true;
  }
  auto next_pow2 = [](uint64_t v) {
    uint32_t p = 1;
    while (p < v) p *= 2;
    return p;
  };
  l.invocations = tiles.invocations;
  l.rows = std::min<uint32_t>({tiles.br, next_pow2(static_cast<uint64_t>(sq)), tiles.invocations});
  l.bc = tiles.bc;
  l.d_cap = static_cast<uint32_t>((d + 31) / 32 * 32);
  l.dv_cap = static_cast<uint32_t>((dv + 31) / 32 * 32);
  l.kv_cap = std::max(l.d_cap, l.dv_cap) + 1;
  while (l.shared_bytes() > info.shared_memory_bytes) {
    if (l.bc > 8) l.bc /= 2;
    else if (l.rows > 1) l.rows /= 2;
    else if (l.bc > 1) l.bc /= 2;
    else return false;
  }
  // Register blocks that divide the tile: 2 x 4 scores, 4 x 4 outputs, fewer output rows where
  // larger blocks would leave invocations without a block.
  l.sc = l.bc % 4 == 0 ? 4 : l.bc % 2 == 0 ? 2 : 1;
  l.sr = l.rows % 2 == 0 ? 2 : 1;
  l.od = 4;
  l.or_ = 4;
  while (l.or_ > 1 && (l.rows % l.or_ != 0 || (l.rows / l.or_) * (l.dv_cap / l.od) < l.invocations))
    l.or_ /= 2;
  *out = l;
  return true;
}

}  // namespace vkformer::vk
