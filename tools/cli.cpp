#include "cli.hpp"

#include <cstdio>

namespace vkformer::cli {

InstanceOptions GlobalOptions::instance_options() const {
  InstanceOptions o;
  o.validation = validation || sync_validation;
  o.sync_validation = sync_validation;
  return o;
}

DeviceOptions GlobalOptions::device_options() const {
  DeviceOptions o;
  static_cast<InstanceOptions&>(o) = instance_options();
  o.selector = device;
  return o;
}

size_t report_validation(Device& device) {
  auto messages = device.take_validation_messages();
  for (const auto& m : messages)
    std::fprintf(stderr, "vkformer: validation %s: %s\n", m.severity.c_str(), m.text.c_str());
  return messages.size();
}

}  // namespace vkformer::cli
