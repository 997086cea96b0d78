#include "tuning_attention.hpp"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>

#include "tuning_env.hpp"
#include "vkformer/error.hpp"

namespace vkformer::kernels {

namespace {

using FusedKernel = AttentionTiles::Kernel;

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
  t.kernel = FusedKernel::rows;
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
  // lavapipe runs one workgroup per thread, as many threads as the host's CPUs (LP_NUM_THREADS).
  t.out_proj_min_workgroups = std::max(2u, std::thread::hardware_concurrency());
  return t;
}

// GPUs: 128 invocations own 32 query rows and walk keys in tiles of 32 (shrunk to the device's
// workgroup limits; attention_launch_for fits them to shared memory per problem): 2 x 4 scores
// and 4 x 4 outputs per invocation, 4 invocations per row in the softmax. (Not yet measured on a
// GPU: chosen for register blocking that halves shared reads per multiply-add, and 22 KiB of
// shared memory at D = 64, which leaves room for two workgroups per multiprocessor.)
AttentionTiles gpu_attention_tiles(const DeviceInfo& info) {
  AttentionTiles t;
  t.kernel = FusedKernel::tiles;
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
void check_rows(const vk::EnvOverride& env, const AttentionTiles& t, const DeviceInfo& info,
                bool subgroup_ops) {
  env.check_range("LANES", t.lanes, 1, vk::kMaxTileSide);
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
void check_tiles(const vk::EnvOverride& env, const AttentionTiles& t, const DeviceInfo& info) {
  env.check_range("WG", t.invocations, 1, vk::kMaxTileSide);
  env.check_range("BR", t.br, 1, vk::kMaxTileSide);
  env.check_range("BC", t.bc, 1, vk::kMaxTileSide);
  if (t.br > t.invocations)
    env.reject("BR " + str(t.br) + " is above WG " + str(t.invocations));
  env.check_workgroup("WG", t.invocations, info);
}

// VKFORMER_ATTENTION_TILES="rows/LxR[/shuffle|/texel]" or "tiles/WGxBRxBC" replaces the
// device's choice. Rejected, naming the rule that fails, unless it fits the device.
bool attention_tiles_from_env(const DeviceInfo& info, bool subgroup_ops, AttentionTiles* out) {
  vk::EnvOverride env("VKFORMER_ATTENTION_TILES");
  if (!env.set()) return false;
  AttentionTiles t = *out;
  if (auto v = env.match("tiles/#x#x#")) {
    t.kernel = FusedKernel::tiles;
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
      t.kernel = FusedKernel::rows;
      t.lanes = (*v)[0], t.rows_per_lane = (*v)[1];
      t.shuffle = f.shuffle, t.texel = f.texel;
      check_rows(env, t, info, subgroup_ops);
      *out = t;
      return true;
    }
  env.reject("expected rows/LANESxROWS, rows/LANESxROWS/shuffle, rows/LANESxROWS/texel or "
             "tiles/WGxBRxBC (whole numbers)");
}


// ---- Flash attention and split-K decoding ----

bool power_of_two(uint64_t x) { return x && !(x & (x - 1)); }

uint32_t round_up(int64_t x, uint32_t to) { return static_cast<uint32_t>((x + to - 1) / to * to); }

// VKFORMER_COOPMAT=auto|emulate|off, read as src/kernels/tuning_matmul.cpp reads it for matmul (one
// setting for every cooperative-matrix kernel): the device's own (KHR, else NV), the emulation
// on any device, or none.
vk::CoopmatApi flash_api_for(const DeviceInfo& info) {
  vk::EnvOverride env("VKFORMER_COOPMAT");
  if (!env.set() || env.match("auto")) return vk::coopmat_api(info);
  if (env.match("emulate")) return vk::CoopmatApi::emulated;
  if (env.match("off")) return vk::CoopmatApi::none;
  env.reject("expected auto, emulate or off");
}

// The emulation's subgroups are its own: the device's size where that is one of 4..128, else 32
// (as for matmul).
uint32_t emulated_subgroup(const DeviceInfo& info) {
  const uint32_t s = info.subgroup_size;
  return power_of_two(s) && s >= 4 && s <= 128 ? s : 32;
}

FlashTiles flash_tiles_for(const DeviceInfo& info, vk::CoopmatApi api) {
  FlashTiles t;
  if (api == vk::CoopmatApi::none) return t;
  const std::optional<vk::MmaShape> shape = vk::coopmat_mnk(info, api, vk::kCoopmatF16F32);
  if (!shape) return t;
  t.api = api;
  t.shape = *shape;
  t.subgroup = api == vk::CoopmatApi::emulated ? emulated_subgroup(info) : info.subgroup_size;
  // Two workgroups per compute unit; drivers that do not report their units: by device type.
  const uint32_t units = info.compute_units ? info.compute_units
                         : info.type == "discrete" ? 64 : 16;
  t.target_workgroups = 2 * units;
  return t;
}

// VKFORMER_ATTENTION_FLASH=off, or WxRxBC[/MxNxK[/SG]]: subgroups, row tiles per subgroup and
// keys per block for every problem; the MMA shape among those the API offers; the subgroup size
// (only the emulation takes another than the device's). Also takes f32 storage through flash.
// Returns whether the variable was set.
bool flash_from_env(const DeviceInfo& info, vk::CoopmatApi api, FlashTiles* t) {
  vk::EnvOverride env("VKFORMER_ATTENTION_FLASH");
  if (!env.set()) return false;
  if (env.match("off")) {
    *t = FlashTiles{};
    return true;
  }
  std::optional<std::vector<uint32_t>> v = env.match("#x#x#/#x#x#/#");
  if (!v && (v = env.match("#x#x#/#x#x#"))) v->push_back(0);
  if (!v && (v = env.match("#x#x#"))) v->insert(v->end(), {0, 0, 0, 0});
  if (!v)
    env.reject("expected off, WxRxBC, WxRxBC/MxNxK or WxRxBC/MxNxK/SG (whole numbers: subgroups, "
               "row tiles per subgroup, keys per block, the MMA shape, the subgroup size)");
  const std::vector<uint32_t>& x = *v;
  if (api == vk::CoopmatApi::none)
    env.reject("device '" + info.name + "' has no cooperative matrices that vkformer can use " +
               "(VKFORMER_COOPMAT=emulate runs the emulation on any device)");
  *t = flash_tiles_for(info, api);
  if (!t->usable())
    env.reject("device '" + info.name + "' offers no f16 x f16 + f32 MMA shape");
  env.check_range("W", x[0], 1, 16);
  env.check_range("R", x[1], 1, 8);
  env.check_range("BC", x[2], 1, 1024);
  if (x[3] != 0) {
    const vk::MmaShape shape{x[3], x[4], x[5]};
    const std::vector<vk::MmaShape> offered = vk::coopmat_shapes(info, api, vk::kCoopmatF16F32);
    if (std::find(offered.begin(), offered.end(), shape) == offered.end()) {
      std::string list;
      for (const vk::MmaShape& o : offered) list += (list.empty() ? "" : ", ") + o.str();
      env.reject("MMA shape " + shape.str() + " is not one that " + vk::coopmat_api_name(api) +
                 " cooperative matrices offer for f16 x f16 + f32 here (" + list + ")");
    }
    t->shape = shape;
  }
  if (x[6] != 0) {
    if (api != vk::CoopmatApi::emulated && x[6] != info.subgroup_size)
      env.reject("SG " + str(x[6]) + " is not the subgroup size of device '" + info.name + "' (" +
                 str(info.subgroup_size) + "); only the emulation takes another");
    if (!power_of_two(x[6]) || x[6] < 4 || x[6] > 128)
      env.reject("SG " + str(x[6]) + " is not a power of two from 4 to 128");
    t->subgroup = x[6];
  }
  t->forced = FlashConfig{x[0], x[1], x[2]};
  t->f32_storage = true;
  // The rules that do not depend on the head dims, checked now with the smallest ones.
  FlashLaunch l;
  l.api = t->api, l.shape = t->shape, l.subgroup = t->subgroup, l.config = *t->forced;
  l.d_cap = l.dv_cap = 16;
  std::string why;
  if (!flash_config_fits(l, info, &why)) env.reject(why);
  return true;
}

// Split the keys of a decoding step until the device has about two workgroups per compute unit
// (drivers that do not report their units get a guess by device type).
DecodeTiles decode_tiles_for(const DeviceInfo& info, bool cpu_device) {
  DecodeTiles t;
  t.enabled = !cpu_device;
  uint32_t units = info.compute_units;
  if (units == 0) units = info.type == "discrete" ? 64 : cpu_device ? 2 : 16;
  t.target_workgroups = 2 * units;
  return t;
}

// VKFORMER_ATTENTION_DECODE=off, or WGxTK[/SPLITS]: split-K decoding with this configuration
// (and split count; 0 or none: the device's) on any device. Returns whether it was set.
bool decode_from_env(const DeviceInfo& info, DecodeTiles* t) {
  vk::EnvOverride env("VKFORMER_ATTENTION_DECODE");
  if (!env.set()) return false;
  if (env.match("off")) {
    t->enabled = false;
    return true;
  }
  std::optional<std::vector<uint32_t>> v = env.match("#x#/#");
  if (!v && (v = env.match("#x#"))) v->push_back(0);
  if (!v)
    env.reject("expected off, WGxTK or WGxTK/SPLITS (whole numbers: invocations per workgroup, "
               "keys per tile, key ranges)");
  const std::vector<uint32_t>& x = *v;
  env.check_range("WG", x[0], 1, vk::kMaxTileSide);
  env.check_range("TK", x[1], 1, 1024);
  env.check_range("SPLITS", x[2], 0, 1024);
  env.check_workgroup("WG", x[0], info);
  t->enabled = true;
  t->forced = DecodeConfig{x[0], x[1]};
  t->forced_splits = x[2];
  return true;
}

}  // namespace

AttentionTiles attention_tiles_for(const DeviceInfo& info, bool cpu_device, bool subgroup_ops) {
  AttentionTiles t = cpu_device ? cpu_attention_tiles(info, subgroup_ops) : gpu_attention_tiles(info);
  const bool tiles_forced = attention_tiles_from_env(info, subgroup_ops, &t);
  const vk::CoopmatApi api = flash_api_for(info);
  t.flash = flash_tiles_for(info, api);
  t.decode = decode_tiles_for(info, cpu_device);
  // A forced scalar tiling is what runs, unless flash or decoding are forced too.
  if (!flash_from_env(info, api, &t.flash) && tiles_forced) t.flash = FlashTiles{};
  if (!decode_from_env(info, &t.decode) && tiles_forced) t.decode.enabled = false;
  // Path::automatic takes the unfused chain for up to N queries: to time both paths of a decode.
  if (auto n = vk::env_number("VKFORMER_ATTENTION_UNFUSED_MAX_QUERIES", 0, INT32_MAX))
    t.automatic_unfused_max_queries = *n;
  if (auto n = vk::env_number("VKFORMER_ATTENTION_OUT_PROJ_MIN_WORKGROUPS", 0, INT32_MAX))
    t.out_proj_min_workgroups = static_cast<uint32_t>(*n);
  return t;
}

bool attention_launch_for(const AttentionTiles& tiles, const DeviceInfo& info,
                          const AttentionProblem& pr, AttentionLaunch* out) {
  const int64_t sq = pr.sq, d = pr.d, dv = pr.dv;
  if (d > kFusedAttentionMaxHeadDim || dv > kFusedAttentionMaxHeadDim) return false;
  AttentionLaunch l;
  l.kernel = tiles.kernel;
  if (tiles.kernel == FusedKernel::rows) {
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

const std::vector<FlashConfig>& flash_configs() {
  // {warps, row_tiles, bc}; rows per workgroup at M = 16 in the comments. Every entry fits
  // lavapipe's 32 KiB with the emulation's scratch at head dims up to 64 (most up to 128), so the
  // tests run each one. Two row tiles per subgroup only for head dims up to 64 (registers).
  static const std::vector<FlashConfig> configs = {
      {4, 2, 32},  // 128 rows, 32 keys: D <= 64
      {2, 2, 64},  // 64 rows, 64 keys: D <= 64
      {4, 1, 32},  // 64 rows, 32 keys: D = 128 (and 256 on 48 KiB devices)
      {2, 1, 64},  // 32 rows, 64 keys
      {2, 1, 32},  // 32 rows: D = 256 within 32 KiB
      {1, 1, 16},  // one subgroup, one MMA step of keys: little shared memory
  };
  return configs;
}

std::string FlashConfig::str() const {
  return std::to_string(warps) + "x" + std::to_string(row_tiles) + "x" + std::to_string(bc);
}

uint64_t FlashLaunch::shared_bytes() const {
  // As declared in shaders/attention_flash.comp.
  const uint64_t pad = 8, m = shape.m, w = config.warps, bc = config.bc;
  const uint64_t kv = bc * (std::max(d_cap, dv_cap) + pad) * 2;
  const uint64_t scores = w * m * bc * 4;
  const uint64_t probs = w * m * config.row_tiles * (bc + pad) * 2;
  const uint64_t lanes_per_row = subgroup > m ? subgroup / m : 1;
  const uint64_t partial = w * m * lanes_per_row * 4;
  const uint64_t emulation =
      api == vk::CoopmatApi::emulated ? w * (uint64_t(shape.m) * shape.k + uint64_t(shape.k) * shape.n) * 2 : 0;
  return kv + scores + probs + partial + emulation;
}

std::string FlashLaunch::str() const {
  return shape.str() + "/" + config.str() + "/" + std::to_string(subgroup) + " d" +
         std::to_string(d_cap) + " dv" + std::to_string(dv_cap);
}

bool flash_config_fits(const FlashLaunch& l, const DeviceInfo& info, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const FlashConfig& c = l.config;
  const vk::MmaShape& s = l.shape;
  if (c.warps == 0 || c.row_tiles == 0 || c.bc == 0) return fail("W, R and BC must be at least 1");
  if (!power_of_two(l.subgroup) || !power_of_two(s.m))
    return fail("the subgroup size " + str(l.subgroup) + " and M " + str(s.m) +
                " must be powers of two");
  const uint32_t step = std::lcm(std::lcm(std::lcm(s.m, s.n), s.k), 16u);
  if (c.bc % step != 0)
    return fail("BC " + str(c.bc) + " is not a multiple of " + str(step) +
                " (the MMA's M, N and K, and 16 halves per staged row)");
  if (c.row_tiles > 1 && uint64_t(c.row_tiles) * (l.d_cap + l.dv_cap) > 256)
    return fail("R " + str(c.row_tiles) + " row tiles of D " + str(l.d_cap) + " + Dv " +
                str(l.dv_cap) + " take too many registers (at most 256 columns in all)");
  const uint64_t inv = l.invocations();
  if (inv > info.max_workgroup_invocations || inv > info.max_workgroup_size[0])
    return fail("SG*W = " + str(inv) + " invocations, above maxComputeWorkGroupInvocations = " +
                str(info.max_workgroup_invocations) + " or maxComputeWorkGroupSize[0] = " +
                str(info.max_workgroup_size[0]) + " of device '" + info.name + "'");
  if (l.shared_bytes() > info.shared_memory_bytes)
    return fail(str(l.shared_bytes()) + " bytes of shared memory for " + l.str() +
                ", above maxComputeSharedMemorySize = " + str(info.shared_memory_bytes) +
                " of device '" + info.name + "'");
  return true;
}

bool flash_launch_for(const FlashTiles& t, const DeviceInfo& info, const AttentionProblem& pr,
                      DType dtype, FlashLaunch* out) {
  if (!t.usable() || (dtype == DType::f32 && !t.f32_storage) ||
      (dtype != DType::f32 && dtype != DType::f16))
    return false;
  if (pr.d > kFlashMaxHeadDim || pr.dv > kFlashMaxHeadDim || pr.d < 1 || pr.dv < 1) return false;
  FlashLaunch l;
  l.api = t.api;
  l.shape = t.shape;
  l.subgroup = t.subgroup;
  // Whole MMA steps of the head dims, and whole 16-byte rows when staged as f16.
  l.d_cap = round_up(pr.d, std::max(16u, t.shape.k));
  l.dv_cap = round_up(pr.dv, std::max(16u, t.shape.n));
  const std::vector<FlashConfig> forced = t.forced ? std::vector<FlashConfig>{*t.forced}
                                                   : std::vector<FlashConfig>{};
  if (t.preferred && !t.forced) {
    l.config = *t.preferred;
    if (flash_config_fits(l, info, nullptr)) {
      *out = l;
      return true;
    }
  }
  std::optional<FlashLaunch> first;
  for (const FlashConfig& c : t.forced ? forced : flash_configs()) {
    l.config = c;
    if (!flash_config_fits(l, info, nullptr)) continue;
    if (!first) first = l;
    const uint64_t workgroups = static_cast<uint64_t>(pr.b * pr.h) * ((pr.sq + l.br() - 1) / l.br());
    if (workgroups >= t.target_workgroups) {
      *out = l;
      return true;
    }
  }
  if (first) *out = *first;
  return first.has_value();
}

const std::vector<DecodeConfig>& decode_configs() {
  // {workgroup, tile_keys}: 128 invocations over 32 keys (D up to 128 in 48 KiB with 16 rows),
  // 64 over 64 keys (fewer tiles and barriers per split), 64 over 16 keys (D = 256).
  static const std::vector<DecodeConfig> configs = {{128, 32}, {64, 64}, {64, 16}};
  return configs;
}

std::string DecodeConfig::str() const {
  return std::to_string(workgroup) + "x" + std::to_string(tile_keys);
}

uint64_t DecodeLaunch::shared_bytes() const {
  // As declared in shaders/attention_flash_decode.comp.
  const uint64_t tk = config.tile_keys;
  return 4 * (uint64_t(rows) * d_cap + tk * (std::max(d_cap, dv_cap) + 1ull) + rows * tk +
              3ull * rows);
}

std::string DecodeLaunch::str() const {
  return config.str() + "/" + std::to_string(splits) + " rows " + std::to_string(rows) + " d" +
         std::to_string(d_cap) + " dv" + std::to_string(dv_cap);
}

bool decode_config_fits(const DecodeLaunch& l, const DeviceInfo& info) {
  const DecodeConfig& c = l.config;
  return c.workgroup >= 1 && c.tile_keys >= 1 && c.workgroup <= info.max_workgroup_invocations &&
         c.workgroup <= info.max_workgroup_size[0] && l.shared_bytes() <= info.shared_memory_bytes;
}

bool decode_launch_for(const DecodeTiles& t, const DeviceInfo& info, const AttentionProblem& pr,
                       DecodeLaunch* out) {
  if (!t.enabled || pr.d > kFusedAttentionMaxHeadDim || pr.dv > kFusedAttentionMaxHeadDim)
    return false;
  const int64_t hkv = pr.kv_heads();
  const int64_t rows = pr.h / hkv * pr.sq;
  if (rows > t.max_rows || rows < 1) return false;
  DecodeLaunch l;
  l.rows = static_cast<uint32_t>(rows);
  l.d_cap = round_up(pr.d, 32);
  l.dv_cap = round_up(pr.dv, 32);
  bool found = false;
  // The forced configuration alone; else the preferred one, then the table's list.
  std::vector<DecodeConfig> order;
  if (t.forced) order.push_back(*t.forced);
  else {
    if (t.preferred) order.push_back(*t.preferred);
    order.insert(order.end(), decode_configs().begin(), decode_configs().end());
  }
  for (const DecodeConfig& c : order) {
    l.config = c;
    if (decode_config_fits(l, info)) {
      found = true;
      break;
    }
  }
  if (!found) return false;
  uint64_t splits = t.forced_splits;
  if (splits == 0) {
    const uint64_t pairs = static_cast<uint64_t>(pr.b * hkv);
    splits = pairs < t.target_workgroups ? (t.target_workgroups + pairs - 1) / pairs : 1;
    const uint64_t by_keys = t.min_keys_per_split
                                 ? static_cast<uint64_t>(pr.sk) / t.min_keys_per_split : splits;
    splits = std::max<uint64_t>(1, std::min<uint64_t>({splits, t.max_splits, by_keys}));
  }
  l.splits = static_cast<uint32_t>(splits);
  *out = l;
  return true;
}

}  // namespace vkformer::kernels
