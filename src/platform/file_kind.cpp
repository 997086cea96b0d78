#include "file_access.hpp"

namespace vkformer::platform {

const char* describe(FileKind kind) {
  switch (kind) {
    case FileKind::missing: return "missing";
    case FileKind::regular: return "a regular file";
    case FileKind::directory: return "a directory";
#ifdef _WIN32
    case FileKind::fifo: return "a named pipe";  // \\.\pipe\NAME: Windows' FIFOs
#else
    case FileKind::fifo: return "a FIFO";
#endif
    case FileKind::character_device: return "a character device";
    case FileKind::block_device: return "a block device";
    case FileKind::socket: return "a socket";
    case FileKind::symbolic_link: return "a symbolic link";
    case FileKind::other: break;
  }
  return "a special file";
}

}  // namespace vkformer::platform
