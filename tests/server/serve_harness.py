"""Starts `vkformer serve` for a test and stops it: a free port chosen by the server (--port 0,
read from its "listening on" line), bounded waits everywhere, the server's exit status and
stderr checked at the end. Loopback only. Waits poll a condition with a generous deadline
(wait_until), never sleep a fixed time: the tests run on loaded machines (docs/testing.md)."""
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HOST = "127.0.0.1"


class Server:
    def __init__(self, vkformer, args, start_timeout=120, steady_memory=False, wait_ready=True):
        """wait_ready=False: returns once the server listens, while its model may still load
        (its "loading ... on port N" line); self.ready tells when "listening on" came."""
        self.stderr_lines = []
        self.stopped = False
        env = dict(os.environ, VKFORMER_TUNING=os.environ.get("VKFORMER_TUNING", "static"))
        if steady_memory and env.get("ASAN_OPTIONS"):
            # Under AddressSanitizer (scripts/sanitize.sh) a resident-memory check would measure
            # ASan: its quarantine holds freed blocks back from reuse, and every new thread gets
            # fake stacks, so a server with steady memory grew 584 to 617 MiB over a second round
            # (6.5 to 8.1 GiB with the default quarantine). For a test that checks memory, both
            # are off; ASan still checks every access, and LeakSanitizer the exit.
            env["ASAN_OPTIONS"] += (":quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
                                    ":detect_stack_use_after_return=0")
        cmd = [vkformer, "--validation", "serve", "--host", HOST, "--port", "0"] + args
        print("$ " + " ".join(cmd), flush=True)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=env, text=True, errors="replace")
        self.port = None
        self.ready = threading.Event()
        ready = threading.Event()

        def read():  # keeps reading so the server never blocks on a full pipe
            for line in self.proc.stderr:
                self.stderr_lines.append(line)
                m = re.search(r"listening on http://[^:]+:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    self.ready.set()
                    ready.set()
                m = re.search(r"loading the models? on port (\d+)", line)
                if m and not wait_ready:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not ready.wait(start_timeout) or self.port is None:
            self.kill()
            raise RuntimeError("the server did not start within %d s:\n%s" % (start_timeout, "".join(self.stderr_lines)))
        self.base = "http://%s:%d" % (HOST, self.port)
        print("server on %s (pid %d)" % (self.base, self.proc.pid), flush=True)

    def health(self, timeout=10):
        with urllib.request.urlopen(self.base + "/health", timeout=timeout) as r:
            return r.status == 200 and b"ok" in r.read()

    def metrics(self):
        with urllib.request.urlopen(self.base + "/metrics", timeout=10) as r:
            return r.read().decode()

    def metric(self, name):
        """One unlabelled sample of /metrics (e.g. vkformer_open_connections), or None."""
        return metric_value(self.metrics(), name)

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def alive(self):
        return self.proc.poll() is None

    def metric_value(self, name):
        """The value of an unlabelled metric (or one written with its labels) in /metrics."""
        for line in self.metrics().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        raise KeyError(name)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout):
        """The exit status, or None if the server still runs after `timeout` seconds."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self.reader.join(10)
        return rc

    def kill(self):
        """The clean-up after a failure (a no-op after stop()): the server's end is shown, since
        a test that failed on a dropped connection may have lost its server."""
        exited = self.proc.poll()
        if exited is None:
            self.proc.kill()
            self.proc.wait(30)
        if not self.stopped:
            self.reader.join(10)
            print("the server %s; its last lines:\n%s" % (
                "was killed" if exited is None else "had exited with %s" % exited,
                "".join(self.stderr_lines[-30:])), flush=True)

    def stop(self, timeout=60):
        """SIGTERM, then the exit status must be 0 (no validation message, no crash)."""
        self.stopped = True
        if self.proc.poll() is not None:
            raise AssertionError("the server had already exited with %s:\n%s" % (self.proc.returncode, "".join(self.stderr_lines)))
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("the server did not stop within %d s of SIGTERM" % timeout)
        self.reader.join(10)
        if rc != 0:
            raise AssertionError("the server exited with %d:\n%s" % (rc, "".join(self.stderr_lines[-50:])))


def args_from_argv():
    """argv: VKFORMER TINY_GGUF [MINILM_DIR] [GOLDEN_DIR] ... as each test documents."""
    return sys.argv[1:]


class Checks:
    """Counts passed and failed checks and prints the closing line ctest's log shows."""

    def __init__(self):
        self.passed = 0
        self.failed = []

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed.append(what)
            print("FAIL: " + what, flush=True)

    def finish(self):
        print("%d passed, %d failed" % (self.passed, len(self.failed)), flush=True)
        sys.exit(1 if self.failed or self.passed == 0 else 0)


def end_load_test(c, server, rss_first, rss_second):
    """How a load test ends: resident memory flat between its two halves (within 2% and 4 MiB:
    allocator noise, not a leak of every request), the server healthy, then stopped cleanly."""
    c.check(rss_second <= rss_first * 1.02 + 4096, "memory grew from %d to %d KiB" % (rss_first, rss_second))
    c.check(server.health(), "health at the end")
    server.stop()


def post_json(base, path, body, what, timeout=120):
    """The JSON reply to a POST of `body` to base + path; an HTTP error is a RuntimeError naming
    `what`, the status and the start of the reply's body."""
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise RuntimeError("%s: %d %s" % (what, e.code, e.read()[:300])) from None


def stream_json(base, path, body, timeout=600):
    """(text, completion tokens, finish reason) of a streamed completion: `body` (stream and
    include_usage are set here) POSTed to base + path, /v1/completions' text or
    /v1/chat/completions' delta content joined; completion tokens None without a usage event."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    text, usage, reason = "", None, None
    with urllib.request.urlopen(req, timeout=timeout) as r:
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                ev = json.loads(line[6:])
                usage = ev.get("usage") or usage
                for ch in ev.get("choices", []):
                    text += ch.get("text") or (ch.get("delta") or {}).get("content") or ""
                    reason = ch.get("finish_reason") or reason
    return text, usage["completion_tokens"] if usage else None, reason


def read_status_line(sock):
    """What a socket sends up to the end of the first line (the HTTP status line), or until the
    server closes it."""
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def deadline(seconds):
    end = time.monotonic() + seconds
    return lambda: time.monotonic() < end


def metric_value(text, name):
    """The value of the unlabelled sample `name` in Prometheus text, or None when absent."""
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def wait_until(condition, timeout=60, interval=0.05):
    """Calls condition() until it returns a true value, or until `timeout` seconds have passed;
    returns its last value, so the caller's check names what did not happen. The timeout only
    guards against a hang: on a quiet machine the conditions the tests wait for hold within a
    second, so a minute leaves room for any load."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= end:
            return value
        time.sleep(interval)


def byte_decoder():
    """GPT-2's byte-level alphabet, reversed: a vocabulary string back to its bytes."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c_): b for b, c_ in zip(bs, cs)}
