#pragma once
// Whether the client of a request still holds its connection, for a request whose answer is not
// streamed (nothing is written until the end, so no failed write can tell). cpp-httplib 0.11
// gives a handler no socket and no disconnect callback, but it does give the connection's
// addresses: on POSIX the socket is the descriptor with that local and remote address and port,
// and a peek that reads 0 bytes from it means the client has closed. Windows' sockets are not
// small descriptors one can look through, so there the answer is always "connected" (the request
// then runs to its end, as before).
#include <string>

namespace vkformer::server {

class ClientSocket {
 public:
  // The connection of a request with these addresses (httplib::Request's local_addr,
  // local_port, remote_addr, remote_port).
  ClientSocket(std::string local_addr, int local_port, std::string remote_addr, int remote_port);
  // False once the client has closed (or reset) the connection; true while it is open, data
  // waiting or not, and where that cannot be told.
  bool connected();

 private:
  std::string local_addr_, remote_addr_;
  int local_port_, remote_port_;
  int fd_ = -1;  // found on the first call; checked again on each (descriptors are reused)
};

}  // namespace vkformer::server
