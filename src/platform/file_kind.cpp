#include "file_access.hpp"

namespace vkformer::platform {

const char* describe(FileKind kind) {
  switch (kind) {
    case FileKind::missing: return "missing";
    case FileKind::regular: return "a regular file";
    case FileKind::directory: return "a directory";
    case FileKind::fifo: return "a FIFO";
    case FileKind::character_device: return "a character device";
    case FileKind::block_device: return "a block device";
    case FileKind::socket: return "a socket";
    case FileKind::symbolic_link: return "a symbolic link";
    case FileKind::other: break;
  }
  return "a special file";
}

}  // namespace vkformer::platform
