// ClientSocket (client_socket.hpp): the POSIX search and peek, and Windows' "cannot tell".
#include "client_socket.hpp"

#include <utility>

#ifndef _WIN32
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#endif

namespace vkformer::server {

ClientSocket::ClientSocket(std::string local_addr, int local_port, std::string remote_addr, int remote_port)
    : local_addr_(std::move(local_addr)),
      remote_addr_(std::move(remote_addr)),
      local_port_(local_port),
      remote_port_(remote_port) {}

#ifdef _WIN32

bool ClientSocket::connected() { return true; }

#else

namespace {

// "address:port" of a socket's end, as httplib writes them (inet_ntop), or "" if not IP.
bool endpoint(const sockaddr_storage& a, std::string* addr, int* port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
    *port = ntohs(in.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& in = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &in.sin6_addr, text, sizeof text);
    *port = ntohs(in.sin6_port);
  } else {
    return false;
  }
  *addr = text;
  return true;
}

}  // namespace

bool ClientSocket::connected() {
  auto is_ours = [&](int fd) {
    sockaddr_storage local{}, remote{};
    socklen_t ln = sizeof local, rn = sizeof remote;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ln) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &rn) != 0)
      return false;
    std::string la, ra;
    int lp = -1, rp = -1;
    return endpoint(local, &la, &lp) && endpoint(remote, &ra, &rp) && lp == local_port_ &&
           rp == remote_port_ && la == local_addr_ && ra == remote_addr_;
  };
  if (fd_ >= 0 && !is_ours(fd_)) return false;  // closed, its descriptor gone or reused
  if (fd_ < 0) {
    rlimit limit{};
    const rlim_t most = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? std::min<rlim_t>(limit.rlim_cur, 65536) : 1024;
    for (int fd = 0; fd < static_cast<int>(most) && fd_ < 0; ++fd)
      if (is_ours(fd)) fd_ = fd;
    if (fd_ < 0) return true;  // not found (not a plain socket): cannot tell
  }
  char c;
  const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return true;   // data waiting: open
  if (n == 0) return false;  // the client closed its end
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;  // else reset: gone
}

#endif

}  // namespace vkformer::server
