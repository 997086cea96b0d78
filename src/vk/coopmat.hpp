#pragma once
// Cooperative matrices on a device, in one place: which API the kernels use there, which MMA
// shapes it offers for given component types, and which one the kernels take. Every kernel
// written against shaders/coopmat.glsl asks these questions here (cf. ncnn's
// get_optimal_cooperative_matrix_mnk), never the DeviceInfo lists directly.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vkformer/device.hpp"

namespace vkformer::kernels {
enum class Kernel : uint16_t;  // kernels.gen.hpp
}

namespace vkformer::vk {

// What the cooperative-matrix kernels are compiled for (the COOPMAT_* define of coopmat.glsl).
enum class CoopmatApi : uint8_t {
  none,      // no cooperative matrices: the other matmul paths run
  khr,       // VK_KHR_cooperative_matrix
  nv,        // VK_NV_cooperative_matrix, only where the device has no KHR
  emulated,  // the emulation (any device; chosen only when asked, never automatically)
};
const char* coopmat_api_name(CoopmatApi api);

// One MMA: A is m x k, B is k x n, the accumulator m x n.
struct MmaShape {
  uint32_t m = 0, n = 0, k = 0;
  friend bool operator==(const MmaShape&, const MmaShape&) = default;
  std::string str() const;  // "16x8x16"
};

// Component types of A, B, the accumulator C and the result, as DeviceInfo names them.
struct CoopmatTypes {
  const char* a;
  const char* b;
  const char* c;
  const char* result;
};
// What the f16 kernels use: f16 operands, f32 accumulation.
inline constexpr CoopmatTypes kCoopmatF16F32{"f16", "f16", "f32", "f32"};

// The API of an opened device (whose DeviceInfo keeps the shapes of the extension it enabled):
// KHR where enabled, else NV, else none. The emulation is never the answer here.
CoopmatApi coopmat_api(const DeviceInfo& info);

// The subgroup-scope shapes `api` offers for `types` (non-saturating), in the device's order.
// For the emulation: emulated_mma_shapes().
std::vector<MmaShape> coopmat_shapes(const DeviceInfo& info, CoopmatApi api,
                                     const CoopmatTypes& types);

// THE question: which M x N x K the kernels use for `types` with `api`. 16 x 16 x 16 where
// offered (on the H100 it and 16 x 8 x 16 reach ~660 TFLOP/s, 16 x 8 x 8 ~495: ../shared/GPU.md;
// it is also what AMD's and Intel's f16 lists have in common), else the offered shape with the
// most multiply-adds per instruction. nullopt where none is offered.
std::optional<MmaShape> coopmat_mnk(const DeviceInfo& info, CoopmatApi api,
                                    const CoopmatTypes& types);

// The shapes the emulation runs the kernels with: every f16 shape of the H100 (the KHR list of
// ../shared/GPU.md), so the tests cover what the tuning there can choose. The emulation takes
// any power-of-two shape with sides up to 16.
const std::vector<MmaShape>& emulated_mma_shapes();

// The matmul kernel family compiled for `api` (not none).
kernels::Kernel coopmat_matmul_kernel(CoopmatApi api);

}  // namespace vkformer::vk
