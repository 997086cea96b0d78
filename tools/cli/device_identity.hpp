#pragma once
// Which device a report is about, as `devices --json` and `bench --json` both write it: name,
// vendor and device ids, type and UUID (DeviceInfo), the same keys in the same order.
#include "vkformer/device.hpp"

namespace vkformer::cli {

template <class Json>
void put_device_identity(Json& j, const DeviceInfo& d) {
  j["name"] = d.name;
  j["vendor"] = d.vendor;
  j["vendor_id"] = d.vendor_id;
  j["device_id"] = d.device_id;
  j["type"] = d.type;
  j["uuid"] = d.uuid;
}

}  // namespace vkformer::cli
