#pragma once
// How each matmul kernel is tiled on a device, and which paths the device prefers: the static
// table, with the environment overrides. Which path runs a problem, the matmul path table says
// (matmul_paths.hpp).
#include <cstdint>
#include <optional>
#include <string>

#include "coopmat.hpp"
#include "vkformer/device.hpp"

namespace vkformer::kernels {

// The general kernel's tiling (shaders/matmul.comp): each workgroup computes a bm x bn tile of
// the output with (bm / tm) * (bn / tn) invocations, each owning a tm x tn block of it.
struct MatmulTiles {
  uint32_t bm = 64, bn = 64;  // output tile per workgroup (rows, columns)
  uint32_t bk = 16;           // depth of the K slice staged in shared memory per barrier pair
  uint32_t tm = 4, tn = 4;    // outputs per invocation (rows, columns), kept in registers
  bool shared_memory = true;  // false: no shared memory or barriers, each invocation reads A and
                              // B from the buffers directly (CPU devices)
  // In 64 bits: an override's tiling may be far too large, and must not wrap into one that fits.
  uint64_t invocations() const { return uint64_t(bm / tm) * (bn / tn); }
  // Staged slices: bk rows of bm + 1 and bn + 1 floats (padded, see shaders/matmul.comp); the
  // direct path (bk = 1) still declares one row of each.
  uint64_t shared_bytes() const {
    return uint64_t(shared_memory ? bk : 1) * (uint64_t(bm) + bn + 2) * 4;
  }
};

// shaders/matmul_texel.comp, for CPU devices: one subgroup per workgroup computes tm rows x
// (subgroup * tn) columns, reading A and B as texel buffers and sharing A through shuffles.
struct MatmulTexelTiles {
  uint32_t subgroup = 8;             // the device's (fixed) subgroup size = workgroup size
  uint32_t tm = 16, tn = 2, qb = 4;          // B transposed (N x K, the Linear layout)
  uint32_t tm_nn = 16, tn_nn = 4, qb_nn = 2;  // B not transposed; tn_nn is a multiple of 4
  // From this M on, B [K, N] is first transposed (matmul_transpose, one pass over B) and read
  // with the faster transposed blocks; 0 never. On lavapipe the pass costs about as much as a
  // few hundred rows of the product (its 4-wide stores are lane loops) and saves 10% (N = 1024)
  // to 35% (N = 2048, whose rows collide in the caches) of the product.
  uint32_t transpose_min_m = 1024;
};

// shaders/matmul_gemv.comp, for small M (decoding steps): all M <= max_m rows at once.
struct MatmulGemvTiles {
  uint32_t max_m = 8;
  uint32_t workgroup = 128;  // invocations, a power of 2
  uint32_t columns = 4;      // B transposed: columns per workgroup, each reduced over K by all
                             // its invocations
  uint32_t columns_nn = 32;  // B not transposed: columns per workgroup (coalesced rows of B),
                             // each reduced over K by workgroup / columns_nn invocations
};

// Split-K for the general kernel on GPUs: when the output has fewer tiles than the device needs
// to be busy, K is cut into `splits` ranges whose f32 partial sums a second dispatch adds.
struct MatmulSplitK {
  uint32_t target_workgroups = 0;  // split while tiles * batch < this (0: never split)
  uint32_t max_splits = 16;
  uint32_t min_k = 256;            // each split keeps at least this much of K
};

// How shaders/matmul_coopmat.comp tiles the output, apart from the MMA shape and the subgroup
// size (which come from the device): subgroups per workgroup as a grid, MMA tiles per subgroup
// as a grid, and MMA k-steps per slice of K staged in shared memory.
struct CoopmatConfig {
  uint32_t warps_m = 2, warps_n = 2;
  uint32_t tiles_m = 2, tiles_n = 2;
  uint32_t bk_tiles = 2;
  friend bool operator==(const CoopmatConfig&, const CoopmatConfig&) = default;
};

// Every configuration the tuning may choose, in the static table's order of preference (largest
// output tile first; the table takes the first that fits the device). A tuner chooses among the
// same list, and tests/coopmat_test.cpp runs each one through the emulation with every MMA shape
// of vk::emulated_mma_shapes(): every entry fits lavapipe's 32 KiB of shared memory with the
// emulation's scratch, so none can be chosen untested.
const std::vector<CoopmatConfig>& coopmat_configs();

// shaders/matmul_coopmat.comp: f16 A and B, f32 accumulators, on the cooperative matrices of
// `api` (src/vk/coopmat.hpp).
struct MatmulCoopmatTiles {
  vk::CoopmatApi api = vk::CoopmatApi::none;  // none: no cooperative matrices on this device
  uint32_t m = 0, n = 0, k = 0;       // the MMA shape (vk::coopmat_mnk)
  uint32_t subgroup = 32;             // invocations per subgroup: the device's (any of 4..128
                                      // for the emulation)
  CoopmatConfig config;
  bool usable() const { return api != vk::CoopmatApi::none && m > 0 && n > 0 && k > 0; }
  uint32_t bm() const { return m * config.tiles_m * config.warps_m; }
  uint32_t bn() const { return n * config.tiles_n * config.warps_n; }
  uint32_t bk() const { return k * config.bk_tiles; }
  uint64_t invocations() const {
    return uint64_t(subgroup) * config.warps_m * config.warps_n;
  }
  // Two stages of A (bm rows of bk) and B (bk x bn either way round) as f16 with rows padded by
  // 8 halves, one m x n f32 scratch tile per subgroup for the epilogue, and for the emulation its
  // per-subgroup scratch of one A and one B fragment.
  uint64_t shared_bytes() const;
  std::string str() const;  // "16x16x16/2x2/4x4/1/32" as VKFORMER_MATMUL_COOPMAT writes it
};

// shaders/matmul_wq.comp and matmul_wq_gemv.comp: a Linear weight [N, K] in another dtype than
// the activations (ggml blocks, bf16, the other float type), dequantized on the fly.
struct MatmulWeightTiles {
  // Tiled (prompt processing): a bm x bn output tile per workgroup, tm x tn per invocation, K
  // staged 32 (one block) at a time.
  uint32_t bm = 32, bn = 32, tm = 4, tn = 4;
  bool shared_memory = true;  // false: no staging or barriers, each invocation reads directly
  // Mat-vec (decoding), for M <= gemv_max_m: `lanes` invocations per output (a power of 2; 1
  // needs no reduction) split its row of W by blocks; `workgroup` invocations (a multiple).
  uint32_t gemv_max_m = 1;
  uint32_t gemv_workgroup = 64, gemv_lanes = 8;
  // CPU devices, quantized W (shaders/matmul_wq_texel.comp): A and W read through texel
  // buffers, one subgroup (MatmulTuning::texel_tiles.subgroup lanes) per workgroup computing
  // texel_tm rows x (subgroup * texel_tn) columns; M = 1 takes a mat-vec kernel (below). Taken
  // where the device can (texel_tiles.subgroup > 0), both
  // operands fit maxTexelBufferElements and VKFORMER_MATMUL_PATH does not force general or gemv
  // (then the kernels above run). On lavapipe (LLVM 15, AVX2) 16 x 8 blocks execute 3.3 to 4.5
  // instructions per multiply-add in the loop over K (its JIT code, fetch calls included), 8 x 4
  // blocks 4.4 to 7.0: the dequantized block and the shuffled A values serve more products.
  // The mat-vec waits on memory more than it computes, and in a decoding step every weight comes
  // from DRAM (SmolLM2's 97 MB read per token exceed the L3): weights from texel_gemv_stream_bytes
  // (all, by default) take shaders/matmul_wq_rows.comp, lanes on consecutive blocks (one stream
  // through memory per workgroup), where its rounds keep at most texel_rows_max_rounds blocks of
  // x per lane; the others, and larger K, shaders/matmul_wq_vec.comp, lanes on texel_gemv_tn rows
  // each (8 streams or more per workgroup). SmolLM2 decoded 1.2-1.5x faster with the rows kernel
  // for every weight than for the 30 MB output projection alone (one run, load ~10), which itself
  // ran 1.6x faster than on the lanes-on-rows kernel; weights that stay cached between runs of a
  // benchmark ran 0.7-1x as fast. 2 rows per lane were 10-25% faster than 4 or 1 there.
  // VKFORMER_MATMUL_WQ_STREAM_BYTES overrides the size.
  bool texel = false;
  uint32_t texel_tm = 16, texel_tn = 8, texel_gemv_tn = 2;
  uint64_t texel_gemv_stream_bytes = 0;
  uint32_t texel_rows_max_rounds = 48;
  // Groups of rows per rows-kernel workgroup: up to 16, leaving this many workgroups (each loads
  // x's blocks for its rounds once, so fewer and longer workgroups load x less often).
  uint32_t texel_rows_workgroups = 16;
  // Texels a view may hold, below the device's maxTexelBufferElements (0: that limit);
  // VKFORMER_MATMUL_WQ_TEXEL_LIMIT lowers it so tests reach the storage-buffer fallback.
  uint64_t texel_limit = 0;
  // Integer dot products (VK_KHR_shader_integer_dot_product): products of up to this many rows
  // quantize the activations to 8 bits and take a path on packed 8-bit dot products (the weight
  // paths that need Feature::integer_dot). 8 where the device reports them accelerated
  // (integerDotProduct4x8BitPackedSignedAccelerated), 0 elsewhere: lavapipe offers the feature
  // and emulates it. VKFORMER_MATMUL_INTEGER_DOT=rows and `vkformer tune` change it.
  uint32_t integer_dot_rows = 0;
  uint64_t invocations() const { return uint64_t(bm / tm) * (bn / tn); }
  uint64_t shared_bytes() const { return shared_memory ? 32 * (uint64_t(bm) + bn + 2) * 4 : 8; }
};

// Everything matmul needs to know about a device. Each path has a capability (can the device
// run it at all) and a preference (does the automatic choice take it).
struct MatmulTuning {
  MatmulTiles tiles;           // the general path
  MatmulTexelTiles texel_tiles;  // capable: texel_tiles.subgroup > 0 (fixed-size subgroups with
                                 // shuffles)
  bool prefer_texel = false;   // CPU devices
  MatmulGemvTiles gemv_tiles;  // any device can
  bool prefer_gemv = false;    // GPUs
  MatmulSplitK split_k;
  MatmulCoopmatTiles coopmat_tiles;  // capable: coopmat_tiles.usable(); preferred when capable
  MatmulWeightTiles weight_tiles;    // weights in another dtype (always their own kernels)
  // VKFORMER_MATMUL_PATH=general|texel|gemv|coopmat and VKFORMER_MATMUL_SPLIT_K=n force a path
  // of the float list of matmul_paths.hpp (by name) or a split (tests, tuning experiments); a
  // forced path is taken where it can run the shape, and the weight paths follow it as their
  // entries say.
  std::optional<std::string> forced_path;
  uint32_t forced_splits = 0;
};

// The tuning for a device: CPU devices prefer the texel kernel (where they can run it) over the
// direct general one; GPUs get the shared-memory tiling shrunk to fit their limits, GEMV for
// small M, split-K, and cooperative matrices where reported (KHR, else NV). VKFORMER_MATMUL_TILES
// replaces the general tiling and VKFORMER_MATMUL_COOPMAT the cooperative-matrix one; each
// forces its path unless VKFORMER_MATMUL_PATH says otherwise. VKFORMER_COOPMAT=emulate runs the
// cooperative-matrix kernels through the emulation (any device), =off never uses them.
MatmulTuning matmul_tuning_for(const DeviceInfo& info, bool cpu_device);

}  // namespace vkformer::kernels
