// POSIX file access (file_access.hpp); the Win32 version is file_access_win32.cpp.
#ifndef _WIN32
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "file_access.hpp"

namespace vkformer::platform {

namespace {
FileKind kind_of(mode_t mode) {
  if (S_ISREG(mode)) return FileKind::regular;
  if (S_ISDIR(mode)) return FileKind::directory;
  if (S_ISFIFO(mode)) return FileKind::fifo;
  if (S_ISCHR(mode)) return FileKind::character_device;
  if (S_ISBLK(mode)) return FileKind::block_device;
  if (S_ISSOCK(mode)) return FileKind::socket;
  if (S_ISLNK(mode)) return FileKind::symbolic_link;
  return FileKind::other;
}
}  // namespace

PathStatus path_status(const std::filesystem::path& path, bool follow_links) {
  struct stat st {};
  PathStatus out;
  if ((follow_links ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
    if (errno != ENOENT) out.error = std::strerror(errno);
    return out;
  }
  out.kind = kind_of(st.st_mode);
  return out;
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

ReadOnlyFile ReadOnlyFile::open(const std::filesystem::path& path, std::string* error) {
  ReadOnlyFile f;
  // O_NONBLOCK: opening a FIFO must not wait for a writer (callers refuse it after status()).
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd_ < 0 && error) *error = std::strerror(errno);
  return f;
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool ReadOnlyFile::is_open() const { return fd_ >= 0; }

bool ReadOnlyFile::status(FileKind* kind, uint64_t* size, std::string* error) const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    if (error) *error = std::strerror(errno);
    return false;
  }
  *kind = kind_of(st.st_mode);
  *size = st.st_size > 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return true;
}

int64_t ReadOnlyFile::read_at(void* buffer, size_t n, uint64_t offset, std::string* error) const {
  for (;;) {
    ssize_t r = ::pread(fd_, buffer, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && error) *error = std::strerror(errno);
    return r;
  }
}

const void* ReadOnlyFile::map(size_t size) const {
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd_, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void ReadOnlyFile::unmap(const void* data, size_t size) {
  if (data) ::munmap(const_cast<void*>(data), size);
}

std::FILE* create_new_file(const std::filesystem::path& path, std::string* error) {
  // O_EXCL: never write through a link or a file that is already there.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    if (error) *error = std::strerror(errno);
    return nullptr;
  }
  std::FILE* file = ::fdopen(fd, "wb");
  if (!file) {
    if (error) *error = std::strerror(errno);
    ::close(fd);
    ::unlink(path.c_str());
  }
  return file;
}

bool rename_replacing(const std::filesystem::path& from, const std::filesystem::path& to,
                      std::string* error) {
  if (std::rename(from.c_str(), to.c_str()) == 0) return true;
  if (error) *error = std::strerror(errno);
  return false;
}

uint64_t process_id() { return static_cast<uint64_t>(::getpid()); }

}  // namespace vkformer::platform
#endif  // !_WIN32
