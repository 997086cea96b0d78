// The public vkformer::Device: enumeration, selection and device-resident tensors.
#include "vkformer/device.hpp"

#include <cstdlib>
#include <cstring>

#include "device_impl.hpp"
#include "device_select.hpp"
#include "instance.hpp"
#include "tuning.hpp"
#include "vkformer/error.hpp"

namespace vkformer {

std::vector<DeviceInfo> Device::enumerate(const InstanceOptions& options) {
  auto instance = vk::Instance::create(options);
  std::vector<DeviceInfo> infos;
  auto handles = instance->physical_devices();
  for (uint32_t i = 0; i < handles.size(); ++i)
    infos.push_back(vk::query_physical_device(instance->handle(), handles[i], i, instance->api_version()).info);
  return infos;
}

Device Device::open(const DeviceOptions& options) {
  auto instance = vk::Instance::create(options);
  auto handles = instance->physical_devices();
  std::vector<vk::PhysicalDevice> physical;
  std::vector<DeviceInfo> infos;
  for (uint32_t i = 0; i < handles.size(); ++i) {
    physical.push_back(vk::query_physical_device(instance->handle(), handles[i], i, instance->api_version()));
    infos.push_back(physical.back().info);
  }
  size_t chosen = choose(infos, options.selector);
  auto core = std::make_shared<vk::DeviceCore>(instance, physical[chosen], options.timeout_ms);
  return Device(std::make_shared<DeviceImpl>(std::move(core)));
}

size_t Device::choose(const std::vector<DeviceInfo>& devices, const std::string& selector) {
  std::string sel = selector;
  if (sel.empty())
    if (const char* env = std::getenv("VKFORMER_DEVICE")) sel = env;
  return vk::select_device(devices, sel);
}

std::vector<DeviceQuirk> Device::quirks(const DeviceInfo& info) {
  std::vector<DeviceQuirk> out;
  for (const auto& q : kernels::tuning_for(info).quirks) out.push_back({q.id, q.reason, q.link});
  return out;
}

DeviceImpl& Device::impl() const { return *impl_ptr(); }

const std::shared_ptr<DeviceImpl>& Device::impl_ptr() const {
  if (!impl_)
    throw Error(ErrorCode::invalid_argument,
                "Device: this device was moved from; use the Device it was moved to");
  return impl_;
}

const DeviceInfo& Device::info() const { return impl().info(); }

bool Device::lost() const { return impl().core().lost(); }

// A tensor may be larger than one binding spans (ops that read it bind windows, and the executor
// names any op that cannot), but not than one allocation.
static void check_size(DeviceImpl& impl, const Shape& shape, DType dtype, const char* what) {
  uint64_t bytes = dtype_bytes(dtype, shape.numel());
  const uint64_t most = impl.allocator().max_allocation();
  if (bytes > most)
    throw Error(ErrorCode::unsupported,
                std::string(what) + ": tensor " + shape.str() + " " +
                    std::string(dtype_name(dtype)) + " takes " + std::to_string(bytes) +
                    " bytes, more than device '" + impl.info().name +
                    "' allocates at once (maxMemoryAllocationSize " + std::to_string(most) + ")");
}

DeviceTensor Device::allocate(const Shape& shape, DType dtype) {
  check_size(impl(), shape, dtype, "Device::allocate");
  // Whole 32-bit words, as the executor binds them (ValueDesc::bytes in src/graph/program.hpp).
  const auto bytes = static_cast<size_t>((dtype_bytes(dtype, shape.numel()) + 3) / 4 * 4);
  auto alloc = impl().allocator().allocate(bytes, vk::MemoryKind::device, "Device::allocate");
  impl().zero(*alloc, 0, bytes);
  return DeviceTensor(std::move(alloc), shape, dtype);
}

DeviceTensor Device::upload(const HostTensor& host) {
  check_size(impl(), host.shape(), host.dtype(), "Device::upload");
  auto alloc = impl().allocator().allocate((host.nbytes() + 3) / 4 * 4, vk::MemoryKind::device,
                                           "Device::upload");
  impl().write(*alloc, 0, host.data(), host.nbytes());
  return DeviceTensor(std::move(alloc), host.shape(), host.dtype());
}

HostTensor Device::download(const DeviceTensor& tensor) {
  if (!tensor.valid()) throw Error(ErrorCode::invalid_argument, "Device::download: empty tensor");
  HostTensor host(tensor.shape(), tensor.dtype());
  impl().read(*tensor.allocation(), 0, host.data(), host.nbytes());
  return host;
}

void Device::write(DeviceTensor& tensor, const HostTensor& host) {
  if (!tensor.valid()) throw Error(ErrorCode::invalid_argument, "Device::write: empty tensor");
  if (tensor.shape() != host.shape() || tensor.dtype() != host.dtype())
    throw Error(ErrorCode::shape_mismatch,
                "Device::write: tensor is " + tensor.shape().str() + " " +
                    std::string(dtype_name(tensor.dtype())) + ", data is " + host.shape().str() +
                    " " + std::string(dtype_name(host.dtype())));
  impl().write(*tensor.allocation(), 0, host.data(), host.nbytes());
}

std::vector<ValidationMessage> Device::take_validation_messages() {
  return impl().core().instance().take_messages();
}

size_t Device::validation_message_count() const {
  return impl().core().instance().message_count();
}

}  // namespace vkformer
