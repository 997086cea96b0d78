// Choosing among the matmul paths (the lists are in matmul_paths_float.cpp and
// matmul_paths_weights.cpp), and what their emission shares.
#include "matmul_paths.hpp"

#include <cstring>
#include <type_traits>

#include "matmul_emit.hpp"
#include "vkformer/error.hpp"

namespace vkformer::kernels {

const MatmulPathEntry& choose_matmul_path(const MatmulQuery& q) {
  const std::span<const MatmulPathEntry> paths =
      q.problem.weight ? weight_matmul_paths() : float_matmul_paths();
  if (q.tuning.forced_path)
    for (const MatmulPathEntry& path : paths)
      if (path.name == *q.tuning.forced_path && path.can(q)) return path;
  for (const MatmulPathEntry& path : paths)
    if (path.can(q) && (!path.takes || path.takes(q))) return path;
  throw Error(ErrorCode::internal, "choose_matmul_path: no path takes the problem (the last of "
                                   "each list must take every one)");
}

MatmulPlan plan_matmul(const MatmulTuning& tuning, const MatmulProblem& problem,
                       const KernelSupport& supported) {
  const MatmulQuery q{tuning, problem, supported};
  const MatmulPathEntry& path = choose_matmul_path(q);
  MatmulPlan plan;
  plan.path = path.name;
  plan.entry = &path;
  if (path.details) path.details(q, plan);
  return plan;
}

void bad_tiling(Lowering& l, const std::string& what) {
  throw Error(ErrorCode::internal,
              l.node().label + ": emit_matmul: tuning gives an invalid " + what);
}

namespace {

// The specialization constants of shaders/matmul_coopmat.comp, in constant_id order.
struct CoopmatSpec {
  uint32_t workgroup;  // subgroup * warps_m * warps_n
  uint32_t subgroup;
  uint32_t m, n, k;    // the MMA shape
  uint32_t warps_m, warps_n;
  uint32_t tiles_m, tiles_n;
  uint32_t bk_tiles;
  uint32_t transpose_b;
  uint32_t has_bias;
  uint32_t activation;
  uint32_t vec8;       // K, and N unless B is transposed, multiples of 8: 16-byte loads
  uint32_t has_residual;
  std::vector<uint32_t> values() const {
    std::vector<uint32_t> v(sizeof(*this) / 4);
    std::memcpy(v.data(), this, sizeof(*this));
    return v;
  }
};
static_assert(sizeof(CoopmatSpec) == 15 * 4 && std::is_trivially_copyable_v<CoopmatSpec>);

}  // namespace

void emit_coopmat(Lowering& l, Kernel kernel, const MatmulEmit& e) {
  const MatmulCoopmatTiles& t = l.tuning().matmul.coopmat_tiles;
  const DeviceInfo& info = l.info();
  const MatmulProblem& p = e.query.problem;
  const MatmulPush& push = e.push;
  if (!t.usable() || t.invocations() > info.max_workgroup_invocations ||
      t.invocations() > info.max_workgroup_size[0] || t.shared_bytes() > info.shared_memory_bytes)
    bad_tiling(l, std::string(vk::coopmat_api_name(t.api)) + " cooperative-matrix tiling " +
                      t.str());
  const CoopmatConfig& f = t.config;
  const CoopmatSpec spec{static_cast<uint32_t>(t.invocations()),
                         t.subgroup,
                         t.m,
                         t.n,
                         t.k,
                         f.warps_m,
                         f.warps_n,
                         f.tiles_m,
                         f.tiles_n,
                         f.bk_tiles,
                         flag(p.transpose_b),
                         flag(p.bias),
                         activation_id(p),
                         flag(push.k % 8 == 0 && (p.transpose_b || push.n % 8 == 0)),
                         flag(p.fusions.residual)};
  if (p.fusions.gated || p.fusions.norm)
    bad_tiling(l, "cooperative-matrix product: operands a, b, bias, out and residual, no other fusion");
  dispatch_tiles(l, kernel, p.dtype, first_operands(e, 5), push, ceil_div(push.n, t.bn()),
                 ceil_div(push.m, t.bm()), p.batch, spec.values());
}

}  // namespace vkformer::kernels
