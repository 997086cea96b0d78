// `vkformer demo`: a placeholder so `make demo` works end to end.
// TODO(lead): replace with the real demo (a small transformer run on the chosen device).
#include <cstdio>

#include "cli.hpp"

namespace vkformer::cli {

Command add_demo_command(CLI::App& app, const GlobalOptions& globals) {
  auto* sub = app.add_subcommand(
      "demo", "Run the demo on the chosen device (placeholder: the demo is not built yet)");
  return {sub, [&globals]() {
            Device device = Device::open(globals.device_options());
            const DeviceInfo& d = device.info();
            std::printf("vkformer demo: device %u: %s (%s, %s %s)\n", d.index, d.name.c_str(),
                        d.type.c_str(), d.driver_name.c_str(), d.driver_info.c_str());
            std::printf("TODO: the demo is not built yet; this placeholder only opens the device.\n");
            return report_validation(device) ? 1 : 0;
          }};
}

}  // namespace vkformer::cli
