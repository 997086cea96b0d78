#!/usr/bin/env python3
"""The serve soak (issue 39, `make soak-serve`; not part of `make test`): `vkformer serve` on the
tiny llama under 16 clients for DURATION seconds, with the vkfault layer making the device fail
every few minutes, in the running server (tests/server/fault_control.c, preloaded).

The clients, each in a loop:
  - normal requests (greedy completions, streamed or not, of a dozen prompts that share
    prefixes): each must give the text the same prompt gave before any fault (cache_prompt
    false, one at a time), or be refused clearly: a 500/503 with an OpenAI-shaped error and a
    message (or such a final event in a stream). Never another text, an empty 200, or a
    connection dropped without a word;
  - clients that leave: streamed or not, gone after a random number of events or a random delay;
  - hostile requests (malformed JSON, wrong types, out-of-range values, an unknown model, tokens
    outside the vocabulary, a body over the limit, a wrong method, a request line cut short):
    each a 4xx with an error message (a 503 when the server is degraded or busy is clear too).
The faults, one every --fault-every seconds, chosen in turn: the device lost in a submission, a
fence that never signals (treated as lost), out of device memory in a submission, the device
lost and then a descriptor set not allocated while the model is loaded again (the server's retry
loads it). After each, /health must be 200 again within --recover-timeout
and a normal request answered with its text.

Memory and file descriptors: a warm-up (load and one fault), then a pause in which the server is
idle: resident memory and open fds are taken; the soak itself; an idle pause again: both must be
within 5% of the warm-up's. At exit the layer must count no Vulkan object alive, and the server
must exit 0 after SIGTERM.

  soak_serve.py --vkformer build/tools/vkformer --layer-dir build/tests/fault_layer \\
      --model tests/golden_llama/tiny/tiny_llama_untied.gguf --duration 1800 --out build/soak_serve
Prints a summary and writes OUT/summary.json; exit status 1 if any check failed."""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
MODEL = "tiny"
# A serving server only submits and waits (its graphs are recorded): the other calls fail while
# it loads the model again, after a loss (the 4th: the reload's 2nd descriptor set, so the
# first reload fails and the server's retry must load it).
FAULTS = ["vkQueueSubmit:{k}", "vkWaitForFences:{k}=VK_TIMEOUT", "vkQueueSubmit:{k}=VK_ERROR_OUT_OF_DEVICE_MEMORY",
          "vkQueueSubmit:{k},vkAllocateDescriptorSets:2"]


