#include "tunables.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "matmul_paths.hpp"
#include "tunable_candidates.hpp"

namespace vkformer::kernels {

namespace {

// The workgroup of the shared-memory row reductions (softmax, layer norm, RMS norm on GPUs).
// CPU devices run the row kernels instead.
Tunable reduction_workgroup() {
  using namespace tunable_candidates;
  return integer_tunable(
      {.id = "reduction.workgroup",
       .description = "softmax / layer norm / RMS norm workgroup on GPUs (a power of 2)",
       .ops = {TuneOp::softmax, TuneOp::layer_norm, TuneOp::rms_norm}},
      {.field = [](Tuning& u) -> uint32_t& { return u.reduction_workgroup; },
       .applies = [](const Tuning& b) { return !b.cpu_device; },
       .others = {64, 128, 256, 512, 1024},
       .fits = [](const DeviceInfo& info, uint32_t wg) { return workgroup_fits(info, wg); }});
}

// The order the tuner sweeps the tunables in: most time first, so that a short budget keeps the
// ones that matter most. Tunables not named here (a new path's) follow, in the order declared.
const char* const kSweepOrder[] = {
    "matmul.texel.nt",   "matmul.wq_texel.block",        "matmul.wq_texel.gemv",
    "matmul.wq_rows.workgroups", "matmul.wq_rows.max_rounds", "attention.tiles",
    "matmul.texel.nn",   "matmul.texel.transpose_min_m", "matmul.tiles",
    "matmul.gemv",       "matmul.wq.tiles",              "matmul.wq.gemv",
    "matmul.split_k",    "reduction.workgroup",          "attention.flash",
    "matmul.coopmat",    "attention.decode",             "attention.decode.split",
};

size_t sweep_rank(const std::string& id) {
  const auto it = std::find(std::begin(kSweepOrder), std::end(kSweepOrder), id);
  return static_cast<size_t>(it - std::begin(kSweepOrder));
}

}  // namespace

const char* tune_op_name(TuneOp op) {
  switch (op) {
    case TuneOp::linear: return "linear";
    case TuneOp::matmul: return "matmul";
    case TuneOp::linear_quantized: return "linear_q";
    case TuneOp::attention: return "attention";
    case TuneOp::softmax: return "softmax";
    case TuneOp::layer_norm: return "layer_norm";
    case TuneOp::rms_norm: return "rms_norm";
  }
  return "?";
}

std::string TuneShape::text() const {
  auto n_ = [](const char* key, int64_t v) { return std::string(" ") + key + "=" + std::to_string(v); };
  std::string s = std::string(tune_op_name(op)) + " " + std::string(dtype_name(dtype));
  switch (op) {
    case TuneOp::linear_quantized:
      s += " w=" + std::string(dtype_name(weight));
      [[fallthrough]];
    case TuneOp::linear:
    case TuneOp::matmul: return s + n_("m", m) + n_("n", n) + n_("k", k);
    case TuneOp::attention:
      s += n_("b", batch) + n_("h", heads);
      if (kv_heads != heads) s += n_("hkv", kv_heads);
      return s + n_("sq", m) + n_("sk", n) + n_("d", head_dim) + (causal ? " causal" : "");
    case TuneOp::softmax:
    case TuneOp::layer_norm:
    case TuneOp::rms_norm: return s + n_("rows", m) + n_("n", n);
  }
  return s;
}

const std::vector<Tunable>& all_tunables() {
  static const std::vector<Tunable> list = [] {
    std::vector<Tunable> v;
    // Each matmul path declares its own (matmul_paths_*.cpp).
    for (const std::span<const MatmulPathEntry> paths : {float_matmul_paths(), weight_matmul_paths()})
      for (const MatmulPathEntry& path : paths)
        if (path.tunables) path.tunables(v);
    add_attention_tunables(v);
    v.push_back(reduction_workgroup());
    std::stable_sort(v.begin(), v.end(), [](const Tunable& a, const Tunable& b) {
      return sweep_rank(a.id) < sweep_rank(b.id);
    });
    return v;
  }();
  return list;
}

const Tunable* find_tunable(const std::string& id) {
  for (const Tunable& t : all_tunables())
    if (t.id == id) return &t;
  return nullptr;
}

bool tunable_overridden(const Tunable& t) {
  if (t.env.empty()) return false;
  const char* v = std::getenv(t.env.c_str());
  return v && *v;
}

const TunableValue* find_candidate(const std::vector<TunableValue>& candidates,
                                   const std::string& text) {
  for (const TunableValue& c : candidates)
    if (c.text == text) return &c;
  return nullptr;
}

}  // namespace vkformer::kernels
