#pragma once
// A shared library opened at run time (dlopen / LoadLibraryW), for the Vulkan loader: vkformer
// does not link it, so a program that ships without a GPU driver still starts and can report
// the missing driver as an error.
#include <string>

namespace vkformer::platform {

class DynamicLibrary {
 public:
  // Opens `name` (a file name searched the platform's way, or a path; UTF-8). Returns a library
  // that is not open() when that fails, with the platform's reason in *error.
  static DynamicLibrary open(const std::string& name, std::string* error);

  DynamicLibrary() = default;
  DynamicLibrary(DynamicLibrary&& o) noexcept : handle_(o.handle_) { o.handle_ = nullptr; }
  DynamicLibrary& operator=(DynamicLibrary&& o) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  ~DynamicLibrary();

  bool is_open() const { return handle_ != nullptr; }
  // The exported function `name`, or nullptr.
  void* symbol(const char* name) const;

 private:
  void close();
  void* handle_ = nullptr;
};

}  // namespace vkformer::platform
