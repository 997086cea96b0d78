// Win32 file access (file_access.hpp); the POSIX version is file_access_posix.cpp. Paths go to
// the wide-character APIs (path::c_str() is UTF-16 on Windows), so non-ASCII names work.
#ifdef _WIN32
#include <fcntl.h>
#include <io.h>
#include <windows.h>

#include <atomic>
#include <cwctype>
#include <limits>
#include <optional>
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

// Devices and named pipes are named, not stored: NUL, CON, COM1 (in any folder and with any
// extension: models\nul.json is NUL) and paths in the \\.\ device namespace. GetFullPathNameW
// turns a reserved name into \\.\NAME, as CreateFileW would open it. The file attribute calls
// cannot describe these, and opening one is not harmless: a pipe's client takes the pipe, a
// device may wait for input. Empty when `path` names a file system entry.
std::optional<FileKind> device_kind(const std::filesystem::path& path) {
  std::wstring full(MAX_PATH, L'\0');
  DWORD n = GetFullPathNameW(path.c_str(), static_cast<DWORD>(full.size()), full.data(), nullptr);
  if (n >= full.size()) {
    full.resize(n);
    n = GetFullPathNameW(path.c_str(), static_cast<DWORD>(full.size()), full.data(), nullptr);
  }
  if (n == 0 || n >= full.size()) return std::nullopt;
  full.resize(n);
  for (wchar_t& c : full)
    if (c == L'/') c = L'\\';
  // \\.\X or \\?\X: the device namespace, unless X is a drive (\\?\C:\...), UNC or a volume.
  if (full.size() < 5 || full.compare(0, 2, L"\\\\") != 0 || (full[2] != L'.' && full[2] != L'?') ||
      full[3] != L'\\')
    return std::nullopt;
  std::wstring rest = full.substr(4);
  for (wchar_t& c : rest) c = static_cast<wchar_t>(towupper(c));
  if (rest.size() >= 2 && rest[1] == L':') return std::nullopt;
  if (rest.rfind(L"UNC\\", 0) == 0 || rest.rfind(L"VOLUME{", 0) == 0 ||
      rest.rfind(L"GLOBALROOT\\", 0) == 0)
    return std::nullopt;
  if (rest.rfind(L"PIPE\\", 0) == 0) return FileKind::fifo;
  return FileKind::character_device;
}

// What a path that has no attributes is when it can still be opened (a pipe, a device). Opened
// without access rights, which neither reads nor connects. `missing` when it cannot be opened.
FileKind attributeless_kind(const std::filesystem::path& path) {
  HANDLE h = CreateFileW(path.c_str(), 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                         nullptr, OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, nullptr);
  if (h == INVALID_HANDLE_VALUE) return FileKind::missing;
  const DWORD type = GetFileType(h);
  CloseHandle(h);
  switch (type) {
    case FILE_TYPE_PIPE: return FileKind::fifo;
    case FILE_TYPE_CHAR: return FileKind::character_device;
    default: return FileKind::other;
  }
}

}  // namespace

PathStatus path_status(const std::filesystem::path& path, bool follow_links) {
  PathStatus out;
  if (const std::optional<FileKind> device = device_kind(path)) {
    out.kind = *device;
    return out;
  }
  // The attributes, not std::filesystem::status: MinGW's reports every failure as "No such file
  // or directory", also a name Windows refuses (bad|name) or one it cannot reach.
  WIN32_FILE_ATTRIBUTE_DATA data{};
  if (!GetFileAttributesExW(path.c_str(), GetFileExInfoStandard, &data)) {
    // Under Wine a FIFO on the Unix file system has no attributes (ERROR_INVALID_PARAMETER) and
    // still opens, as a pipe.
    const DWORD code = GetLastError();
    out.kind = attributeless_kind(path);
    if (out.kind == FileKind::missing && code != ERROR_FILE_NOT_FOUND && code != ERROR_PATH_NOT_FOUND)
      out.error = windows_error_text(code);
    return out;
  }
  if ((data.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) && !follow_links) {
    out.kind = FileKind::symbolic_link;
    return out;
  }
  if (data.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) {
    // A link or junction: what it leads to, or why it leads nowhere (a loop, a missing target).
    HANDLE h = CreateFileW(path.c_str(), 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           nullptr, OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, nullptr);
    if (h == INVALID_HANDLE_VALUE) {
      const DWORD code = GetLastError();
      if (code != ERROR_FILE_NOT_FOUND && code != ERROR_PATH_NOT_FOUND)
        out.error = windows_error_text(code);
      return out;
    }
    BY_HANDLE_FILE_INFORMATION info{};
    const bool ok = GetFileInformationByHandle(h, &info);
    CloseHandle(h);
    if (!ok) {
      out.error = last_error();
      return out;
    }
    data.dwFileAttributes = info.dwFileAttributes;
  }
  out.kind = (data.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) ? FileKind::directory
                                                                 : FileKind::regular;
  return out;
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

ReadOnlyFile ReadOnlyFile::open(const std::filesystem::path& path, std::string* error) {
  ReadOnlyFile f;
  // A pipe or device is described, never opened (see device_kind); callers refuse it by status().
  if (const std::optional<FileKind> device = device_kind(path)) {
    f.device_ = *device;
    return f;
  }
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
    : handle_(std::exchange(o.handle_, nullptr)),
      device_(std::exchange(o.device_, FileKind::missing)) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& o) noexcept {
  if (this != &o) {
    if (handle_) CloseHandle(handle_);
    handle_ = std::exchange(o.handle_, nullptr);
    device_ = std::exchange(o.device_, FileKind::missing);
  }
  return *this;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (handle_) CloseHandle(handle_);
}

bool ReadOnlyFile::is_open() const { return handle_ != nullptr || device_ != FileKind::missing; }

bool ReadOnlyFile::status(FileKind* kind, uint64_t* size, std::string* error) const {
  *size = 0;
  if (device_ != FileKind::missing) {
    *kind = device_;
    return true;
  }
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
  constexpr DWORD kReplace = MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH;
  if (MoveFileExW(from.c_str(), to.c_str(), kReplace)) return true;
  const DWORD code = GetLastError();
  // A file that is mapped (a model loaded from it) cannot be replaced, but it can be renamed:
  // its views keep the old bytes, as on POSIX. The old name is deleted; Windows removes a file
  // that is still mapped when its last view closes.
  if (code == ERROR_ACCESS_DENIED || code == ERROR_SHARING_VIOLATION ||
      code == ERROR_USER_MAPPED_FILE) {
    static std::atomic<unsigned> counter{0};
    std::filesystem::path aside = to;
    aside += ".old-vkformer-" + std::to_string(GetCurrentProcessId()) + "-" +
             std::to_string(counter++);
    if (MoveFileExW(to.c_str(), aside.c_str(), MOVEFILE_WRITE_THROUGH)) {
      if (MoveFileExW(from.c_str(), to.c_str(), kReplace)) {
        DeleteFileW(aside.c_str());
        return true;
      }
      const DWORD again = GetLastError();
      MoveFileExW(aside.c_str(), to.c_str(), MOVEFILE_WRITE_THROUGH);  // put the old one back
      if (error) *error = windows_error_text(again);
      return false;
    }
  }
  if (error) *error = windows_error_text(code);
  return false;
}

uint64_t process_id() { return GetCurrentProcessId(); }

}  // namespace vkformer::platform
#endif  // _WIN32
