#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vkformer/device_tensor.hpp"
#include "vkformer/host_tensor.hpp"

namespace vkformer {

// One matrix multiply D = A·B + C that a device's cooperative matrices support at subgroup scope:
// A is m x k, B is k x n, C and D are m x n. Types are "f16", "f32", "i8", "u8", "i32", ...
struct CooperativeMatrixShape {
  uint32_t m = 0, n = 0, k = 0;
  std::string a_type, b_type, c_type, d_type;
  bool saturating = false;  // integer results saturate instead of wrapping (KHR only)
};

// What a Vulkan physical device offers, as `vkformer devices` reports it.
struct DeviceInfo {
  uint32_t index = 0;            // position in vkEnumeratePhysicalDevices order
  std::string name;
  std::string vendor;            // "NVIDIA", "AMD", "Intel", "Mesa", ... or the vendor id in hex
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  std::string type;              // "discrete", "integrated", "virtual", "cpu", "other"
  std::string uuid;              // 32 hex digits
  std::string driver_name;
  std::string driver_info;
  std::string driver_version;    // decoded per vendor convention
  std::string api_version;       // "1.3.230"
  uint32_t subgroup_size = 0;
  uint32_t min_subgroup_size = 0;
  uint32_t max_subgroup_size = 0;
  bool subgroup_arithmetic = false;  // subgroupAdd/Max in compute shaders
  bool subgroup_shuffle = false;     // subgroupShuffle in compute shaders
  bool fp16_arithmetic = false;      // shaderFloat16
  bool storage_16bit = false;        // storageBuffer16BitAccess
  // VK_KHR_shader_integer_dot_product (core in Vulkan 1.3): shaderIntegerDotProduct, and whether
  // the device accelerates dot products of four 8-bit integers packed in 32 bits
  // (integerDotProduct4x8BitPacked{Signed,Unsigned,MixedSignedness}Accelerated). CPU drivers
  // (lavapipe) offer the feature and accelerate none of them.
  bool integer_dot_product = false;
  bool integer_dot_4x8_packed_signed_accelerated = false;
  bool integer_dot_4x8_packed_unsigned_accelerated = false;
  bool integer_dot_4x8_packed_mixed_accelerated = false;
  uint32_t shared_memory_bytes = 0;  // maxComputeSharedMemorySize
  uint64_t max_storage_buffer_range = 0;
  uint64_t max_memory_allocation_size = 0;
  uint64_t device_local_memory_bytes = 0;  // size of the largest device-local heap
  uint32_t min_storage_buffer_offset_alignment = 0;
  uint32_t max_texel_buffer_elements = 0;          // maxTexelBufferElements
  uint32_t min_texel_buffer_offset_alignment = 0;  // minTexelBufferOffsetAlignment
  // Streaming multiprocessors (NVIDIA, VK_NV_shader_sm_builtins) or compute units (AMD,
  // VK_AMD_shader_core_properties); 0 where the driver does not say.
  uint32_t compute_units = 0;
  std::array<uint32_t, 3> max_workgroup_count{};
  std::array<uint32_t, 3> max_workgroup_size{};
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_push_constants_size = 0;
  bool timestamps = false;           // timestamps on the compute queue
  double timestamp_period_ns = 0;
  bool cooperative_matrix_nv = false;   // VK_NV_cooperative_matrix
  bool cooperative_matrix_khr = false;  // VK_KHR_cooperative_matrix
  // The shapes each extension supports at subgroup scope (from
  // vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR / ...NV). An opened device keeps the list
  // of the extension it enabled: KHR where it can, NV only where KHR is absent.
  std::vector<CooperativeMatrixShape> cooperative_matrix_khr_shapes;
  std::vector<CooperativeMatrixShape> cooperative_matrix_nv_shapes;
};

// A driver problem vkformer works around on a device: one row of the quirk table
// (src/vk/tuning.cpp), with the reason and where it is tracked.
struct DeviceQuirk {
  std::string id;
  std::string reason;
  std::string link;
};

// A kernel variant this build of vkformer lacks because its shader compiler could not compile
// it (glslang older than 13 and the cooperative-matrix kernels, say), and why.
struct KernelNotBuilt {
  std::string name;    // "matmul_coopmat_khr_f16"
  std::string reason;  // "the shader compiler lacks coopmat_khr"
};
std::vector<KernelNotBuilt> kernels_not_built();

struct ValidationMessage {
  std::string severity;  // "error", "warning"
  std::string text;
};

struct InstanceOptions {
  // Enable VK_LAYER_KHRONOS_validation. Also turned on by VKFORMER_VALIDATION=1.
  bool validation = false;
  // With validation: also synchronization validation (hazards between dispatches).
  bool sync_validation = false;
};

struct DeviceOptions : InstanceOptions {
  // Which device: "" uses VKFORMER_DEVICE if set, else the default order (discrete, integrated,
  // virtual, cpu). Otherwise an index ("0"), a name substring ("llvmpipe") or a UUID.
  std::string selector;
  // Longest time one run may take before the device is treated as hung (lost).
  uint64_t timeout_ms = 600'000;
};

class DeviceImpl;

// A logical Vulkan device with one compute queue. A cheap, shared handle: copies refer to the
// same device, which lives until the last handle (and the last executor using it) is gone.
// Thread-safe: any number of threads may use one device at once (README, "Threads").
class Device {
 public:
  static std::vector<DeviceInfo> enumerate(const InstanceOptions& options = {});
  static Device open(const DeviceOptions& options = {});
  // Position in `devices` (as enumerate() lists them) of the device open() picks for `selector`:
  // "" uses VKFORMER_DEVICE if set, else the default order. Throws device_not_found.
  static size_t choose(const std::vector<DeviceInfo>& devices, const std::string& selector = {});
  // The quirks vkformer applies on a device, for reports and bug reports.
  static std::vector<DeviceQuirk> quirks(const DeviceInfo& info);

  const DeviceInfo& info() const;

  // Device-resident tensors that outlive executors: weights, caches, values shared by graphs.
  DeviceTensor allocate(const Shape& shape, DType dtype);  // zero-filled
  DeviceTensor upload(const HostTensor& host);
  HostTensor download(const DeviceTensor& tensor);
  void write(DeviceTensor& tensor, const HostTensor& host);  // same shape and dtype

  // Whether the device was lost: a Vulkan call reported VK_ERROR_DEVICE_LOST or a submission did
  // not finish within DeviceOptions::timeout_ms. Everything made on it then fails with
  // ErrorCode::device_lost; a Device opened anew works.
  bool lost() const;

  // Messages the validation layer reported since the last call (validation must be on).
  std::vector<ValidationMessage> take_validation_messages();
  size_t validation_message_count() const;

  // Both throw invalid_argument on a moved-from Device (std::move leaves it empty).
  DeviceImpl& impl() const;
  const std::shared_ptr<DeviceImpl>& impl_ptr() const;

 private:
  explicit Device(std::shared_ptr<DeviceImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<DeviceImpl> impl_;
};

}  // namespace vkformer
