#pragma once
// Every way vkformer computes a matmul, as one table (cf. ExecuTorch's op registry and ggml's
// generated variant lists): each path is one MatmulPathEntry that says which kernel it runs,
// when it can run a problem on a device (its kernel built for the dtypes and runnable there, the
// shapes and bindings it takes), when the automatic choice takes it, which of linear's fusions
// its kernel does, how it is emitted and what `vkformer tune` may change in it. Two lists, each
// in order of preference: the float paths (a and b in one float dtype, matmul_paths_float.cpp)
// and the weight paths (b a weight in another dtype read in its own layout,
// matmul_paths_weights.cpp).
//
// The matmul lowering (src/ops/matmul*.cpp) checks and folds the shapes, cuts windows where a
// tensor exceeds a binding and emits the fusions that no path takes apart; which kernel runs and
// how it is launched it asks here. A new GEMM or mat-vec kernel is its shader, its line in
// shaders/kernels.cmake and one entry in one of the two lists (+ its test).
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernel_table.hpp"
#include "program.hpp"
#include "tunables.hpp"
#include "tuning.hpp"
#include "vkformer/graph.hpp"

namespace vkformer {
class Lowering;
}  // namespace vkformer

namespace vkformer::kernels {

// The push block of every kernel that includes shaders/matmul_base.glsl, in its layout.
struct MatmulPush {
  uint32_t m, n, k;
  uint32_t batch1;
  uint32_t a_stride0, a_stride1;
  uint32_t b_stride0, b_stride1;
  uint32_t y_base, z_base;
  float alpha;
  uint32_t splits;   // matmul_split: K ranges per batch
  uint32_t k_split;  // matmul_split: K per range
  uint32_t ldo;      // out's row stride: n, or more when out is a window of columns
};
static_assert(sizeof(MatmulPush) == 14 * 4);

// Linear's fusions (Graph::LinearOptions) that a kernel may do besides the product.
struct MatmulFusions {
  bool norm = false;      // a is RMS-normalized first (weight [K], norm_eps)
  bool gated = false;     // b holds gate and up rows, [2N, K]: out = activation(gate) * up
  bool residual = false;  // a tensor of out's shape added last
  bool any() const { return norm || gated || residual; }
};

// One matmul as the lowering sees it, after folding a shared B's batch into M.
struct MatmulProblem {
  uint64_t m = 1, n = 1, k = 1, batch = 1;  // n: out's columns (a gated b has 2n rows)
  bool transpose_b = false;
  DType dtype = DType::f32;    // a's and out's (and the bias', residual's and norm's)
  // b's dtype where it is a weight in another dtype ([N, K], transposed: bf16, a quantized type,
  // the other float type), read by its own kernels; nullopt: b in `dtype`.
  std::optional<DType> weight;
  bool bias = false;
  Activation activation = Activation::none;
  float norm_eps = 0.0f;
  MatmulFusions fusions;
  // The bytes of a, b and the residual as bound (whole values or this dispatch's windows): the
  // texel-buffer kernels view them within max_texels (the device's maxTexelBufferElements).
  uint64_t a_bytes = 0, b_bytes = 0, residual_bytes = 0;
  uint64_t max_texels = UINT64_MAX;
  // a, b and out bound whole, each within one binding: kernels that fuse need it.
  bool whole = true;
  // Not whole, but one row of a bound whole against windows of b's rows (and out's columns): a
  // mat-vec's pre-norm (each window normalizes the row itself) and bias still fuse.
  bool one_row_windows = false;
};

// Which kernel variants the device runs (built by the shader compiler, features enabled): the
// lowering asks the device; tests of the choice make devices up.
using KernelSupport = std::function<bool(Kernel, DType)>;

// What a path is asked: a problem on a device with this tuning and these kernels.
struct MatmulQuery {
  const MatmulTuning& tuning;
  const MatmulProblem& problem;
  const KernelSupport& supported;
};

struct MatmulPathEntry;

struct MatmulPlan {
  std::string_view path = "general";      // the chosen entry's name
  const MatmulPathEntry* entry = nullptr;  // the chosen entry
  uint32_t splits = 1;              // general with shared memory: K ranges summed by a second
                                    // dispatch (matmul_split + matmul_reduce)
  bool vec4 = false;                // general with shared memory: 4-wide loads
  uint32_t tm = 0, tn = 0, qb = 0;  // texel: the block (tm shrinks for small M)
  bool transpose_b_first = false;   // texel: B [K, N] goes through matmul_transpose first
  uint32_t gemv_m = 0;              // gemv: rows per dispatch (M rounded up to a power of 2)
};

// What emitting a path works on: the query and its plan, the operands as the lowering binds them
// (whole values or windows), in the order the kernels declare them: a, b, bias, out, residual,
// norm (absent ones bound as a), and the push block of the folded product.
struct MatmulEmit {
  const MatmulQuery& query;
  const MatmulPlan& plan;
  std::vector<Binding> operands;
  MatmulPush push;
};

// One way to compute a matmul.
struct MatmulPathEntry {
  std::string_view name;  // "texel", "wq_rows": what VKFORMER_MATMUL_PATH may force (float
                          // paths), tests and docs call it
  // Whether it can compute the problem here: its kernel built and runnable for the dtypes, the
  // device features, shapes and bindings it needs.
  bool (*can)(const MatmulQuery&);
  // Where it can: whether the automatic choice takes it (its cost rule; null: always). The
  // first path of its list that can and takes a problem is chosen.
  bool (*takes)(const MatmulQuery&);
  // Whether its kernel also does every fusion of the problem (null: none; the lowering then
  // emits them apart).
  bool (*fuses)(const MatmulQuery&);
  // The details of its plan (tiles, splits) where the path has any (null: none).
  void (*details)(const MatmulQuery&, MatmulPlan&);
  // Adds its dispatches for the problem (fusions included where `fuses` says so).
  void (*emit)(Lowering&, const MatmulEmit&);
  // Appends what `vkformer tune` may change in its kernel's configuration (tunables.hpp; null:
  // nothing).
  void (*tunables)(std::vector<Tunable>&);
};

// The two lists, each in the order of preference.
std::span<const MatmulPathEntry> float_matmul_paths();
std::span<const MatmulPathEntry> weight_matmul_paths();

// The path for a problem: VKFORMER_MATMUL_PATH's (MatmulTuning::forced_path) where it names a
// path of the problem's list that can compute it, else the first of the list that can and takes
// it (the last of each list takes every problem).
const MatmulPathEntry& choose_matmul_path(const MatmulQuery& query);

// The plan for one matmul: a pure function, unit-tested with made-up devices.
MatmulPlan plan_matmul(const MatmulTuning& tuning, const MatmulProblem& problem,
                       const KernelSupport& supported);

}  // namespace vkformer::kernels
