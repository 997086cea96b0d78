// What `vkformer tune` may change in attention's kernels (tuning_attention.cpp): the scalar fused
// kernels' tiles, and flash attention's and split-K flash decoding's configurations. Each list
// starts with the current choice; the flash and decode lists then offer the static table's
// per-problem choice ("table") and the configurations of the same lists the table chooses from
// (flash_configs(), decode_configs()) that fit the device. Those lists are what
// tests/flash_attention_test.cpp runs through the emulation, so the tuner can only ever pick a
// configuration that was checked against the references. Value texts use the syntax of
// VKFORMER_ATTENTION_TILES, VKFORMER_ATTENTION_FLASH and VKFORMER_ATTENTION_DECODE.
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
bool decoding(const TuneShape& s) { return rows_per_kv_head(s) <= kDecodeRows; }

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

// A configuration `vkformer tune` keeps for every problem it fits (`preferred` of FlashTiles or
// DecodeTiles), or the table's per-problem choice: the current one, "table", then each of the
// table's list that fits the device.
template <class Config>
ListChoice<std::optional<Config>> preferred_config(
    bool (*applies)(const Tuning&), std::optional<Config> (*current)(const Tuning&),
    const std::vector<Config>& configs, bool (*fits)(const DeviceInfo&, const Tuning&, const Config&),
    void (*apply)(Tuning&, const std::optional<Config>&)) {
  ListChoice<std::optional<Config>> choice{.applies = applies, .current = current};
  choice.others.push_back(std::nullopt);
  choice.others.insert(choice.others.end(), configs.begin(), configs.end());
  choice.fits = [current, fits](const DeviceInfo& info, const Tuning& base,
                                const std::optional<Config>& c) {
    return !c || c == current(base) || fits(info, base, *c);
  };
  choice.text = [](const std::optional<Config>& c) { return c ? c->str() : std::string("table"); };
  choice.apply = apply;
  return choice;
}

// Flash attention: one configuration (subgroups, row tiles per subgroup, keys per block) for
// every problem it fits, or the table's per-problem choice. Listed where it fits the device at
// the smallest head dims; a problem it does not fit (row tiles at head dim 128) keeps the table.
Tunable attention_flash() {
  return list_tunable(
      {.id = "attention.flash",
       .env = "VKFORMER_ATTENTION_FLASH",
       .description = "flash attention on cooperative matrices: table or WxRxBC (subgroups, row "
                      "tiles per subgroup, keys per block)",
       .ops = {TuneOp::attention},
       // f16 (f32 storage is flash attention's only where asked) and more rows than decoding
       // takes.
       .measures = [](const TuneShape& s) { return s.dtype == DType::f16 && !decoding(s); }},
      preferred_config<FlashConfig>(
          [](const Tuning& b) { return b.attention.flash.usable() && !b.attention.flash.forced; },
          [](const Tuning& b) { return b.attention.flash.preferred; }, flash_configs(),
          [](const DeviceInfo& info, const Tuning& b, const FlashConfig& config) {
            const FlashTiles& f = b.attention.flash;
            FlashLaunch l;
            l.api = f.api, l.shape = f.shape, l.subgroup = f.subgroup, l.config = config;
            l.d_cap = l.dv_cap = 16;
            return flash_config_fits(l, info, nullptr);
          },
          [](Tuning& u, const std::optional<FlashConfig>& c) { u.attention.flash.preferred = c; }));
}

// Split-K flash decoding: the configuration (invocations per workgroup x keys per tile) ...
Tunable attention_decode() {
  return list_tunable(
      {.id = "attention.decode",
       .env = "VKFORMER_ATTENTION_DECODE",
       .description = "split-K flash decoding (GPUs): table or WGxTK (invocations, keys per tile)",
       .ops = {TuneOp::attention},
       .measures = decoding},
      preferred_config<DecodeConfig>(
          [](const Tuning& b) { return b.attention.decode.enabled && !b.attention.decode.forced; },
          [](const Tuning& b) { return b.attention.decode.preferred; }, decode_configs(),
          [](const DeviceInfo& info, const Tuning&, const DecodeConfig& config) {
            DecodeLaunch l;
            l.config = config;
            l.rows = 1, l.d_cap = l.dv_cap = 32;
            return decode_config_fits(l, info);
          },
          [](Tuning& u, const std::optional<DecodeConfig>& c) { u.attention.decode.preferred = c; }));
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
       .measures = decoding},
      {.field = [](Tuning& u) -> uint32_t& { return u.attention.decode.target_workgroups; },
       .applies = [](const Tuning& b) { return b.attention.decode.enabled && !b.attention.decode.forced; },
       .others_on = split_targets});
}

}  // namespace

void add_attention_tunables(std::vector<Tunable>& list) {
  for (Tunable t : {attention_tiles(), attention_flash(), attention_decode(), attention_decode_splits()})
    list.push_back(std::move(t));
}

}  // namespace vkformer::kernels
