// Win32 file access (file_access.hpp); the POSIX version is file_access_posix.cpp. Paths go to
// the wide-character APIs (path::c_str() is UTF-16 on Windows), so non-ASCII names work.
#ifdef _WIN32
#include <fcntl.h>
#include <io.h>
#include <windows.h>

#include <limits>
#include <system_error>
#include <utility>

#include "file_access.hpp"
#include "utf8_path.hpp"

namespace vkformer::platform {

std::string windows_error_text(unsigned long code) {
  wchar_t* text = nullptr;
  const DWORD n = FormatMessageW(
      FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
      nullptr, code, 0, reinterpret_cast<wchar_t*>(&text), 0, nullptr);
  std::string out;
  if (n && text) {
    const int bytes = WideCharToMultiByte(CP_UTF8, 0, text, static_cast<int>(n), nullptr, 0,
                                          nullptr, nullptr);
    out.resize(static_cast<size_t>(bytes));
    WideCharToMultiByte(CP_UTF8, 0, text, static_cast<int>(n), out.data(), bytes, nullptr,
                        nullptr);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' '))
      out.pop_back();
  }
  if (text) LocalFree(text);
  return (out.empty() ? std::string("system error") : out) + " (error " + std::to_string(code) +
         ")";
}

namespace {
std::string last_error() { return windows_error_text(GetLastError()); }
}  // namespace

PathStatus path_status(const std::filesystem::path& path, bool follow_links) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = follow_links ? fs::status(path, ec) : fs::symlink_status(path, ec);
  PathStatus out;
  if (ec) {
    if (ec != std::errc::no_such_file_or_directory) out.error = ec.message();
    return out;
  }
  switch (st.type()) {
    case fs::file_type::not_found: out.kind = FileKind::missing; break;
    case fs::file_type::regular: out.kind = FileKind::regular; break;
    case fs::file_type::directory: out.kind = FileKind::directory; break;
    case fs::file_type::symlink: out.kind = FileKind::symbolic_link; break;
    case fs::file_type::fifo: out.kind = FileKind::fifo; break;
    case fs::file_type::character: out.kind = FileKind::character_device; break;
    case fs::file_type::block: out.kind = FileKind::block_device; break;
    case fs::file_type::socket: out.kind = FileKind::socket; break;
    default: out.kind = FileKind::other; break;
  }
  return out;
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

ReadOnlyFile ReadOnlyFile::open(const std::filesystem::path& path, std::string* error) {
  ReadOnlyFile f;
  // Sharing read, write and delete as POSIX does: another program may replace the file while it
  // is mapped here. FILE_FLAG_BACKUP_SEMANTICS opens a directory, so it is named as one.
  HANDLE h = CreateFileW(path.c_str(), GENERIC_READ,
                         FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                         OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_BACKUP_SEMANTICS,
                         nullptr);
  if (h == INVALID_HANDLE_VALUE) {
    if (error) *error = last_error();
    return f;
  }
  f.handle_ = h;
  return f;
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& o) noexcept
    : handle_(std::exchange(o.handle_, nullptr)) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& o) noexcept {
  if (this != &o) {
    if (handle_) CloseHandle(handle_);
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (handle_) CloseHandle(handle_);
}

bool ReadOnlyFile::is_open() const { return handle_ != nullptr; }

bool ReadOnlyFile::status(FileKind* kind, uint64_t* size, std::string* error) const {
  *size = 0;
  switch (GetFileType(handle_)) {
    case FILE_TYPE_CHAR: *kind = FileKind::character_device; return true;  // NUL, CON
    case FILE_TYPE_PIPE: *kind = FileKind::fifo; return true;
    case FILE_TYPE_DISK: break;
    default: *kind = FileKind::other; return true;
  }
  BY_HANDLE_FILE_INFORMATION info{};
  if (!GetFileInformationByHandle(handle_, &info)) {
    if (error) *error = last_error();
    return false;
  }
  if (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
    *kind = FileKind::directory;
    return true;
  }
  *kind = FileKind::regular;
  *size = (static_cast<uint64_t>(info.nFileSizeHigh) << 32) | info.nFileSizeLow;
  return true;
}

int64_t ReadOnlyFile::read_at(void* buffer, size_t n, uint64_t offset, std::string* error) const {
  const DWORD want = static_cast<DWORD>(std::min<size_t>(n, 1u << 30));
  OVERLAPPED at{};
  at.Offset = static_cast<DWORD>(offset);
  at.OffsetHigh = static_cast<DWORD>(offset >> 32);
  DWORD got = 0;
  if (!ReadFile(handle_, buffer, want, &got, &at)) {
    if (GetLastError() == ERROR_HANDLE_EOF) return 0;
    if (error) *error = last_error();
    return -1;
  }
  return got;
}

const void* ReadOnlyFile::map(size_t size) const {
  HANDLE mapping = CreateFileMappingW(handle_, nullptr, PAGE_READONLY, 0, 0, nullptr);
  if (!mapping) return nullptr;
  const void* view = MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, size);
  CloseHandle(mapping);  // the view keeps the mapping alive
  return view;
}

void ReadOnlyFile::unmap(const void* data, size_t) {
  if (data) UnmapViewOfFile(data);
}

std::FILE* create_new_file(const std::filesystem::path& path, std::string* error) {
  // CREATE_NEW: never write through a link or a file that is already there.
  HANDLE h = CreateFileW(path.c_str(), GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_DELETE, nullptr,
                         CREATE_NEW, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) {
    if (error) *error = last_error();
    return nullptr;
  }
  const int fd = _open_osfhandle(reinterpret_cast<intptr_t>(h), _O_BINARY | _O_WRONLY);
  std::FILE* file = fd >= 0 ? _fdopen(fd, "wb") : nullptr;
  if (!file) {
    if (error) *error = "cannot open a stream on the new file";
    if (fd >= 0) _close(fd);
    else CloseHandle(h);
    DeleteFileW(path.c_str());
  }
  return file;
}

bool rename_replacing(const std::filesystem::path& from, const std::filesystem::path& to,
                      std::string* error) {
  // std::rename fails on Windows when `to` exists; MoveFileEx replaces it.
  if (MoveFileExW(from.c_str(), to.c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
    return true;
  if (error) *error = last_error();
  return false;
}

uint64_t process_id() { return GetCurrentProcessId(); }

}  // namespace vkformer::platform
#endif  // _WIN32
