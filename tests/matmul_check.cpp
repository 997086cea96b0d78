// The matmul check shared by matmul_test and coopmat_test: see matmul_check.hpp.
#include "matmul_check.hpp"

#include <cmath>
#include <cstdio>

#include "device_impl.hpp"
#include "kernel_table.hpp"
#include "matmul.hpp"
#include "reference.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

Shape leading(const Shape& s) {
  auto d = s.dims();
  d.resize(d.size() - 2);
  return Shape(d);
}

// Index of the matrix of a tensor with batch dims `in` used by flat batch z of `out` (numpy
// broadcasting: right-aligned, dims of 1 repeat).
int64_t batch_source(const Shape& in, const Shape& out, int64_t z) {
  int64_t idx = 0, stride = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    int64_t c = z % out[d];
    z /= out[d];
    int di = d - (out.rank() - in.rank());
    if (di < 0) continue;
    if (in[di] != 1) idx += c * stride;
    stride *= in[di];
  }
  return idx;
}

// Copies every batch's matrix out of a broadcast tensor, so the reference sees full batches.
std::vector<double> expand(const std::vector<double>& v, const Shape& s, const Shape& batch) {
  int64_t matrix = s[-2] * s[-1];
  std::vector<double> out;
  out.reserve(batch.numel() * matrix);
  for (int64_t z = 0; z < batch.numel(); ++z) {
    int64_t src = batch_source(leading(s), batch, z);
    out.insert(out.end(), v.begin() + src * matrix, v.begin() + (src + 1) * matrix);
  }
  return out;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

}  // namespace

std::string case_name(const MatmulCase& c) {
  static const char* acts[] = {"", "_relu", "_gelu"};
  std::string s = shape_name(c.a) + "_by_" + shape_name(c.b) + (c.transpose_b ? "T" : "");
  if (c.bias) s += "_bias";
  if (c.alpha != 1.0f) s += "_alpha";
  s += acts[static_cast<int>(c.act)];
  return s + "_" + std::string(dtype_name(c.dtype));
}

// The kernel variants the device can run (built and with their features enabled).
kernels::KernelSupport kernels_on(Device& device) {
  return [&pipelines = device.impl().pipelines()](kernels::Kernel k, DType dtype) {
    const auto* v = kernels::find_variant(k, dtype);
    return v && pipelines.supported(*v);
  };
}

// The plan the lowering makes for `c` on `device`.
kernels::MatmulPlan plan_on(Device& device, const MatmulCase& c) {
  return kernels::plan_matmul(device.impl().tuning().matmul,
                         ops::matmul_problem(c.a, c.b, c.transpose_b, c.dtype, device.info()),
                         kernels_on(device));
}

std::string plan_name(const kernels::MatmulPlan& plan) {
  std::string s(plan.path);
  if (plan.splits > 1) s += " split " + std::to_string(plan.splits);
  if (plan.vec4) s += " vec4";
  if (plan.transpose_b_first) s += " Bt";
  return s;
}


// Builds and runs the matmul of `c` on `device` and compares it with the reference.
Outcome check_matmul(Device& device, const MatmulCase& c, uint32_t seed) {
  auto av = random_values(c.a.numel(), seed), bv = random_values(c.b.numel(), seed + 1);
  int64_t n = c.transpose_b ? c.b[-2] : c.b[-1];
  auto biasv = random_values(n, seed + 2);
  Graph g;
  Tensor a = g.input("a", c.a, c.dtype), b = g.input("b", c.b, c.dtype);
  MatmulOptions options;
  options.transpose_b = c.transpose_b;
  options.alpha = c.alpha;
  options.activation = c.act;
  if (c.bias) options.bias = g.input("bias", {n}, c.dtype);
  Tensor o = g.matmul(a, b, options);
  g.output("o", o);
  Executor ex(device, g);
  std::map<std::string, HostTensor> inputs = {{"a", make_tensor(c.a, av, c.dtype)},
                                              {"b", make_tensor(c.b, bv, c.dtype)}};
  if (c.bias) inputs.emplace("bias", make_tensor({n}, biasv, c.dtype));
  auto out = ex.run(inputs);

  // The reference, over full (expanded) batches.
  Shape batch;
  EXPECT_TRUE(broadcast_shapes(leading(c.a), leading(c.b), &batch));
  int64_t m = c.a[-2], k = c.a[-1];
  auto want_dims = batch.dims();
  want_dims.push_back(m);
  want_dims.push_back(n);
  EXPECT_EQ(o.shape, Shape(want_dims));
  auto as = stored(av, c.dtype), bs = stored(bv, c.dtype), biass = stored(biasv, c.dtype);
  auto want = ref::matmul(expand(as, c.a, batch), expand(bs, c.b, batch), batch.numel(),
                          batch.numel(), m, n, k, c.transpose_b, c.bias ? &biass : nullptr,
                          c.alpha);
  for (double& w : want)
    w = c.act == Activation::relu ? ref::relu(w) : c.act == Activation::gelu ? ref::gelu(w) : w;

  Outcome r;
  r.scale = std::abs(c.alpha) * std::sqrt(double(k)) * max_abs(as) * max_abs(bs) +
            (c.bias ? max_abs(biass) : 0.0);
  Tolerance tol{8 * std::sqrt(double(k)) * std::ldexp(1.0, -24) * r.scale, std::ldexp(1.0, -21)};
  if (c.dtype == DType::f16) tol = {tol.atol + std::ldexp(1.0, -25), tol.rtol + std::ldexp(1.0, -11)};
  EXPECT_TRUE(all_close(out.at("o"), want, tol)) << case_name(c);
  r.max_error = max_abs_error(out.at("o"), want);
  const kernels::MatmulPlan plan = plan_on(device, c);
  std::string how = plan_name(plan);
  if (plan.path == "coopmat") {
    const kernels::MatmulCoopmatTiles& t = device.impl().tuning().matmul.coopmat_tiles;
    how += std::string(" ") + vk::coopmat_api_name(t.api) + " " + t.str();
  }
  std::printf("[ matmul   ] %-44s %-18s max abs error %.3g (%.3g of scale %.3g; atol %.3g)\n",
              case_name(c).c_str(), how.c_str(), r.max_error, r.max_error / r.scale, r.scale,
              tol.atol);
  return r;
}

}  // namespace vkformer::testing
