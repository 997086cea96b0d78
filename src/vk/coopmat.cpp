#include "coopmat.hpp"

#include <algorithm>
#include <iterator>
#include <string_view>

#include "kernel_table.hpp"
#include "vkformer/error.hpp"

namespace vkformer::vk {

const char* coopmat_api_name(CoopmatApi api) {
  switch (api) {
    case CoopmatApi::none: return "none";
    case CoopmatApi::khr: return "KHR";
    case CoopmatApi::nv: return "NV";
    case CoopmatApi::emulated: return "emulated";
  }
  return "?";
}

std::string MmaShape::str() const {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

CoopmatApi coopmat_api(const DeviceInfo& info) {
  if (info.cooperative_matrix_khr && !info.cooperative_matrix_khr_shapes.empty())
    return CoopmatApi::khr;
  if (info.cooperative_matrix_nv && !info.cooperative_matrix_nv_shapes.empty())
    return CoopmatApi::nv;
  return CoopmatApi::none;
}

std::vector<MmaShape> coopmat_shapes(const DeviceInfo& info, CoopmatApi api,
                                     const CoopmatTypes& types) {
  if (api == CoopmatApi::emulated) {
    const std::string_view want[] = {types.a, types.b, types.c, types.result};
    const std::string_view f16[] = {"f16", "f16", "f32", "f32"};
    return std::equal(std::begin(want), std::end(want), std::begin(f16)) ? emulated_mma_shapes()
                                                                         : std::vector<MmaShape>{};
  }
  const std::vector<CooperativeMatrixShape>* list =
      api == CoopmatApi::khr  ? &info.cooperative_matrix_khr_shapes
      : api == CoopmatApi::nv ? &info.cooperative_matrix_nv_shapes
                              : nullptr;
  std::vector<MmaShape> shapes;
  if (!list) return shapes;
  for (const CooperativeMatrixShape& s : *list)
    if (s.a_type == types.a && s.b_type == types.b && s.c_type == types.c &&
        s.d_type == types.result && !s.saturating && s.m && s.n && s.k)
      shapes.push_back({s.m, s.n, s.k});
  return shapes;
}

std::optional<MmaShape> coopmat_mnk(const DeviceInfo& info, CoopmatApi api,
                                    const CoopmatTypes& types) {
  std::optional<MmaShape> best;
  for (const MmaShape& s : coopmat_shapes(info, api, types)) {
    if (s == MmaShape{16, 16, 16}) return s;
    if (!best || uint64_t(s.m) * s.n * s.k > uint64_t(best->m) * best->n * best->k) best = s;
  }
  return best;
}

const std::vector<MmaShape>& emulated_mma_shapes() {
  static const std::vector<MmaShape> shapes = {{16, 16, 16}, {16, 8, 16}, {16, 8, 8}};
  return shapes;
}

kernels::Kernel coopmat_matmul_kernel(CoopmatApi api) {
  switch (api) {
    case CoopmatApi::khr: return kernels::Kernel::matmul_coopmat_khr;
    case CoopmatApi::nv: return kernels::Kernel::matmul_coopmat_nv;
    case CoopmatApi::emulated: return kernels::Kernel::matmul_coopmat_emu;
    case CoopmatApi::none: break;
  }
  throw Error(ErrorCode::internal,
              "coopmat_matmul_kernel: no kernel for cooperative matrices 'none'");
}

}  // namespace vkformer::vk
