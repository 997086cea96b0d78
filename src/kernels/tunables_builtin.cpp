// The candidates of the kernels the static table already tunes (tuning_matmul.cpp,
// tuning_attention.cpp, Tuning::reduction_workgroup). Each list starts with the current choice;
// the others are the nearby configurations worth timing, filtered to the device's limits. Value
// texts use the syntax of the matching VKFORMER_* override where there is one (README).
#include <algorithm>
#include <initializer_list>
#include <string>

#include "tunable_candidates.hpp"
#include "tunables.hpp"

namespace vkformer::kernels {

namespace {

using namespace tunable_candidates;

std::string num(uint64_t v) { return std::to_string(v); }

// "AxBxC" from numbers.
std::string join(std::initializer_list<uint32_t> v, const char* sep = "x") {
  std::string s;
  // Two appends, not (sep) + num(x): GCC 12 warns falsely (-Wrestrict) on that form.
  for (uint32_t x : v) s.append(s.empty() ? "" : sep).append(num(x));
  return s;
}

bool is_pow2(uint32_t v) { return v && !(v & (v - 1)); }

// Whether the texel kernels (CPU devices, fixed-size subgroups with shuffles) are taken: for
// activations by activations or f16/f32 weights ...
bool texel_taken(const Tuning& b) { return b.matmul.prefer_texel && b.matmul.texel_tiles.subgroup != 0; }
// ... and for quantized weights.
bool weight_texel_taken(const Tuning& b) {
  return b.matmul.weight_tiles.texel && b.matmul.texel_tiles.subgroup != 0;
}

// shaders/matmul_texel.comp's register blocks (CPU devices): TM rows x TN columns per lane, QB
// k-quads per fetch batch, as VKFORMER_MATMUL_TEXEL writes them. tuning_matmul.cpp measured
// 16x2x4 / 16x4x2 best on one lavapipe; other CPUs (vector widths, cache sizes) may differ.
struct Block {
  uint32_t tm, tn, qb;
};

Tunable texel_nt() {
  Tunable t;
  t.id = "matmul.texel.nt";
  t.env = "VKFORMER_MATMUL_TEXEL";
  t.description = "texel matmul (CPU devices), B transposed as nn.Linear stores it: TMxTNxQB";
  t.ops = {TuneOp::linear};
  t.candidates = [](const DeviceInfo&, const Tuning& base) {
    Candidates c;
    const MatmulTexelTiles& x = base.matmul.texel_tiles;
    if (!texel_taken(base)) return c.take();
    for (Block b : {Block{x.tm, x.tn, x.qb}, Block{16, 2, 2}, Block{16, 2, 8}, Block{8, 4, 4},
                    Block{8, 2, 4}, Block{16, 4, 2}, Block{12, 2, 4}, Block{32, 1, 4}})
      c.add(join({b.tm, b.tn, b.qb}), [b](Tuning& u) {
        u.matmul.texel_tiles.tm = b.tm, u.matmul.texel_tiles.tn = b.tn, u.matmul.texel_tiles.qb = b.qb;
      });
    return c.take();
  };
  return t;
}

Tunable texel_nn() {
  Tunable t;
  t.id = "matmul.texel.nn";
  t.env = "VKFORMER_MATMUL_TEXEL";
  t.description = "texel matmul (CPU devices), B not transposed: TMxTNxQB, TN a multiple of 4";
  t.ops = {TuneOp::matmul};
  t.candidates = [](const DeviceInfo&, const Tuning& base) {
    Candidates c;
    const MatmulTexelTiles& x = base.matmul.texel_tiles;
    if (!texel_taken(base)) return c.take();
    for (Block b : {Block{x.tm_nn, x.tn_nn, x.qb_nn}, Block{16, 4, 4}, Block{8, 4, 4},
                    Block{8, 8, 2}, Block{16, 8, 1}, Block{12, 4, 2}})
      c.add(join({b.tm, b.tn, b.qb}), [b](Tuning& u) {
        u.matmul.texel_tiles.tm_nn = b.tm, u.matmul.texel_tiles.tn_nn = b.tn;
        u.matmul.texel_tiles.qb_nn = b.qb;
      });
    return c.take();
  };
  return t;
}

Tunable texel_transpose() {
  return integer_tunable(
      {.id = "matmul.texel.transpose_min_m",
       .env = "VKFORMER_MATMUL_TEXEL",
       .description = "texel matmul (CPU devices): the M from which B [K, N] is transposed first (0: never)",
       .ops = {TuneOp::matmul}},
      {.field = [](Tuning& u) -> uint32_t& { return u.matmul.texel_tiles.transpose_min_m; },
       .applies = texel_taken,
       .others = {0, 256, 512, 1024, 2048}});
}

// shaders/matmul_wq_texel.comp (CPU devices, quantized weights): the block for M > 1 ...
Tunable weight_texel_block() {
  Tunable t;
  t.id = "matmul.wq_texel.block";
  t.env = "VKFORMER_MATMUL_WQ_TEXEL";
  t.description = "quantized-weight texel matmul (CPU devices), M > 1: TMxTN per lane";
  t.ops = {TuneOp::linear_quantized};
  t.measures = several_rows;
  t.candidates = [](const DeviceInfo&, const Tuning& base) {
    Candidates c;
    const MatmulWeightTiles& w = base.matmul.weight_tiles;
    if (!weight_texel_taken(base)) return c.take();
    for (Block b : {Block{w.texel_tm, w.texel_tn, 0}, Block{8, 2, 0}, Block{4, 4, 0},
                    Block{16, 2, 0}, Block{4, 8, 0}, Block{8, 8, 0}, Block{16, 4, 0}})
      c.add(join({b.tm, b.tn}), [b](Tuning& u) {
        u.matmul.weight_tiles.texel_tm = b.tm, u.matmul.weight_tiles.texel_tn = b.tn;
      });
    return c.take();
  };
  return t;
}

// ... and the columns per lane for M = 1 (decoding).
Tunable weight_texel_gemv() {
  return integer_tunable(
      {.id = "matmul.wq_texel.gemv",
       .env = "VKFORMER_MATMUL_WQ_TEXEL",
       .description = "quantized-weight texel matmul (CPU devices), M = 1: columns per lane",
       .ops = {TuneOp::linear_quantized},
       .measures = one_row},
      {.field = [](Tuning& u) -> uint32_t& { return u.matmul.weight_tiles.texel_gemv_tn; },
       .applies = weight_texel_taken,
       .others = {1, 2, 4, 8, 16}});
}

// shaders/matmul_wq_rows.comp (CPU devices, M = 1, lanes on consecutive blocks): how many
// workgroups a mat-vec is spread over (each takes up to 16 groups of rows and loads x's blocks
// once for them: fewer, longer workgroups load x less often, more keep every thread busy).
Tunable weight_rows_workgroups() {
  return integer_tunable(
      {.id = "matmul.wq_rows.workgroups",
       .description = "quantized-weight mat-vec with lanes on consecutive blocks (CPU devices), "
                      "M = 1: workgroups per mat-vec",
       .ops = {TuneOp::linear_quantized},
       .measures = one_row},
      {.field = [](Tuning& u) -> uint32_t& { return u.matmul.weight_tiles.texel_rows_workgroups; },
       .applies = weight_texel_taken,
       .others = {4, 8, 16, 32, 64}});
}

// ... and the most rounds of blocks a lane keeps x for (x's registers per lane grow with them:
// K beyond SG * max_rounds / rows per group takes matmul_wq_vec.comp instead).
//
// Not a tunable: texel_gemv_stream_bytes, the weight size from which mat-vecs take this kernel.
// It pays where the weight comes from DRAM, as every weight does in a decoding step (the model's
// weights exceed the caches), while the tuner times one op at a time with its weight cached
// between runs, where the lanes-on-rows kernel is often faster: it would pick the threshold that
// makes decoding slower (VKFORMER_MATMUL_WQ_STREAM_BYTES sets it by hand).
Tunable weight_rows_rounds() {
  return integer_tunable(
      {.id = "matmul.wq_rows.max_rounds",
       .description = "quantized-weight mat-vec with lanes on consecutive blocks (CPU devices), "
                      "M = 1: most rounds of x blocks a lane keeps (larger K take the "
                      "lanes-on-rows kernel)",
       .ops = {TuneOp::linear_quantized},
       .measures = one_row},
      {.field = [](Tuning& u) -> uint32_t& { return u.matmul.weight_tiles.texel_rows_max_rounds; },
       .applies = weight_texel_taken,
       .others = {16, 32, 64, 96}});
}

// shaders/matmul.comp staged in shared memory (GPUs): BMxBNxBK/TMxTN as VKFORMER_MATMUL_TILES.
struct Tiles {
  uint32_t bm, bn, bk, tm, tn;
};

Tunable general_tiles() {
  Tunable t;
  t.id = "matmul.tiles";
  t.env = "VKFORMER_MATMUL_TILES";
  t.description = "general matmul staged in shared memory (GPUs): BMxBNxBK/TMxTN";
  t.ops = {TuneOp::linear, TuneOp::matmul};
  t.measures = [](const TuneShape& s) { return s.m > 8; };  // smaller M takes the mat-vec
  t.candidates = [](const DeviceInfo& info, const Tuning& base) {
    Candidates c;
    const MatmulTiles& b = base.matmul.tiles;
    if (!b.shared_memory || base.matmul.prefer_texel) return c.take();
    for (Tiles x : {Tiles{b.bm, b.bn, b.bk, b.tm, b.tn}, Tiles{128, 128, 16, 8, 8},
                    Tiles{128, 128, 8, 8, 8}, Tiles{128, 128, 32, 8, 8}, Tiles{64, 64, 16, 4, 4},
                    Tiles{64, 64, 32, 4, 4}, Tiles{128, 64, 16, 8, 4}, Tiles{64, 128, 16, 4, 8},
                    Tiles{32, 32, 16, 2, 2}}) {
      MatmulTiles m = b;
      m.bm = x.bm, m.bn = x.bn, m.bk = x.bk, m.tm = x.tm, m.tn = x.tn;
      if (!workgroup_fits(info, m.invocations()) || m.shared_bytes() > info.shared_memory_bytes)
        continue;
      c.add(join({x.bm, x.bn, x.bk}) + "/" + join({x.tm, x.tn}), [m](Tuning& u) { u.matmul.tiles = m; });
    }
    return c.take();
  };
  return t;
}

// GPUs only, whatever the current target (0 included, a candidate itself).
Tunable split_k() {
  return integer_tunable(
      {.id = "matmul.split_k",
       .description = "general matmul (GPUs): split K while the output has fewer tiles than this "
                      "(0: never)",
       .ops = {TuneOp::linear, TuneOp::matmul},
       .measures = [](const TuneShape& s) { return s.m > 8; }},
      {.field = [](Tuning& u) -> uint32_t& { return u.matmul.split_k.target_workgroups; },
       .applies = [](const Tuning& b) {
         return !b.cpu_device && b.matmul.tiles.shared_memory && !b.matmul.prefer_texel;
       },
       .others_on = split_targets});
}

// shaders/matmul_gemv.comp (GPUs, M <= 8): invocations per workgroup x columns per workgroup
// (B transposed).
Tunable gemv() {
  Tunable t;
  t.id = "matmul.gemv";
  t.description = "mat-vec for small M (GPUs), B transposed: WGxCOLUMNS (workgroup a power of 2)";
  t.ops = {TuneOp::linear};
  t.measures = [](const TuneShape& s) { return s.m <= 8; };
  t.candidates = [](const DeviceInfo& info, const Tuning& base) {
    Candidates c;
    const MatmulGemvTiles& g = base.matmul.gemv_tiles;
    if (!base.matmul.prefer_gemv) return c.take();
    struct Pair {
      uint32_t wg, columns;
    };
    for (Pair p : {Pair{g.workgroup, g.columns}, Pair{64, 4}, Pair{128, 2}, Pair{128, 8},
                   Pair{256, 4}, Pair{256, 8}, Pair{64, 8}, Pair{32, 4}}) {
      if (!is_pow2(p.wg) || !workgroup_fits(info, p.wg)) continue;
      c.add(join({p.wg, p.columns}), [p](Tuning& u) {
        u.matmul.gemv_tiles.workgroup = p.wg, u.matmul.gemv_tiles.columns = p.columns;
      });
    }
    return c.take();
  };
  return t;
}

// shaders/matmul_wq.comp (GPUs, quantized weights, M > 1): BMxBN/TMxTN staged 32 of K at a time.
Tunable weight_tiles() {
  Tunable t;
  t.id = "matmul.wq.tiles";
  t.description = "quantized-weight matmul staged in shared memory (GPUs), M > 1: BMxBN/TMxTN";
  t.ops = {TuneOp::linear_quantized};
  t.measures = several_rows;
  t.candidates = [](const DeviceInfo& info, const Tuning& base) {
    Candidates c;
    const MatmulWeightTiles& w = base.matmul.weight_tiles;
    if (w.texel || !w.shared_memory) return c.take();
    for (Tiles x : {Tiles{w.bm, w.bn, 0, w.tm, w.tn}, Tiles{64, 64, 0, 4, 4},
                    Tiles{32, 32, 0, 4, 4}, Tiles{64, 32, 0, 4, 4}, Tiles{32, 64, 0, 4, 4},
                    Tiles{128, 64, 0, 8, 4}, Tiles{128, 128, 0, 8, 8}, Tiles{64, 64, 0, 8, 8}}) {
      MatmulWeightTiles m = w;
      m.bm = x.bm, m.bn = x.bn, m.tm = x.tm, m.tn = x.tn;
      if (!workgroup_fits(info, m.invocations()) || m.shared_bytes() > info.shared_memory_bytes)
        continue;
      c.add(join({x.bm, x.bn}) + "/" + join({x.tm, x.tn}), [x](Tuning& u) {
        MatmulWeightTiles& v = u.matmul.weight_tiles;
        v.bm = x.bm, v.bn = x.bn, v.tm = x.tm, v.tn = x.tn;
      });
    }
    return c.take();
  };
  return t;
}

// shaders/matmul_wq_gemv.comp (GPUs, quantized weights, M = 1): WG/LANES, LANES invocations per
// output (a power of 2 dividing WG).
Tunable weight_gemv() {
  Tunable t;
  t.id = "matmul.wq.gemv";
  t.description = "quantized-weight mat-vec (GPUs), M = 1: WG/LANES (lanes per output)";
  t.ops = {TuneOp::linear_quantized};
  t.measures = one_row;
  t.candidates = [](const DeviceInfo& info, const Tuning& base) {
    Candidates c;
    const MatmulWeightTiles& w = base.matmul.weight_tiles;
    if (w.texel || !w.shared_memory) return c.take();
    struct Pair {
      uint32_t wg, lanes;
    };
    for (Pair p : {Pair{w.gemv_workgroup, w.gemv_lanes}, Pair{64, 8}, Pair{128, 8},
                   Pair{128, 16}, Pair{128, 32}, Pair{256, 16}, Pair{256, 32}, Pair{64, 16},
                   Pair{32, 32}}) {
      if (!is_pow2(p.lanes) || p.wg < p.lanes || p.wg % p.lanes || !workgroup_fits(info, p.wg) ||
          uint64_t(p.wg) * 4 > info.shared_memory_bytes)
        continue;
      c.add(num(p.wg) + "/" + num(p.lanes), [p](Tuning& u) {
        u.matmul.weight_tiles.gemv_workgroup = p.wg, u.matmul.weight_tiles.gemv_lanes = p.lanes;
      });
    }
    return c.take();
  };
  return t;
}

// Fused attention, as VKFORMER_ATTENTION_TILES writes it: rows/LxR[/shuffle|/texel] on CPU
// devices (R query rows per lane), tiles/WGxBRxBC on GPUs.
Tunable attention_tiles() {
  Tunable t;
  t.id = "attention.tiles";
  t.env = "VKFORMER_ATTENTION_TILES";
  t.description = "fused attention: rows/LANESxROWS[/shuffle|/texel] (CPU devices) or "
                  "tiles/WGxBRxBC (GPUs)";
  t.ops = {TuneOp::attention};
  t.candidates = [](const DeviceInfo& info, const Tuning& base) {
    Candidates c;
    const AttentionTiles& a = base.attention;
    if (a.kernel == AttentionTiles::Kernel::rows) {
      const char* mode = a.texel ? "/texel" : a.shuffle ? "/shuffle" : "";
      for (uint32_t r : {a.rows_per_lane, 1u, 2u, 3u, 4u, 6u})
        c.add("rows/" + join({a.lanes, r}) + mode,
              [r](Tuning& u) { u.attention.rows_per_lane = r; });
      if (a.texel)  // the same rows with buffer loads instead of texel fetches
        c.add("rows/" + join({a.lanes, a.rows_per_lane}) + "/shuffle",
              [](Tuning& u) { u.attention.texel = false; });
      return c.take();
    }
    struct Tile {
      uint32_t wg, br, bc;
    };
    for (Tile x : {Tile{a.invocations, a.br, a.bc}, Tile{128, 32, 32}, Tile{64, 16, 32},
                   Tile{64, 32, 32}, Tile{128, 32, 16}, Tile{128, 64, 32}, Tile{256, 64, 32},
                   Tile{128, 16, 64}}) {
      if (x.br > x.wg || !workgroup_fits(info, x.wg)) continue;
      c.add("tiles/" + join({x.wg, x.br, x.bc}), [x](Tuning& u) {
        u.attention.invocations = x.wg, u.attention.br = x.br, u.attention.bc = x.bc;
      });
    }
    return c.take();
  };
  return t;
}

// The workgroup of the shared-memory row reductions (softmax, layer norm, RMS norm on GPUs).
// CPU devices run the row kernels instead.
Tunable reduction_workgroup() {
  return integer_tunable(
      {.id = "reduction.workgroup",
       .description = "softmax / layer norm / RMS norm workgroup on GPUs (a power of 2)",
       .ops = {TuneOp::softmax, TuneOp::layer_norm, TuneOp::rms_norm}},
      {.field = [](Tuning& u) -> uint32_t& { return u.reduction_workgroup; },
       .applies = [](const Tuning& b) { return !b.cpu_device; },
       .others = {64, 128, 256, 512, 1024},
       .fits = [](const DeviceInfo& info, uint32_t wg) { return workgroup_fits(info, wg); }});
}

}  // namespace

void add_builtin_tunables(std::vector<Tunable>& list) {
  // Most time first: a short budget keeps the tunables that matter most.
  for (Tunable t : {texel_nt(), weight_texel_block(), weight_texel_gemv(), weight_rows_workgroups(),
                    weight_rows_rounds(), attention_tiles(),
                    texel_nn(), texel_transpose(), general_tiles(), gemv(), weight_tiles(),
                    weight_gemv(), split_k(), reduction_workgroup()})
    list.push_back(std::move(t));
}

}  // namespace vkformer::kernels
