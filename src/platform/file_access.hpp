#pragma once
// The file system calls the readers and writers in src/io need, for POSIX and Win32 (in
// file_access_posix.cpp and file_access_win32.cpp): opening a file without waiting on a FIFO,
// asking what a path is, reading at an offset, mapping read-only, creating a file exclusively
// and renaming over an existing one. Error texts are the system's own ("No such file or
// directory"), for messages that also name the path.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace vkformer::platform {

enum class FileKind {
  missing,
  regular,
  directory,
  fifo,              // a named pipe on Windows
  character_device,  // NUL, CON, COM1... on Windows
  block_device,
  socket,
  symbolic_link,
  other
};

// "a directory", "a FIFO" ("a named pipe" on Windows), ...: for "<path>: is a FIFO, not a
// regular file".
const char* describe(FileKind kind);

// What is at `path`, following links or not. `error` is set (and kind is `missing`) when the
// path exists but cannot be examined: a link loop, no permission, a name Windows refuses.
struct PathStatus {
  FileKind kind = FileKind::missing;
  std::string error;
};
PathStatus path_status(const std::filesystem::path& path, bool follow_links);

// Whether `a` and `b` are the same file after following links (a hard link is); false when
// either cannot be reached.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// A file opened for reading: opening never waits (a FIFO without a writer), and the handle is
// not inherited by child processes. Move-only.
class ReadOnlyFile {
 public:
  // An object that is not is_open() on failure, with the reason in *error.
  static ReadOnlyFile open(const std::filesystem::path& path, std::string* error);

  ReadOnlyFile() = default;
  ReadOnlyFile(ReadOnlyFile&& o) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& o) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile();

  bool is_open() const;
  // The kind and size of what was opened; false with *error when that cannot be asked.
  bool status(FileKind* kind, uint64_t* size, std::string* error) const;
  // Reads up to `n` bytes at `offset`: the count read, 0 at the end, -1 with *error.
  int64_t read_at(void* buffer, size_t n, uint64_t offset, std::string* error) const;
  // The first `size` bytes mapped read-only (private), or nullptr where mapping fails.
  const void* map(size_t size) const;
  static void unmap(const void* data, size_t size);

 private:
#ifdef _WIN32
  void* handle_ = nullptr;  // a HANDLE; nullptr when closed
  FileKind device_ = FileKind::missing;  // a pipe or device named by the path: not opened
#else
  int fd_ = -1;
#endif
};

// A new file at `path` opened for binary writing; nullptr with *error when anything (a file, a
// link) is already there or it cannot be created.
std::FILE* create_new_file(const std::filesystem::path& path, std::string* error);

// Renames `from` to `to`, replacing a file already at `to`; false with *error.
bool rename_replacing(const std::filesystem::path& from, const std::filesystem::path& to,
                      std::string* error);

// The calling process's id, for unique temporary names.
uint64_t process_id();

}  // namespace vkformer::platform
