#pragma once
// The vkfault layer (tests/fault_layer/README.md) from inside a test. The suites that use it run
// with VK_ADD_LAYER_PATH and VK_INSTANCE_LAYERS naming it (tests/fault_layer/CMakeLists.txt);
// this opens the same shared object, which the Vulkan loader then shares with the test, and calls
// its exported controls.
#include <dlfcn.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace vkformer::testing {

class FaultLayer {
 public:
  // The layer in `dir` (VKF_FAULT_LAYER_DIR): throws std::runtime_error when it cannot be
  // opened, so a test never runs without the faults it means to make.
  static FaultLayer& get(const std::string& dir) {
    static FaultLayer layer(dir + "/libVkLayer_vkformer_fault.so");
    return layer;
  }

  // Replaces the faults (VKFORMER_FAULT's grammar: "vkQueueSubmit:1" fails the next submission)
  // and restarts the call counts.
  void arm(const std::string& spec) {
    if (configure_(spec.c_str()) != 0)
      throw std::runtime_error("vkfault_configure(\"" + spec + "\"): " + error_());
  }
  void disarm() { arm(""); }
  int64_t live_objects() const { return live_(); }
  uint64_t calls(const char* function) const { return calls_(function); }
  uint64_t injected() const { return injected_(); }

 private:
  explicit FaultLayer(const std::string& path) {
    void* lib = dlopen(path.c_str(), RTLD_NOW);
    if (!lib) throw std::runtime_error("cannot open the fault layer " + path + ": " + dlerror());
    auto sym = [&](const char* name) {
      void* p = dlsym(lib, name);
      if (!p) throw std::runtime_error(path + " does not export " + name);
      return p;
    };
    configure_ = reinterpret_cast<int (*)(const char*)>(sym("vkfault_configure"));
    error_ = reinterpret_cast<const char* (*)()>(sym("vkfault_error"));
    live_ = reinterpret_cast<int64_t (*)()>(sym("vkfault_live_objects"));
    calls_ = reinterpret_cast<uint64_t (*)(const char*)>(sym("vkfault_calls"));
    injected_ = reinterpret_cast<uint64_t (*)()>(sym("vkfault_injected"));
  }
  int (*configure_)(const char*) = nullptr;
  const char* (*error_)() = nullptr;
  int64_t (*live_)() = nullptr;
  uint64_t (*calls_)(const char*) = nullptr;
  uint64_t (*injected_)() = nullptr;
};

}  // namespace vkformer::testing
