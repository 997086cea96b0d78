#include "tunables.hpp"

#include <cstdlib>

namespace vkformer::kernels {

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
    add_builtin_tunables(v);
    add_coopmat_tunables(v);
    // A new kernel path: add_<path>_tunables(v); here, defined beside its tuning code.
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
