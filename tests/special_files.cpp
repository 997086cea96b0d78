#include "special_files.hpp"

#include <atomic>
#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "test_util.hpp"

#ifdef _WIN32
#include <windows.h>
#else
#include <sys/stat.h>
#endif

namespace vkformer::testing {

namespace fs = std::filesystem;

namespace {
// dir/nul.<ext>: the NUL device, whatever folder it is named in.
fs::path nul_named_like(const fs::path& dir, const std::string& name) {
  return dir / ("nul" + fs::path(name).extension().string());
}
}  // namespace

#ifdef _WIN32
// ------------------------------------------------------------------------------- Windows

namespace {
// The system's text for a Win32 error code, ended as the library ends it: "... (error 32)".
// Wine's texts differ from Windows' ("Sharing violation."), so none is written here.
std::string system_text(DWORD code) {
  char* text = nullptr;
  const DWORD n = FormatMessageA(
      FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
      nullptr, code, 0, reinterpret_cast<char*>(&text), 0, nullptr);
  std::string out(text ? text : "", n);
  if (text) LocalFree(text);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' '))
    out.pop_back();
  return out + " (error " + std::to_string(code) + ")";
}
}  // namespace

std::string fifo_words() { return "a named pipe"; }

std::string missing_file_reason() { return system_text(ERROR_FILE_NOT_FOUND); }

WaitingPipe::WaitingPipe(const fs::path& wanted) {
  // The wanted name at the end, so that its extension (.json) still says how to read it.
  static std::atomic<unsigned> counter{0};
  path_ = "\\\\.\\pipe\\vkformer_" + std::to_string(process_id()) + "_" +
          std::to_string(counter++) + "_" + wanted.filename().string();
  // Duplex, so a client could open it for reading; one instance, never connected or written.
  HANDLE h = CreateNamedPipeW(path_.c_str(), PIPE_ACCESS_DUPLEX, PIPE_TYPE_BYTE | PIPE_WAIT, 1,
                              4096, 4096, 0, nullptr);
  if (h == INVALID_HANDLE_VALUE)
    throw std::runtime_error("CreateNamedPipeW " + path_.string() + " failed: error " +
                             std::to_string(GetLastError()));
  handle_ = h;
}

WaitingPipe::~WaitingPipe() { CloseHandle(handle_); }

// No reader took the pipe's only instance: a client may still connect.
bool WaitingPipe::intact() const { return WaitNamedPipeW(path_.c_str(), 0) != 0; }

fs::path endless_device_path(const fs::path& dir, const std::string& name) {
  return nul_named_like(dir, name);
}

fs::path null_device_path() { return "NUL"; }

std::string make_non_regular_at(const fs::path& path, NonRegular) {
  fs::create_directory(path);
  return "a directory";
}

UnreadableFile::UnreadableFile(const fs::path& path) : path_(path) {
  // Sharing nothing: every other open fails until this handle is closed.
  HANDLE h = CreateFileW(path.c_str(), GENERIC_READ | GENERIC_WRITE, 0, nullptr, CREATE_ALWAYS,
                         FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE)
    throw std::runtime_error("CreateFileW " + path.string() + " failed: error " +
                             std::to_string(GetLastError()));
  handle_ = h;
}

UnreadableFile::~UnreadableFile() {
  CloseHandle(handle_);
  std::error_code ec;
  fs::remove(path_, ec);
}

std::string UnreadableFile::error_after_path() const {
  return ": cannot open: " + system_text(ERROR_SHARING_VIOLATION);
}

fs::path unreachable_path(const fs::path& dir, const std::string& name) {
  return dir / (name + "|");
}

std::string unreachable_reason() { return system_text(ERROR_INVALID_NAME); }

void link_to_regular_file(const fs::path& target, const fs::path& link) {
  fs::create_hard_link(target, link);
}

OutputTrap make_output_trap(const fs::path& dir, const std::string& name, const fs::path&) {
  return {nul_named_like(dir, name),
          " is a character device, not a regular file; vkformer writes only regular files"};
}

bool OutputTrap::intact() const {
  std::error_code ec;
  return !fs::is_regular_file(path, ec);  // no file was made under the device's name
}

#else
// ------------------------------------------------------------------------------- POSIX

std::string fifo_words() { return "a FIFO"; }

std::string missing_file_reason() { return "No such file or directory"; }

WaitingPipe::WaitingPipe(const fs::path& wanted) : path_(wanted) {
  if (::mkfifo(wanted.c_str(), 0600) != 0)
    throw std::system_error(errno, std::generic_category(), "mkfifo " + wanted.string());
}

WaitingPipe::~WaitingPipe() {
  std::error_code ec;
  fs::remove(path_, ec);
}

bool WaitingPipe::intact() const { return fs::is_fifo(path_); }

fs::path endless_device_path(const fs::path& dir, const std::string& name) {
  fs::create_symlink("/dev/zero", dir / name);
  return dir / name;
}

fs::path null_device_path() { return "/dev/null"; }

std::string make_non_regular_at(const fs::path& path, NonRegular what) {
  if (what == NonRegular::endless_device) {
    fs::create_symlink("/dev/zero", path);
    return "a character device";
  }
  if (::mkfifo(path.c_str(), 0600) != 0)
    throw std::system_error(errno, std::generic_category(), "mkfifo " + path.string());
  return fifo_words();
}

UnreadableFile::UnreadableFile(const fs::path& path) : path_(path) {
  fs::path loop = path;
  loop += ".loop";
  fs::create_symlink(loop.filename(), path);
  fs::create_symlink(path.filename(), loop);
}

UnreadableFile::~UnreadableFile() {
  std::error_code ec;
  fs::path loop = path_;
  loop += ".loop";
  fs::remove(path_, ec);
  fs::remove(loop, ec);
}

std::string UnreadableFile::error_after_path() const {
  return ": cannot access: Too many levels of symbolic links";
}

fs::path unreachable_path(const fs::path& dir, const std::string& name) {
  fs::create_symlink(name, dir / name);
  return dir / name;
}

std::string unreachable_reason() { return "Too many levels of symbolic links"; }

void link_to_regular_file(const fs::path& target, const fs::path& link) {
  fs::create_symlink(target, link);
}

OutputTrap make_output_trap(const fs::path& dir, const std::string& name, const fs::path& target) {
  fs::create_symlink(target, dir / name);
  return {dir / name,
          " is a symbolic link; vkformer does not write through links (it would replace the "
          "link with a file): give the path it points to"};
}

bool OutputTrap::intact() const { return fs::is_symlink(path); }

#endif

}  // namespace vkformer::testing
