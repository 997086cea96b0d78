"""A burst of connections to `vkformer serve` while it accepts none (SIGSTOP stands for a server
whose accepting thread a busy machine does not run): the kernel queues up to the listen backlog
of them, and every later one has its SYN dropped and retried after 1, 3, 7 s, ... for as long as
the queue stays full. cpp-httplib listens with a backlog of 5; the server listens again with
SOMAXCONN. All 64 must complete their handshake while the server is stopped (a generous 20 s
each), then each be answered 200 once it runs again.
Usage: connection_burst_test.py VKFORMER TINY_DIR"""
import concurrent.futures
import os
import signal
import socket
import sys

from serve_harness import HOST, Checks, Server, read_status_line

vkformer, tiny_dir = sys.argv[1:3]
c = Checks()
BURST = 64

server = Server(vkformer, ["--model", os.path.join(tiny_dir, "tiny_llama_untied.gguf"), "--ctx", "64",
                           "--parallel", "1", "--max-connections", str(BURST + 8)])
sockets = []
try:
    server.signal(signal.SIGSTOP)
    try:
        def connect(_):
            s = socket.socket()
            s.settimeout(20)
            try:
                s.connect((HOST, server.port))
                return s
            except OSError:
                s.close()
                return None

        with concurrent.futures.ThreadPoolExecutor(BURST) as pool:
            sockets = list(pool.map(connect, range(BURST)))
    finally:
        server.signal(signal.SIGCONT)
    connected = [s for s in sockets if s]
    c.check(len(connected) == BURST, "%d of %d connections were accepted by the kernel while the server was "
                                     "stopped (the listen backlog)" % (len(connected), BURST))
    answered = 0
    for s in connected:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answered += read_status_line(s).startswith(b"HTTP/1.1 200")
    c.check(answered == len(connected), "%d of %d queued connections answered 200" % (answered, len(connected)))
    server.stop()
finally:
    for s in sockets:
        if s:
            s.close()
    server.kill()
c.finish()
