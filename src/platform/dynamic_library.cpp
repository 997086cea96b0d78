#include "dynamic_library.hpp"

#include <utility>

#ifdef _WIN32
#include <windows.h>

#include "utf8_path.hpp"
#else
#include <dlfcn.h>
#endif

namespace vkformer::platform {

#ifdef _WIN32

DynamicLibrary DynamicLibrary::open(const std::string& name, std::string* error) {
  DynamicLibrary lib;
  const std::wstring wide = path_from_utf8(name).native();
  // No error dialog box for a missing or broken DLL: the caller reports it.
  const UINT old_mode = SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOOPENFILEERRORBOX);
  lib.handle_ = reinterpret_cast<void*>(LoadLibraryW(wide.c_str()));
  const DWORD code = GetLastError();
  SetErrorMode(old_mode);
  if (!lib.handle_ && error) *error = windows_error_text(code);
  return lib;
}

void* DynamicLibrary::symbol(const char* name) const {
  if (!handle_) return nullptr;
  return reinterpret_cast<void*>(GetProcAddress(static_cast<HMODULE>(handle_), name));
}

void DynamicLibrary::close() {
  if (handle_) FreeLibrary(static_cast<HMODULE>(handle_));
  handle_ = nullptr;
}

#else

DynamicLibrary DynamicLibrary::open(const std::string& name, std::string* error) {
  DynamicLibrary lib;
  // RTLD_LOCAL: the loader's symbols must not satisfy other libraries' lookups by accident.
  lib.handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle_ && error) {
    const char* why = dlerror();
    *error = why ? why : "unknown reason";
  }
  return lib;
}

void* DynamicLibrary::symbol(const char* name) const {
  return handle_ ? dlsym(handle_, name) : nullptr;
}

void DynamicLibrary::close() {
  if (handle_) dlclose(handle_);
  handle_ = nullptr;
}

#endif

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& o) noexcept {
  if (this != &o) {
    close();
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() { close(); }

}  // namespace vkformer::platform
