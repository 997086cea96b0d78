#pragma once
// How fused attention (shaders/attention.comp, shaders/attention_rows.comp) is tiled on a device.
#include <cstdint>

#include "vkformer/device.hpp"

namespace vkformer::vk {

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
// experiments, and tests that run every configuration on whatever device they have).
AttentionTiles attention_tiles_for(const DeviceInfo& info, bool cpu_device, bool subgroup_ops);

// One attention problem: q [B, H, Sq, D], k [B, H, Sk, D], v [B, H, Sk, Dv].
struct AttentionProblem {
  int64_t b = 1, h = 1, sq = 1, sk = 1, d = 1, dv = 1;
};

// The launch for one problem, or false where the fused kernel cannot take it (head dims beyond
// kFusedAttentionMaxHeadDim, or no tiling fits shared memory).
bool attention_launch_for(const AttentionTiles& tiles, const DeviceInfo& info,
                          const AttentionProblem& problem, AttentionLaunch* out);

}  // namespace vkformer::vk
