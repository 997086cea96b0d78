#pragma once
// The hostile paths the file readers and writers must refuse, made the way each platform makes
// them, so one test asserts the same clear error on both. POSIX: FIFOs, links to /dev/zero, link
// loops. Windows has no special files in folders but links, and Wine 8 cannot make those
// (CreateSymbolicLinkW does nothing; MinGW's std::filesystem::create_symlink is not
// implemented): there the hazards are named pipes, reserved device names (NUL, and nul.json in
// any folder), folders where a file is expected, files held open without sharing and names that
// Windows refuses. The POSIX and Win32 halves sit side by side in special_files.cpp.
#include <filesystem>
#include <string>

namespace vkformer::testing {

// How errors name a FIFO: "a FIFO", or "a named pipe" on Windows.
std::string fifo_words();

// Why a missing file cannot be opened: "No such file or directory", or the system's text for
// ERROR_FILE_NOT_FOUND.
std::string missing_file_reason();

// A FIFO made at `wanted` (mkfifo), or on Windows a named pipe
// \\.\pipe\vkformer_<pid>_<n>_<wanted's file name> made here (pipes live only in the pipe
// namespace). Nothing ever writes to it: a read would wait forever. Removed or closed when
// destroyed.
class WaitingPipe {
 public:
  explicit WaitingPipe(const std::filesystem::path& wanted);
  ~WaitingPipe();
  WaitingPipe(const WaitingPipe&) = delete;
  WaitingPipe& operator=(const WaitingPipe&) = delete;

  // What to give a reader.
  const std::filesystem::path& path() const { return path_; }
  // Still a pipe (a writer refused it rather than replacing it with a file).
  bool intact() const;

 private:
  std::filesystem::path path_;
  void* handle_ = nullptr;  // Windows: the pipe's server end
};

// A path in `dir` to a character device that never ends or may wait for input: a link
// dir/`name` to /dev/zero, or on Windows dir/nul.<name's extension>, which is the NUL device in
// any folder. Errors call it "a character device".
std::filesystem::path endless_device_path(const std::filesystem::path& dir, const std::string& name);

// The null device: /dev/null, NUL.
std::filesystem::path null_device_path();

// Something that is not a regular file at exactly `path`, where a loader looks a file up by its
// fixed name (config.json): a FIFO or a link to /dev/zero, or on Windows a folder for both.
// Returns how errors name it ("a FIFO", "a character device", "a directory"). fs::remove(path)
// removes it.
enum class NonRegular { fifo, endless_device };
std::string make_non_regular_at(const std::filesystem::path& path,
                                NonRegular what = NonRegular::fifo);

// A path that exists but cannot be read, at exactly `path`, while this object lives: a link into
// a loop of two links (link.loop and back), or on Windows a file this process holds open without
// sharing. error_after_path() is what the library says after the path.
class UnreadableFile {
 public:
  explicit UnreadableFile(const std::filesystem::path& path);
  ~UnreadableFile();
  UnreadableFile(const UnreadableFile&) = delete;
  UnreadableFile& operator=(const UnreadableFile&) = delete;

  // ": cannot access: Too many levels of symbolic links"; on Windows ": cannot open: " and the
  // system's text for ERROR_SHARING_VIOLATION.
  std::string error_after_path() const;

 private:
  std::filesystem::path path_;
  void* handle_ = nullptr;  // Windows: the handle that shares nothing
};

// A path in `dir` that cannot even be examined: a link named `name` to itself, or on Windows
// `name` with a '|' in it, which Windows refuses in a name.
std::filesystem::path unreachable_path(const std::filesystem::path& dir, const std::string& name);
// Why: "Too many levels of symbolic links", or the system's text for ERROR_INVALID_NAME.
std::string unreachable_reason();

// `link` made to lead to the regular file `target`: a symbolic link, or on Windows a hard link.
void link_to_regular_file(const std::filesystem::path& target, const std::filesystem::path& link);

// A path in `dir` that a writer must refuse instead of replacing: a link dir/`name` to `target`,
// or on Windows dir/nul.<name's extension> (the NUL device). error_after_path is what the library
// says after the path.
struct OutputTrap {
  std::filesystem::path path;
  std::string error_after_path;
  // Still the link (or device name), not replaced by a file.
  bool intact() const;
};
OutputTrap make_output_trap(const std::filesystem::path& dir, const std::string& name,
                            const std::filesystem::path& target);

}  // namespace vkformer::testing
