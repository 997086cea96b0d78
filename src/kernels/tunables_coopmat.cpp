// The candidates of the paths on cooperative matrices (shaders/matmul_coopmat.comp, flash
// attention in shaders/attention_flash.comp) and of split-K flash decoding: each list is the
// current choice, then the configurations of the same lists the static tables choose from
// (coopmat_configs(), flash_configs(), decode_configs()) that fit the device. Those lists are
// what tests/coopmat_test.cpp and tests/flash_attention_test.cpp run through the emulation, so
// the tuner can only ever pick a configuration that was checked against the references.
// Value texts use the syntax of VKFORMER_MATMUL_COOPMAT, VKFORMER_ATTENTION_FLASH and
// VKFORMER_ATTENTION_DECODE; "table" is the static table's per-problem choice.
#include <algorithm>
#include <optional>
#include <string>

#include "tunable_candidates.hpp"
#include "tunables.hpp"

namespace vkformer::kernels {

namespace {

using namespace tunable_candidates;

// Query rows per (batch, KV head) of an attention shape: split-K decoding takes up to
// DecodeTiles::max_rows of them, flash attention the rest.
int64_t rows_per_kv_head(const TuneShape& s) {
  return s.kv_heads > 0 ? s.heads / s.kv_heads * s.m : s.m;
}
constexpr int64_t kDecodeRows = DecodeTiles{}.max_rows;

// shaders/matmul_coopmat.comp: the configuration (subgroups and tiles per subgroup, k-steps per
// slice) and the MMA shape, as MxNxK/WMxWN/TMxTN/BK/SG. Every configuration with the current
// shape, and the current configuration with each other shape the device offers.
Tunable matmul_coopmat() {
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
      if (x.invocations() > info.max_workgroup_invocations ||
          x.invocations() > info.max_workgroup_size[0] || x.shared_bytes() > info.shared_memory_bytes)
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
  return t;
}

// Flash attention: one configuration (subgroups, row tiles per subgroup, keys per block) for
// every problem it fits, or the table's per-problem choice. Listed where it fits the device at
// the smallest head dims; a problem it does not fit (row tiles at head dim 128) keeps the table.
Tunable attention_flash() {
  Tunable t;
  t.id = "attention.flash";
  t.env = "VKFORMER_ATTENTION_FLASH";
  t.description = "flash attention on cooperative matrices: table or WxRxBC (subgroups, row "
                  "tiles per subgroup, keys per block)";
  t.ops = {TuneOp::attention};
  // f16 (f32 storage is flash attention's only where asked) and more rows than decoding takes.
  t.measures = [](const TuneShape& s) {
    return s.dtype == DType::f16 && rows_per_kv_head(s) > kDecodeRows;
  };
  t.candidates = [](const DeviceInfo& info, const Tuning& base) {
    Candidates c;
    const FlashTiles& f = base.attention.flash;
    if (!f.usable() || f.forced) return c.take();
    auto add = [&](const std::optional<FlashConfig>& config) {
      c.add(config ? config->str() : "table", [config](Tuning& u) { u.attention.flash.preferred = config; });
    };
    add(f.preferred);
    add(std::nullopt);
    for (const FlashConfig& config : flash_configs()) {
      FlashLaunch l;
      l.api = f.api, l.shape = f.shape, l.subgroup = f.subgroup, l.config = config;
      l.d_cap = l.dv_cap = 16;
      if (flash_config_fits(l, info, nullptr)) add(config);
    }
    return c.take();
  };
  return t;
}

// Split-K flash decoding: the configuration (invocations per workgroup x keys per tile) ...
Tunable attention_decode() {
  Tunable t;
  t.id = "attention.decode";
  t.env = "VKFORMER_ATTENTION_DECODE";
  t.description = "split-K flash decoding (GPUs): table or WGxTK (invocations, keys per tile)";
  t.ops = {TuneOp::attention};
  t.measures = [](const TuneShape& s) { return rows_per_kv_head(s) <= kDecodeRows; };
  t.candidates = [](const DeviceInfo& info, const Tuning& base) {
    Candidates c;
    const DecodeTiles& d = base.attention.decode;
    if (!d.enabled || d.forced) return c.take();
    auto add = [&](const std::optional<DecodeConfig>& config) {
      c.add(config ? config->str() : "table", [config](Tuning& u) { u.attention.decode.preferred = config; });
    };
    add(d.preferred);
    add(std::nullopt);
    for (const DecodeConfig& config : decode_configs()) {
      DecodeLaunch l;
      l.config = config;
      l.rows = 1, l.d_cap = l.dv_cap = 32;
      if (decode_config_fits(l, info)) add(config);
    }
    return c.take();
  };
  return t;
}

// ... and how far it splits the keys: while the (batch, KV head) pairs are fewer than this
// many workgroups (0: never), as matmul.split_k.
Tunable attention_decode_splits() {
  return integer_tunable(
      {.id = "attention.decode.split",
       .env = "VKFORMER_ATTENTION_DECODE",
       .description = "split-K flash decoding (GPUs): split the keys while the workgroups are "
                      "fewer than this (0: never)",
       .ops = {TuneOp::attention},
       .measures = [](const TuneShape& s) { return rows_per_kv_head(s) <= kDecodeRows; }},
      {.field = [](Tuning& u) -> uint32_t& { return u.attention.decode.target_workgroups; },
       .applies = [](const Tuning& b) { return b.attention.decode.enabled && !b.attention.decode.forced; },
       .others_on = split_targets});
}

}  // namespace

void add_coopmat_tunables(std::vector<Tunable>& list) {
  for (Tunable t : {attention_flash(), matmul_coopmat(), attention_decode(), attention_decode_splits()})
    list.push_back(std::move(t));
}

}  // namespace vkformer::kernels
