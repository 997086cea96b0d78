#pragma once
// What the entries of the matmul path table (matmul_paths_*.cpp) share when they emit: grids cut
// to the device's limits, the errors for a tiling the tuning should never give, and the
// cooperative-matrix product that the float and the weight lists both run.
#include <algorithm>
#include <string>
#include <vector>

#include "lowering.hpp"
#include "matmul_paths.hpp"

namespace vkformer::kernels {

inline uint32_t flag(bool b) { return b ? 1u : 0u; }
inline uint32_t activation_id(const MatmulProblem& p) { return static_cast<uint32_t>(p.activation); }

// The MatmulPush inside a kernel's push block (some kernels append words to it).
inline MatmulPush& base_push(MatmulPush& p) { return p; }
template <class Push>
MatmulPush& base_push(Push& p) {
  return p.base;
}

// Dispatches x_tiles x y_tiles x z workgroups, as several dispatches where y or z exceed the
// device's grid limits (many rows come from folding a batch into M on small tiles); the kernels
// add y_base and z_base.
template <class Push>
void dispatch_tiles(Lowering& l, Kernel kernel, DType dtype, const std::vector<Binding>& bindings,
                    Push p, uint64_t x_tiles, uint64_t y_tiles, uint64_t z,
                    const std::vector<uint32_t>& spec) {
  const uint64_t max_y = std::max<uint32_t>(l.info().max_workgroup_count[1], 1);
  const uint64_t max_z = std::max<uint32_t>(l.info().max_workgroup_count[2], 1);
  for (uint64_t zb = 0; zb < z; zb += max_z)
    for (uint64_t y = 0; y < y_tiles; y += max_y) {
      base_push(p).y_base = static_cast<uint32_t>(y);
      base_push(p).z_base = static_cast<uint32_t>(zb);
      l.dispatch(kernel, dtype, bindings, PushBlock::of(p),
                 l.grid(x_tiles, std::min(max_y, y_tiles - y), std::min(max_z, z - zb)), spec);
    }
}

// The first `count` operands of an emit (a, b, bias, out, residual, norm).
inline std::vector<Binding> first_operands(const MatmulEmit& e, size_t count) {
  return {e.operands.begin(), e.operands.begin() + static_cast<std::ptrdiff_t>(count)};
}

// A tiling the tuning gave that the kernel cannot run: a bug, named with the node.
[[noreturn]] void bad_tiling(Lowering& l, const std::string& what);

// shaders/matmul_coopmat.comp on the tuning's cooperative matrices with `kernel` (the f16 GEMM of
// the tuning's API, or a weight dtype's matmul_wq_coopmat_*): operands a, b, bias, out and
// residual (absent ones bound to a), over the problem's batch of matrices (grid z).
void emit_coopmat(Lowering& l, Kernel kernel, const MatmulEmit& e);

}  // namespace vkformer::kernels