class Soak:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.counts = {}
        self.problems = []
        self.stop_clients = threading.Event()
        self.prompts, self.reference = [], {}
        self.faults_made = 0

    def count(self, what):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def problem(self, what):
        with self.lock:
            self.problems.append(what)
            if len(self.problems) <= 30:
                print("PROBLEM: " + what, flush=True)

    # -- the server ------------------------------------------------------------------------
    def start(self):
        a = self.args
        shim = os.path.join(a.out, "fault_control.so")
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", shim, os.path.join(here, "fault_control.c"), "-ldl",
                        "-lpthread"], check=True)
        self.control_file = os.path.join(a.out, "fault_control")
        self.report = os.path.join(a.out, "vkfault.txt")
        for f in (self.control_file, self.control_file + ".done", self.report):
            if os.path.exists(f):
                os.unlink(f)
        env = dict(os.environ, VK_ADD_LAYER_PATH=a.layer_dir, VK_INSTANCE_LAYERS="VK_LAYER_VKFORMER_fault",
                   VKFORMER_FAULT="count", VKFORMER_FAULT_REPORT=self.report, VKFORMER_TUNING="static",
                   VKFORMER_FAULT_CONTROL=self.control_file,
                   VKFORMER_FAULT_LAYER=os.path.join(os.path.abspath(a.layer_dir), "libVkLayer_vkformer_fault.so"),
                   LD_PRELOAD=shim + (":" + os.environ["LD_PRELOAD"] if os.environ.get("LD_PRELOAD") else ""))
        cmd = [a.vkformer, "serve", "--model", a.model, "--model-name", MODEL, "--host", "127.0.0.1", "--port", "0",
               "--parallel", "4", "--ctx", "128", "--batch-tokens", "32", "--max-connections", "48",
               "--read-timeout", "5", "--write-timeout", "5", "--shutdown-grace", "10"]
        print("$ " + " ".join(cmd), flush=True)
        self.log = open(os.path.join(a.out, "server.log"), "w")
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, errors="replace")
        port = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.log.write(line)
                self.log.flush()
                m = re.search(r"listening on http://[^:]+:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    port.set()
            port.set()

        threading.Thread(target=read, daemon=True).start()
        if not port.wait(300) or self.proc.poll() is not None:
            raise RuntimeError("the server did not start: see " + self.log.name)
        self.base = "http://127.0.0.1:%d" % self.port

    def health(self):
        try:
            with urllib.request.urlopen(self.base + "/health", timeout=30) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except (OSError, http.client.HTTPException) as e:
            return 0, repr(e)

    def metric(self, name):
        with urllib.request.urlopen(self.base + "/metrics", timeout=30) as r:
            m = re.search(r"^%s (\S+)$" % re.escape(name), r.read().decode(), re.M)
        return float(m.group(1)) if m else None

    def resources(self):
        """(resident KiB, open fds) of the server."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        return rss, len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def idle_resources(self):
        """Waits until the server is idle (no connection but the asking one, no slot busy,
        /health 200), then its resources."""
        end = time.monotonic() + 300
        while time.monotonic() < end:
            if (self.health()[0] == 200 and self.metric("vkformer_open_connections") <= 1
                    and self.metric("vkformer_active_slots") == 0):
                break
            time.sleep(0.2)
        else:
            self.problem("the server did not become idle within 300 s: /health %s" % (self.health(),))
        time.sleep(1)  # the last connections' threads end
        return self.resources()

    # -- requests --------------------------------------------------------------------------
    def post(self, body, timeout=300):
        """(status, text or error JSON) of a /v1/completions request, streamed or not; for a
        stream, the status is that of its final error event if it had one."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            if r.status != 200 or not body.get("stream"):
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
            text, error, done = "", None, False
            for raw in r:
                line = raw.decode().strip()
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    ev = json.loads(line[6:])
                    if "error" in ev:
                        error = ev
                    for ch in ev.get("choices", []):
                        text += ch.get("text", "")
            if error:  # the final event of a stream the server ended: 503's codes, else 500
                return (503 if error["error"].get("code") else 500), error
            return (200, {"choices": [{"text": text}]}) if done else (0, "the stream ended without [DONE]")
        finally:
            conn.close()

    def normal(self, rng, stream=None):
        i = rng.randrange(len(self.prompts))
        body = {"model": MODEL, "prompt": self.prompts[i], "max_tokens": 12, "temperature": 0}
        if stream if stream is not None else rng.random() < 0.5:
            body["stream"] = True
        try:
            status, reply = self.post(body)
        except (OSError, http.client.HTTPException, ValueError) as e:
            self.problem("prompt %d: no answer: %r" % (i, e))
            return False
        if status == 200:
            got = reply["choices"][0].get("text") if reply and reply.get("choices") else None
            if got != self.reference[i]:
                self.problem("prompt %d: 200 with %r, reference %r" % (i, got, self.reference[i]))
                return False
            self.count("normal answered")
            return True
        error = reply.get("error") if isinstance(reply, dict) else None
        if status in (500, 503) and error and error.get("message"):
            self.count("normal refused %s %s" % (status, error.get("code")))
            return False
        self.problem("prompt %d: status %s without a clear error: %r" % (i, status, reply))
        return False

    def leave(self, rng):
        """A client that goes away mid-request."""
        body = json.dumps({"model": MODEL, "prompt": rng.choice(self.prompts), "max_tokens": 40,
                           "temperature": 0, "stream": rng.random() < 0.7}).encode()
        s = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        try:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body) + body)
            time.sleep(rng.uniform(0, 1.0))
            s.settimeout(0.5)
            try:
                s.recv(rng.randrange(1, 2000))
            except OSError:
                pass
        finally:
            s.close()
        self.count("left")

    HOSTILE = [
        b"POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{\"model\":",
        b"POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]",
        b'{"model": "tiny", "prompt": "x", "max_tokens": -5}',
        b'{"model": "tiny", "prompt": "x", "max_tokens": 100000}',
        b'{"model": "tiny", "prompt": 7}',
        b'{"model": "tiny", "prompt": [1, 2, 99999999]}',
        b'{"model": "nope", "prompt": "x"}',
        b'{"model": "tiny", "prompt": "x", "temperature": "hot"}',
        b'{"model": "tiny", "prompt": "\xff\xfe"}',
        b'{"model": "tiny", "prompt": "x", "stop": [1, 2]}',
        b'{"model": "tiny", "prompt": "' + b"a" * (2 << 20) + b'"}',
        b"GET /v1/completions HTTP/1.1\r\n\r\n",
        b"POST /v1/nothing HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03 not http\r\n\r\n",
    ]

    def hostile(self, rng):
        raw = rng.choice(self.HOSTILE)
        if not raw.startswith((b"POST", b"GET", b"\x16")):
            raw = (b"POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                   % len(raw)) + raw
        s = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        reply = b""
        try:
            try:
                s.sendall(raw)
            except OSError:
                pass  # refused mid-body (over the limit): the reply says so
            while b"\r\n\r\n" not in reply:
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
            head, _, rest = reply.partition(b"\r\n\r\n")
            m = re.match(rb"HTTP/1\.1 (\d+)", head)
            length = re.search(rb"(?i)content-length: (\d+)", head)
            while length and len(rest) < int(length.group(1)):
                chunk = s.recv(65536)
                if not chunk:
                    break
                rest += chunk
        except OSError as e:
            self.problem("hostile %r: %r" % (raw[:60], e))
            return
        finally:
            s.close()
        status = int(m.group(1)) if m else 0
        ok = (400 <= status < 500 or status == 503) and b'"message"' in rest
        if ok:
            self.count("hostile refused %d" % status)
        elif status == 0 and raw.startswith(b"\x16"):
            self.count("hostile closed")  # not HTTP at all: httplib closes it (400 or nothing)
        else:
            self.problem("hostile %r: %r" % (raw[:60], reply[:300]))

    def client(self, seed):
        rng = random.Random(seed)
        while not self.stop_clients.is_set():
            r = rng.random()
            try:
                if r < 0.7:
                    self.normal(rng)
                elif r < 0.85:
                    self.leave(rng)
                else:
                    self.hostile(rng)
            except Exception as e:  # a bug here must show, not end the client quietly
                self.problem("client %d: %r" % (seed, e))

    def run_clients(self, seconds, faults):
        """The 16 clients for `seconds`, a fault every --fault-every seconds from the start
        (`faults`: how many at most)."""
        self.stop_clients.clear()
        threads = [threading.Thread(target=self.client, args=(seed,)) for seed in range(self.args.clients)]
        for t in threads:
            t.start()
        end = time.monotonic() + seconds
        injected = 0
        next_fault = time.monotonic() + 5
        while time.monotonic() < end:
            if injected < faults and time.monotonic() >= next_fault:
                self.fault(self.faults_made)
                self.faults_made += 1
                injected += 1
                next_fault = time.monotonic() + self.args.fault_every
            time.sleep(0.5)
        self.stop_clients.set()
        for t in threads:
            t.join(600)

    def control(self, spec):
        """Hands `spec` to the layer in the server (fault_control.c); its answer."""
        done = self.control_file + ".done"
        with open(self.control_file + ".tmp", "w") as f:
            f.write(spec)
        os.rename(self.control_file + ".tmp", self.control_file)
        end = time.monotonic() + 60
        while not os.path.exists(done) and time.monotonic() < end:
            time.sleep(0.05)
        if not os.path.exists(done):
            return "no answer within 60 s"
        time.sleep(0.05)  # written whole
        answer = open(done).read()
        os.unlink(done)
        return answer

    def fault(self, n):
        rng = random.Random(1000 + n)
        spec = FAULTS[n % len(FAULTS)].format(k=rng.randrange(1, 12))
        losses = self.metric("vkformer_device_losses_total")
        answer = self.control(spec)
        if answer != "ok":
            self.problem("arming %s: %s" % (spec, answer))
            return
        t0 = time.monotonic()
        # The clients' requests make the calls: until the fault has happened, then back to 200.
        while self.control("?injected") == "0":
            if time.monotonic() > t0 + self.args.recover_timeout:
                self.problem("fault %s: not injected within %d s" % (spec, self.args.recover_timeout))
                return
            time.sleep(0.2)
        injected = time.monotonic() - t0
        while time.monotonic() < t0 + self.args.recover_timeout and self.health()[0] != 200:
            time.sleep(0.1)
        status, text = self.health()
        recovered = time.monotonic() - t0 - injected
        if status != 200:
            self.problem("fault %s: /health %d %s after %.0f s" % (spec, status, text[:200], recovered))
        elif not self.normal(random.Random(n), stream=False):
            # Healthy: the next request must be served (a client may have been refused before).
            self.problem("fault %s: the first request after recovering was not answered" % spec)
        lost = self.metric("vkformer_device_losses_total") - losses
        print("%6.0f s: fault %s injected after %.1f s, %d device loss(es), healthy and serving %.1f s later"
              % (time.monotonic() - self.t0, spec, injected, lost, recovered), flush=True)
        self.count("faults")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vkformer", required=True)
    ap.add_argument("--layer-dir", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--duration", type=float, default=1800, help="seconds of the soak after the warm-up")
    ap.add_argument("--warmup", type=float, default=0, help="seconds; 0: 10%% of the duration, at least 60")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--fault-every", type=float, default=180)
    ap.add_argument("--recover-timeout", type=float, default=120)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    soak = Soak(args)
    soak.start()
    soak.t0 = time.monotonic()
    try:
        # The prompts (sharing prefixes, so the slots' caches are reused) and their texts, one at
        # a time without the cache, before any fault.
        words = "the river ran past a stone garden where a market stood in winter and every lantern lit".split()
        rng = random.Random(39)
        for i in range(12):
            head = " ".join(words[: 4 + (i % 4) * 3])
            soak.prompts.append(head + " " + " ".join(rng.choice(words) for _ in range(2 + i % 5)))
        for i, p in enumerate(soak.prompts):
            status, reply = soak.post({"model": MODEL, "prompt": p, "max_tokens": 12, "temperature": 0,
                                       "cache_prompt": False})
            if status != 200:
                raise RuntimeError("reference %d: %s %s" % (i, status, reply))
            soak.reference[i] = reply["choices"][0]["text"]
        warmup = args.warmup or max(60, args.duration / 10)
        print("warm-up: %.0f s with one fault" % warmup, flush=True)
        soak.run_clients(warmup, 1)
        base = soak.idle_resources()
        print("after the warm-up: resident %d KiB, %d fds" % base, flush=True)
        print("soak: %.0f s, %d clients, a fault every %.0f s" % (args.duration, args.clients, args.fault_every),
              flush=True)
        soak.run_clients(args.duration, 1 << 30)
        end = soak.idle_resources()
        print("at the end: resident %d KiB, %d fds" % end, flush=True)
        for what, b, e in (("resident memory (KiB)", base[0], end[0]), ("open fds", base[1], end[1])):
            if e > b * 1.05:
                soak.problem("%s grew from %d to %d (more than 5%%)" % (what, b, e))
        soak.proc.send_signal(signal.SIGTERM)
        rc = soak.proc.wait(120)
        if rc != 0:
            soak.problem("the server exited with %s after SIGTERM" % rc)
    finally:
        if soak.proc.poll() is None:
            soak.proc.kill()
            soak.proc.wait()
    live = re.findall(r"\[vkfault\] live .* total=(\d+)", open(soak.report).read()) if os.path.exists(soak.report) else []
    if not live or live[-1] != "0":
        soak.problem("Vulkan objects alive at exit: %s" % (live[-1:] or "no report"))
    summary = {"duration_s": args.duration, "clients": args.clients, "fault_every_s": args.fault_every,
               "resident_kib": {"after_warmup": base[0], "end": end[0]}, "fds": {"after_warmup": base[1], "end": end[1]},
               "counts": soak.counts, "problems": soak.problems, "loadavg": open("/proc/loadavg").read().split()[:3]}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: summary[k] for k in ("resident_kib", "fds", "counts", "loadavg")}, indent=1))
    print("soak: %d problems" % len(soak.problems))
    return 1 if soak.problems else 0


if __name__ == "__main__":
    sys.exit(main())
