// Running a compiled graph: inputs into staging, one submission of the recorded command buffer,
// outputs and timestamps back; and the public vkformer::Executor over ExecutorImpl.
#include <cstring>

#include "checked_impl.hpp"
#include "executor_impl.hpp"

namespace vkformer {

const ExecutorImpl::IoSlot& ExecutorImpl::find_slot(const std::vector<IoSlot>& slots,
                                                    const std::string& name,
                                                    const char* what) const {
  for (auto& s : slots)
    if (s.name == name) return s;
  std::string names;
  for (auto& s : slots) names += (names.empty() ? "" : ", ") + s.name;
  throw Error(ErrorCode::invalid_argument, std::string("the graph has no ") + what + " named '" +
                                               name + "' (it has: " +
                                               (names.empty() ? "none" : names) + ")");
}

void ExecutorImpl::set_input(const std::string& name, const HostTensor& value) {
  auto& slot = const_cast<IoSlot&>(find_slot(inputs_, name, "input"));
  const ValueDesc& v = program_.values[slot.value];
  auto expected = [&] {
    return v.shape.str() + " " + std::string(dtype_name(v.dtype)) + ", got " +
           value.shape().str() + " " + std::string(dtype_name(value.dtype()));
  };
  if (value.shape() != v.shape)
    throw Error(ErrorCode::shape_mismatch, "input '" + name + "': expected " + expected());
  if (is_float(v.dtype) != is_float(value.dtype()))
    throw Error(ErrorCode::shape_mismatch, "input '" + name + "': expected " + expected());
  HostTensor converted;
  const HostTensor* data = &value;
  if (value.dtype() != v.dtype) {
    converted = value.cast(v.dtype);
    data = &converted;
  }

  auto bounds = program_.index_bounds.find(slot.value);
  if (bounds != program_.index_bounds.end()) {
    const auto* ids = reinterpret_cast<const int32_t*>(value.data());
    for (const Program::IndexBound& b : bounds->second)
      for (int64_t i = 0; i < value.numel(); ++i)
        if (ids[i] < b.lo || ids[i] >= b.hi)
          throw Error(ErrorCode::invalid_argument,
                      "input '" + name + "': index " + std::to_string(ids[i]) + " at position " +
                          std::to_string(i) + " is outside [" + std::to_string(b.lo) + ", " +
                          std::to_string(b.hi) + "): " + b.why);
  }
  if (staging_) {
    std::memcpy(staging_->mapped() + slot.staging_offset, data->data(), data->nbytes());
    staging_->flush();
  }
  slot.set = true;
}

void ExecutorImpl::run() {
  for (auto& in : inputs_)
    if (!in.set)
      throw Error(ErrorCode::invalid_argument,
                  "input '" + in.name + "' was not set before run()");
  // A run that fails leaves no outputs to read: staging holds what the last good run wrote, or
  // half of what this one did.
  has_run_ = false;
  dev_->core().submit_and_wait(cmd_, fence_);
  ++stats_.runs;
  has_run_ = true;
  if (run_timestamps_) {
    uint64_t ticks[2] = {};
    dev_->core().check(vkGetQueryPoolResults(dev_->core().device(), run_timestamps_, 0, 2,
                                             sizeof ticks, ticks, 8,
                                             VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                       "vkGetQueryPoolResults");
    const uint32_t bits = dev_->core().physical().queue_timestamp_bits;
    const uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
    last_gpu_us_ = static_cast<double>(((ticks[1] & mask) - (ticks[0] & mask)) & mask) *
                   dev_->info().timestamp_period_ns / 1000.0;
  }
  if (query_pool_) {
    std::vector<uint64_t> ticks(profiled_nodes_.size() * 2);
    dev_->core().check(
        vkGetQueryPoolResults(dev_->core().device(), query_pool_, 0,
                              static_cast<uint32_t>(ticks.size()), ticks.size() * 8, ticks.data(),
                              8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "vkGetQueryPoolResults");
    const uint32_t bits = dev_->core().physical().queue_timestamp_bits;
    const uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
    const double period = dev_->info().timestamp_period_ns;
    profile_.clear();
    for (size_t i = 0; i < profiled_nodes_.size(); ++i) {
      uint64_t t0 = ticks[2 * i] & mask, t1 = ticks[2 * i + 1] & mask;
      double us = static_cast<double>((t1 - t0) & mask) * period / 1000.0;
      OpTime t = profiled_ops_[i];
      t.microseconds = us;
      profile_.push_back(std::move(t));
    }
  }
}

double ExecutorImpl::last_gpu_microseconds() const {
  if (!run_timestamps_)
    throw Error(ErrorCode::invalid_argument,
                "last_gpu_microseconds needs an executor compiled with CompileOptions::timestamps");
  return last_gpu_us_;
}

HostTensor ExecutorImpl::output(const std::string& name) const {
  const IoSlot& slot = find_slot(outputs_, name, "output");
  dev_->core().throw_if_lost();
  if (!has_run_)
    throw Error(ErrorCode::invalid_argument,
                "output '" + name + "' read before run() (or after a run that failed)");
  const ValueDesc& v = program_.values[slot.value];
  HostTensor t(v.shape, v.dtype);
  staging_->invalidate();
  std::memcpy(t.data(), staging_->mapped() + slot.staging_offset, t.nbytes());
  return t;
}

std::vector<std::string> ExecutorImpl::input_names() const {
  std::vector<std::string> names;
  for (auto& s : inputs_) names.push_back(s.name);
  return names;
}

std::vector<std::string> ExecutorImpl::output_names() const {
  std::vector<std::string> names;
  for (auto& s : outputs_) names.push_back(s.name);
  return names;
}

Executor::Executor(Device device, const Graph& graph, const CompileOptions& options)
    : impl_(std::make_unique<ExecutorImpl>(std::move(device), graph, options)) {}
Executor::~Executor() = default;
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;

ExecutorImpl& Executor::impl() const { return checked_impl(impl_, "Executor", "executor"); }

void Executor::set_input(const std::string& name, const HostTensor& value) {
  ExecutorImpl& ex = impl();
  ExclusiveUse::Scope one_thread(ex.in_use, "Executor::set_input");
  ex.set_input(name, value);
}
void Executor::run() {
  ExecutorImpl& ex = impl();
  ExclusiveUse::Scope one_thread(ex.in_use, "Executor::run");
  ex.run();
}
HostTensor Executor::output(const std::string& name) const {
  ExecutorImpl& ex = impl();
  ExclusiveUse::Scope one_thread(ex.in_use, "Executor::output");
  return ex.output(name);
}

std::map<std::string, HostTensor> Executor::run(const std::map<std::string, HostTensor>& inputs) {
  ExecutorImpl& ex = impl();
  ExclusiveUse::Scope one_thread(ex.in_use, "Executor::run");
  for (auto& [name, value] : inputs) ex.set_input(name, value);
  ex.run();
  std::map<std::string, HostTensor> outputs;
  for (auto& name : ex.output_names()) outputs.emplace(name, ex.output(name));
  return outputs;
}

std::vector<OpTime> Executor::profile() const { return impl().profile(); }
double Executor::last_gpu_microseconds() const { return impl().last_gpu_microseconds(); }
ExecutorStats Executor::stats() const { return impl().stats(); }
std::vector<std::string> Executor::input_names() const { return impl().input_names(); }
std::vector<std::string> Executor::output_names() const { return impl().output_names(); }

}  // namespace vkformer
