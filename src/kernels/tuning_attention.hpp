#pragma once
// How fused attention is computed on a device: flash attention on cooperative matrices
// (shaders/attention_flash.comp), split-K flash decoding (attention_flash_decode.comp), and the
// scalar fused kernels (shaders/attention.comp, shaders/attention_rows.comp), each with its
// tiling. src/ops/attention.cpp chooses among them per problem.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coopmat.hpp"
#include "vkformer/device.hpp"
#include "vkformer/dtype.hpp"

namespace vkformer::kernels {

// ---- Flash attention on cooperative matrices (shaders/attention_flash.comp) ----

// A workgroup of `warps` subgroups, each owning `row_tiles` MMA row tiles (M query rows each),
// walks the keys in blocks of `bc` (a multiple of the MMA's M, N and K).
struct FlashConfig {
  uint32_t warps = 4, row_tiles = 1, bc = 32;
  friend bool operator==(const FlashConfig&, const FlashConfig&) = default;
  std::string str() const;  // "4x1x32" as VKFORMER_ATTENTION_FLASH writes it
};

// Every configuration the tuning may choose, in the static table's order of preference (most
// query rows per workgroup first: each staged K/V block serves more rows). The table takes the
// first that fits the problem's head dims and the device (flash_launch_for); a tuner chooses
// among the same list, and tests/flash_attention_test.cpp runs each one through the emulation.
// A plain function so that a tuning registry can enumerate it.
const std::vector<FlashConfig>& flash_configs();

// What a device offers flash attention.
struct FlashTiles {
  vk::CoopmatApi api = vk::CoopmatApi::none;  // none: flash attention is never taken
  vk::MmaShape shape;                     // vk::coopmat_mnk for f16 x f16 + f32
  uint32_t subgroup = 32;             // the device's (any of 4..128 for the emulation)
  // VKFORMER_ATTENTION_FLASH=WxRxBC[/MxNxK[/SG]]: this configuration (and MMA shape, subgroup
  // size) for every problem instead of the table's choice (tests, tuning experiments).
  std::optional<FlashConfig> forced;
  // A configuration `vkformer tune` measured faster here (the tuning cache, tunable
  // attention.flash): taken for every problem it fits, the table's choice elsewhere.
  std::optional<FlashConfig> preferred;
  // f32 storage is staged as f16 (inputs rounded to 11 bits, accumulation in fp32): taken only
  // where asked (VKFORMER_ATTENTION_FLASH set), since f32 callers expect f32 accuracy.
  bool f32_storage = false;
  // The table passes over a configuration whose problem has fewer workgroups than this (about
  // two per compute unit) while a later one that fits has enough: few large workgroups leave
  // multiprocessors idle. 0: the first that fits.
  uint32_t target_workgroups = 0;
  bool usable() const { return api != vk::CoopmatApi::none && shape.m > 0; }
};

// One problem's flash launch.
struct FlashLaunch {
  vk::CoopmatApi api = vk::CoopmatApi::none;
  vk::MmaShape shape;
  uint32_t subgroup = 32;
  FlashConfig config;
  uint32_t d_cap = 0, dv_cap = 0;  // head dims rounded up to whole MMA steps (and 16 halves)
  uint32_t invocations() const { return subgroup * config.warps; }
  uint32_t br() const { return shape.m * config.row_tiles * config.warps; }  // query rows
  // K or V block (f16, rows padded by 8 halves), per subgroup: one M x bc f32 score tile, its
  // rows' probabilities as f16 (rows padded by 8), the softmax's partial maxima/sums; and the
  // emulation's scratch of one A and one B fragment per subgroup.
  uint64_t shared_bytes() const;
  std::string str() const;  // "16x16x16/4x1x32/32 d64 dv64"
};

// The launch for q [B, H, Sq, D] x k [B, Hkv, Sk, D] x v [B, Hkv, Sk, Dv] of `dtype`, or false
// where flash attention cannot take it: no cooperative matrices, f32 storage not asked for,
// head dims beyond kFlashMaxHeadDim, or no configuration fits the device (workgroup size,
// shared memory, registers: row_tiles > 1 only while row_tiles * (d_cap + dv_cap) <= 256).
// The static table: the first configuration that fits and gives the problem at least
// target_workgroups workgroups, else the first that fits; `preferred` before both where it fits.
struct AttentionProblem;
bool flash_launch_for(const FlashTiles& tiles, const DeviceInfo& info,
                      const AttentionProblem& problem, DType dtype, FlashLaunch* out);
// Whether `config` fits as above (and why not, in `why`, where given).
bool flash_config_fits(const FlashLaunch& launch, const DeviceInfo& info, std::string* why);

constexpr int64_t kFlashMaxHeadDim = 256;

// ---- Split-K flash decoding (shaders/attention_flash_decode.comp, attention_flash_combine) ----

// A workgroup of `workgroup` invocations computes all query rows of one (batch, KV head) over a
// range of the keys, `tile_keys` at a time.
struct DecodeConfig {
  uint32_t workgroup = 128, tile_keys = 32;
  friend bool operator==(const DecodeConfig&, const DecodeConfig&) = default;
  std::string str() const;  // "128x32"
};

// Every decode configuration the tuning may choose, in the static table's order of preference
// (the first that fits shared memory is taken); tests run each one. A plain function, as above.
const std::vector<DecodeConfig>& decode_configs();

struct DecodeTiles {
  // GPUs take it for few query rows; CPU devices keep attention_rows and the unfused chain
  // unless asked (VKFORMER_ATTENTION_DECODE), see cpu_attention_tiles.
  bool enabled = false;
  uint32_t max_rows = 16;  // query rows per (batch, KV head): the group's heads x Sq
  // Split the keys while the (batch, KV head) pairs are fewer than target_workgroups: into
  // ceil(target / pairs) ranges, at most max_splits and each of at least min_keys_per_split keys.
  uint32_t target_workgroups = 0;
  uint32_t max_splits = 32, min_keys_per_split = 128;
  // VKFORMER_ATTENTION_DECODE=WGxTK[/SPLITS]: this configuration (and split count) everywhere.
  std::optional<DecodeConfig> forced;
  uint32_t forced_splits = 0;
  // A configuration `vkformer tune` measured faster here (tunable attention.decode): taken
  // where it fits shared memory, the table's choice elsewhere.
  std::optional<DecodeConfig> preferred;
};

struct DecodeLaunch {
  DecodeConfig config;
  uint32_t rows = 0;               // query rows per workgroup
  uint32_t d_cap = 0, dv_cap = 0;  // head dims rounded up to 32 (one pipeline for nearby sizes)
  uint32_t splits = 1;             // 1: one dispatch writes the output; more: partials + combine
  // q rows, one K or V tile (rows of max(d_cap, dv_cap) + 1 floats), the tile's scores and
  // three floats per row.
  uint64_t shared_bytes() const;
  std::string str() const;  // "128x32/4 rows 8 d64 dv64"
};

// Whether the launch's configuration fits the device's workgroup and shared-memory limits.
bool decode_config_fits(const DecodeLaunch& launch, const DeviceInfo& info);

// The launch for a problem with at most max_rows query rows per (batch, KV head): `preferred`
// where it fits, else the first of decode_configs() that does (or `forced` alone), split as
// DecodeTiles says. False where none fits or the problem has too many rows.
bool decode_launch_for(const DecodeTiles& tiles, const DeviceInfo& info,
                       const AttentionProblem& problem, DecodeLaunch* out);

// ---- The scalar fused kernels ----

// The device's choice of fused-attention kernel and its tiling.
struct AttentionTiles {
  enum class Kernel : uint8_t {
    tiles,  // shaders/attention.comp (GPUs): a workgroup stages K/V tiles in shared memory
    rows,   // shaders/attention_rows.comp (CPU devices): registers only, no barriers
  };
  Kernel kernel = Kernel::tiles;
  // tiles: `invocations` per workgroup own `br` query rows and walk the keys in tiles of `bc`.
  uint32_t invocations = 128, br = 32, bc = 32;
  // rows: workgroups of `lanes` invocations, each owning `rows_per_lane` query rows; with
  // `shuffle` the lanes share each K/V load through subgroupShuffle (lanes = the subgroup size),
  // with `texel` they read q, k and v as texel buffers where the head dims allow (multiples of 4).
  uint32_t lanes = 8, rows_per_lane = 2;
  bool shuffle = false;
  bool texel = false;
  // Path::automatic takes the fused kernel where it fits and the queries are more than
  // `automatic_unfused_max_queries` (decoding steps, Sq = 1, can be faster unfused: matrix-vector
  // products), or else the unfused chain.
  int64_t automatic_unfused_max_queries = 0;
  // Path::automatic also takes the unfused chain wherever its scores fit one binding: for CPU
  // devices whose fused kernel is the slower path (see cpu_attention_tiles).
  bool automatic_unfused_where_it_fits = false;
  // A decoding step's output projection runs inside the rows kernel (its OUT_PROJ variants, each
  // workgroup a KV head's slice of W_O) where the attention has at least this many workgroups
  // (and 2); 0: never. W_O is then read by as many threads as there are KV heads, so fewer than
  // the device's threads would leave some idle that the mat-vec apart keeps busy.
  uint32_t out_proj_min_workgroups = 0;
  // Taken before the kernels above where they fit a problem (both fused paths, automatic and
  // fused): split-K decoding for few query rows, flash attention for the rest.
  FlashTiles flash;
  DecodeTiles decode;
};

// One problem's launch: the tiles above fitted to its head dims and the device's limits.
struct AttentionLaunch {
  AttentionTiles::Kernel kernel = AttentionTiles::Kernel::tiles;
  uint32_t invocations = 0;  // workgroup size
  uint32_t rows = 0;         // query rows per workgroup
  // tiles: keys per tile and the shared-memory capacities for the head dims (multiples of 32,
  // so that one pipeline serves nearby sizes); kv_cap = max(d_cap, dv_cap) + 1. Register
  // blocks: sr x sc scores and or_ x od outputs per invocation and step (sr | rows, sc | bc,
  // or_ | rows, od | dv_cap).
  uint32_t bc = 0, d_cap = 0, dv_cap = 0, kv_cap = 0;
  uint32_t sr = 1, sc = 1, or_ = 1, od = 1;
  // rows: query rows per invocation, whether lanes share loads by shuffles, whether q, k and v
  // are read as texel buffers.
  uint32_t rows_per_lane = 0;
  bool shuffle = false;
  bool texel = false;
  // Shared memory of shaders/attention.comp: q, the K/V tile, the scores (rows of bc + 1), the
  // softmax's partial results (at most one per invocation, twice) and four floats per row.
  uint64_t shared_bytes() const {
    return kernel == AttentionTiles::Kernel::tiles
               ? 4 * (uint64_t(rows) * d_cap + uint64_t(bc) * kv_cap + uint64_t(rows) * (bc + 1ull) +
                      2ull * invocations + 4ull * rows)
               : 0;
  }
};

// Largest head dims (D of q and k, Dv of v) the fused kernels take.
constexpr int64_t kFusedAttentionMaxHeadDim = 256;

// The device's kernel and tiling: its own configuration for CPU devices (shuffles where the
// device has subgroup operations and `subgroup_ops` allows them), the GPU tiling shrunk to the
// device's workgroup limits otherwise. VKFORMER_ATTENTION_TILES overrides both (tuning
// experiments, and tests that run every configuration on whatever device they have), and then
// turns flash attention and split-K decoding off unless their own overrides are set.
// Flash attention: where the device has cooperative matrices (KHR, else NV), or through the
// emulation where asked (VKFORMER_COOPMAT=emulate, as for matmul; =off never).
// Split-K decoding: on GPUs, or where VKFORMER_ATTENTION_DECODE asks (=off never).
AttentionTiles attention_tiles_for(const DeviceInfo& info, bool cpu_device, bool subgroup_ops);

// One attention problem: q [B, H, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] (hkv 0: H).
struct AttentionProblem {
  int64_t b = 1, h = 1, sq = 1, sk = 1, d = 1, dv = 1, hkv = 0;
  int64_t kv_heads() const { return hkv ? hkv : h; }
};

// The launch for one problem, or false where the fused kernel cannot take it (head dims beyond
// kFusedAttentionMaxHeadDim, or no tiling fits shared memory).
bool attention_launch_for(const AttentionTiles& tiles, const DeviceInfo& info,
                          const AttentionProblem& problem, AttentionLaunch* out);

}  // namespace vkformer::kernels
