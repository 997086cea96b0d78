// Every candidate of every tunable (src/kernels/tunables.hpp) that applies to the test device, run
// against double-precision references: what `vkformer tune` may pick, and so what a tuning cache
// may make every later process run, is correct before anything is timed. Each candidate gets
// its own device (opened under a ScopedTuningTrial) and runs the ops its tunable is timed with,
// at small shapes that still cross tiles, blocks and both sides of M = 1.
//
// ctest runs this binary twice: as it is (on lavapipe: the CPU-device tunables, texel blocks and
// the attention rows) and with VKFORMER_TUNING_AS_GPU=1 (the GPU tunables: shared-memory tiles,
// split-K, mat-vec widths, attention tiles, reduction workgroups).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "executor_impl.hpp"
#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "tunables.hpp"
#include "tuning_cache.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/half.hpp"
#include "vkformer/vkformer.hpp"

namespace vkformer::testing {
namespace {

using kernels::TuneOp;
using kernels::TuneShape;

TuneShape shape(TuneOp op, int64_t m, int64_t n, int64_t k, DType dt = DType::f32) {
  TuneShape s;
  s.op = op;
  s.dtype = dt;
  s.m = m, s.n = n, s.k = k;
  return s;
}

TuneShape attention(int64_t heads, int64_t kv_heads, int64_t sq, int64_t sk, bool causal) {
  TuneShape s = shape(TuneOp::attention, sq, sk, 0);
  s.heads = heads, s.kv_heads = kv_heads, s.head_dim = 64, s.causal = causal;
  return s;
}

// Small shapes per op: M = 1, a few rows, and more rows than a GPU tile (128); K and N not
// multiples of the tiles; matmul's M = 300 passes the transpose-first thresholds.
std::vector<TuneShape> test_shapes() {
  std::vector<TuneShape> v;
  for (int64_t m : {1, 5, 37, 133}) v.push_back(shape(TuneOp::linear, m, 70, 68));
  v.push_back(shape(TuneOp::linear, 37, 70, 68, DType::f16));
  for (int64_t m : {1, 37, 300}) v.push_back(shape(TuneOp::matmul, m, 68, 52));
  for (int64_t m : {1, 5, 37}) {
    TuneShape q = shape(TuneOp::linear_quantized, m, 40, 96);
    q.weight = DType::q4_1;
    v.push_back(q);
  }
  v.push_back(attention(2, 2, 37, 45, false));
  v.push_back(attention(2, 2, 37, 45, true));
  v.push_back(attention(4, 2, 1, 45, false));
  for (TuneOp op : {TuneOp::softmax, TuneOp::layer_norm, TuneOp::rms_norm}) {
    v.push_back(shape(op, 7, 100, 0));
    v.push_back(shape(op, 37, 301, 0));
  }
  return v;
}

// Random q4_1 blocks (fp16 scale and minimum, 16 bytes of nibbles) and their values, as
// dequantize_row (ggml's arithmetic) gives them.
std::pair<HostTensor, std::vector<double>> q4_1_weight(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  const uint64_t bytes = dtype_bytes(DType::q4_1, n * k);
  std::vector<std::byte> raw(bytes);
  for (auto& b : raw) b = static_cast<std::byte>(rng() & 0xff);
  std::uniform_real_distribution<float> d(0.01f, 0.1f), m(-0.5f, 0.0f);
  for (uint64_t at = 0; at < bytes; at += dtype_block_bytes(DType::q4_1)) {
    const uint16_t dh = float_to_half(d(rng)), mh = float_to_half(m(rng));
    std::memcpy(raw.data() + at, &dh, 2);
    std::memcpy(raw.data() + at + 2, &mh, 2);
  }
  std::vector<float> f(static_cast<size_t>(n * k));
  dequantize_row(GgmlType::Q4_1, raw, f);
  return {HostTensor::from_bytes({n, k}, DType::q4_1, raw), std::vector<double>(f.begin(), f.end())};
}

// Matmul tolerance: fp32 accumulation over k terms of |a|,|b| <= 1 (and the f16 output).
Tolerance matmul_tolerance(int64_t k, DType dt) {
  Tolerance t{8 * std::sqrt(double(k)) * std::ldexp(1.0, -24) * std::sqrt(double(k)),
              std::ldexp(1.0, -20)};
  if (dt == DType::f16) t = {t.atol + std::ldexp(1.0, -20), t.rtol + std::ldexp(1.0, -10)};
  return t;
}

void check_shape(Device& device, const TuneShape& s) {
  SCOPED_TRACE(s.text());
  const DType dt = s.dtype;
  Graph g;
  std::map<std::string, HostTensor> inputs;
  std::vector<double> want;
  Tolerance tol = default_tolerance(dt);
  double int8_bound = 0;
  auto input = [&](const std::string& name, const Shape& shp, uint32_t seed, float lo, float hi) {
    const auto v = random_values(static_cast<size_t>(shp.numel()), seed, lo, hi);
    inputs.emplace(name, make_tensor(shp, v, dt));
    return std::make_pair(g.input(name, shp, dt), stored(v, dt));
  };
  switch (s.op) {
    case TuneOp::linear:
    case TuneOp::matmul: {
      const bool lin = s.op == TuneOp::linear;
      auto [a, av] = input("a", {s.m, s.k}, 1, -1, 1);
      auto [b, bv] = input("b", lin ? Shape{s.n, s.k} : Shape{s.k, s.n}, 2, -1, 1);
      if (lin) {
        auto [bias, biasv] = input("bias", {s.n}, 3, -1, 1);
        g.output("y", g.linear(a, b, bias));
        want = ref::matmul(av, bv, 1, 1, s.m, s.n, s.k, true, &biasv, 1.0);
      } else {
        g.output("y", g.matmul(a, b));
        want = ref::matmul(av, bv, 1, 1, s.m, s.n, s.k, false, nullptr, 1.0);
      }
      tol = matmul_tolerance(s.k, dt);
      break;
    }
    case TuneOp::linear_quantized: {
      auto [x, xv] = input("x", {s.m, s.k}, 4, -1, 1);
      auto [w, wv] = q4_1_weight(s.n, s.k, 5);
      g.output("y", g.linear(x, g.constant("w", w)));
      want = ref::matmul(xv, wv, 1, 1, s.m, s.n, s.k, true, nullptr, 1.0);
      double max_w = 0;
      for (double v : wv) max_w = std::max(max_w, std::abs(v));
      tol = matmul_tolerance(s.k, dt);
      tol.atol *= max_w;
      // Where the integer-dot mat-vec runs (matmul.wq_idot.rows), x's 8-bit rounding as well
      // (quant_matmul_test's check_int8_x states the bound).
      int8_bound = int8_activation_bound(xv, wv, s.m, s.n, s.k);
      break;
    }
    case TuneOp::attention: {
      auto [q, qv] = input("q", {1, s.heads, s.m, s.head_dim}, 6, -1, 1);
      auto [k, kv] = input("k", {1, s.kv_heads, s.n, s.head_dim}, 7, -1, 1);
      auto [v, vv] = input("v", {1, s.kv_heads, s.n, s.head_dim}, 8, -1, 1);
      AttentionOptions o;
      o.causal = s.causal;
      o.path = AttentionOptions::Path::fused;
      g.output("y", g.attention(q, k, v, o));
      // The reference has no grouped heads: repeat each KV head for its query heads.
      const int64_t group = s.heads / s.kv_heads, rows = s.n * s.head_dim;
      std::vector<double> k2, v2;
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t src = h / group * rows;
        k2.insert(k2.end(), kv.begin() + src, kv.begin() + src + rows);
        v2.insert(v2.end(), vv.begin() + src, vv.begin() + src + rows);
      }
      ref::SoftmaxMasks m;
      m.scale = 1.0 / std::sqrt(double(s.head_dim));
      m.causal = s.causal;
      want = ref::attention(qv, k2, v2, 1, s.heads, s.m, s.n, s.head_dim, s.head_dim, m);
      tol = {2e-5, 1e-4};
      break;
    }
    case TuneOp::softmax: {
      auto [x, xv] = input("x", {s.m, s.n}, 9, -4, 4);
      SoftmaxOptions o;
      o.scale = 0.125f;
      g.output("y", g.softmax(x, o));
      ref::SoftmaxMasks m;
      m.scale = 0.125;
      want = ref::softmax(xv, 1, 1, s.m, s.n, m);
      break;
    }
    case TuneOp::layer_norm:
    case TuneOp::rms_norm: {
      auto [x, xv] = input("x", {s.m, s.n}, 10, -3, 3);
      auto [w, wv] = input("w", {s.n}, 11, 0.5f, 1.5f);
      if (s.op == TuneOp::layer_norm) {
        auto [b, bv] = input("b", {s.n}, 12, -0.1f, 0.1f);
        g.output("y", g.layer_norm(x, w, b));
        want = ref::layer_norm(xv, s.m, s.n, wv, bv, 1e-5);
      } else {
        g.output("y", g.rms_norm(x, w));
        want.resize(xv.size());
        for (int64_t r = 0; r < s.m; ++r) {
          double ss = 0;
          for (int64_t j = 0; j < s.n; ++j) ss += xv[r * s.n + j] * xv[r * s.n + j];
          const double scale = 1.0 / std::sqrt(ss / double(s.n) + 1e-5);
          for (int64_t j = 0; j < s.n; ++j) want[r * s.n + j] = xv[r * s.n + j] * scale * wv[j];
        }
      }
      tol = {1e-5, 1e-4};
      break;
    }
  }
  ExecutorImpl ex(device, g, {});
  for (const auto& [name, value] : inputs) ex.set_input(name, value);
  ex.run();
  for (const Dispatch& d : ex.program().dispatches)
    if (std::string(d.kernel->name).starts_with("matmul_wq_idot")) tol.atol += int8_bound;
  EXPECT_TRUE(all_close(ex.output("y"), want, tol));
}

// Every candidate of every tunable, each in its own device: a failure names the tunable, the
// value and the shape.
TEST_F(DeviceTest, EveryCandidateOfEveryTunableMatchesTheReferences) {
  const DeviceInfo& info = device().info();
  const kernels::Tuning base = kernels::tuning_for(info, /*tuned=*/false);
  size_t tried = 0, applicable = 0;
  for (const kernels::Tunable& t : kernels::all_tunables()) {
    if (kernels::tunable_overridden(t)) continue;
    const std::vector<kernels::TunableValue> candidates = t.candidates(info, base);
    if (candidates.size() < 2) continue;
    ++applicable;
    std::vector<TuneShape> shapes;
    for (const TuneShape& s : test_shapes())
      if (std::find(t.ops.begin(), t.ops.end(), s.op) != t.ops.end() && (!t.measures || t.measures(s)))
        shapes.push_back(s);
    ASSERT_FALSE(shapes.empty()) << t.id << ": no test shape exercises it";
    for (size_t c = 1; c < candidates.size(); ++c) {
      SCOPED_TRACE(t.id + " = " + candidates[c].text);
      Device d = [&] {
        kernels::ScopedTuningTrial trial({{t.id, candidates[c].text}});
        return open_test_device_with_env({});
      }();
      for (const TuneShape& s : shapes) {
        try {
          check_shape(d, s);
        } catch (const std::exception& e) {
          ADD_FAILURE() << t.id << " = " << candidates[c].text << ", " << s.text() << ": " << e.what();
        }
      }
      ++tried;
    }
  }
  std::printf("[ tunables ] %zu candidates of %zu applicable tunables on '%s'\n", tried, applicable,
              info.name.c_str());
  RecordProperty("candidates", static_cast<int>(tried));
  EXPECT_GE(applicable, 1u) << "no tunable applies to '" << info.name << "'";
}

// Every candidate list starts with the current choice and has no duplicates, and a value's text
// is what it applies: once applied, the tunable's current choice is that text. (The cache
// checks stored values against these texts, so a mismatch would apply something else.)
TEST_F(DeviceTest, CandidateListsStartWithTheStaticChoice) {
  const DeviceInfo& info = device().info();
  const kernels::Tuning base = kernels::tuning_for(info, /*tuned=*/false);
  std::set<std::string> ids;
  for (const kernels::Tunable& t : kernels::all_tunables()) {
    EXPECT_TRUE(ids.insert(t.id).second) << "duplicate tunable id " << t.id;
    EXPECT_FALSE(t.ops.empty()) << t.id << " names no op to time it";
    const std::vector<kernels::TunableValue> c = t.candidates(info, base);
    std::set<std::string> texts;
    for (const kernels::TunableValue& v : c) EXPECT_TRUE(texts.insert(v.text).second) << t.id << ": " << v.text;
    if (c.size() < 2) continue;
    // Each value's text is what it applies: once applied, the tunable still applies and names
    // that value as its current choice.
    for (const kernels::TunableValue& v : c) {
      kernels::Tuning applied = base;
      v.apply(applied);
      const std::vector<kernels::TunableValue> again = t.candidates(info, applied);
      ASSERT_FALSE(again.empty()) << t.id << " = " << v.text << " makes the tunable inapplicable";
      EXPECT_EQ(again.front().text, v.text) << t.id << ": the value applied is not the one named";
    }
  }
}

}  // namespace
}  // namespace vkformer::testing
