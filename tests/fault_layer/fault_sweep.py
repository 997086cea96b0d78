#!/usr/bin/env python3
"""The fault sweep: run a vkformer workload once to count its Vulkan calls, then again with each
call index in turn made to fail by the vkfault layer (tests/fault_layer/README.md), as SQLite
tests its allocation and I/O failures.

    fault_sweep.py --vkformer BIN --layer-dir DIR --out DIR --tiny-llama GGUF [--full] [--jobs N]

The workloads: `generate` (the tiny llama), `embed` (a tiny random BERT), `demo` (`vkformer demo`
without models: multi-head masked self-attention and the whole encoder-decoder transformer with
greedy generation, against the fp64 reference) and `serve` (below). Without --workload: the first
three.

Every faulted run must end in one of two ways:
  - exit status 1 and a last error line "vkformer: error: ..." that names the Vulkan call that
    failed and says what to try; or
  - exit status 0 with the output of the run without faults (a failure the program recovered
    from, such as an allocation retried smaller; the demo's timings, "12.3 ms", left out of the
    comparison);
and in both: no signal, no hang (--timeout), no validation message (the Khronos layer runs
below vkfault, logging to a file), no object left alive (the layer's count at exit is zero) and no
sanitizer report.

The serve workload (`vkformer serve` on the tiny llama, two greedy completions one after the
other, then SIGTERM) ends either as above at start-up (exit 1 naming the call), or with every
request answered 200 with the fault-free run's text or 500/503 with a message naming the call;
after a failed request /health must come back to 200 and the next request be answered 200 with
that text (a fault from then on may instead keep the server degraded: 503 naming the call), and
SIGTERM must end the server with exit status 0.

Which runs (deterministic):
  - by default (make test): every call index of the issue's eight functions (vkAllocateMemory,
    vkCreateBuffer, vkCreateComputePipelines, vkQueueSubmit, vkWaitForFences, vkMapMemory,
    vkCreateDescriptorPool, vkAllocateDescriptorSets), each failing once; each one's first call
    failing from then on (FUNCTION:1+); vkWaitForFences timing out (VK_TIMEOUT) at its first,
    middle and last call. A function called more than MANY times gets its first HEAD, its last
    TAIL and SPREAD indices evenly spaced between instead of every index (the demo's vkQueueSubmit
    and vkWaitForFences, 159 calls each); --every-index takes every index all the same.
  - with --quick (VKFORMER_FAULT_SWEEP=quick: scripts/sanitize.sh, where each run costs more):
    the same functions, every index up to QUICK_MANY calls, beyond that the first QUICK_HEAD, the
    last QUICK_TAIL and QUICK_SPREAD evenly spaced between. --quick-for WORKLOAD does this for
    one workload only, unless the sweep is full (ctest's fault_sweep: the demo, whose runs cost
    the most).
  - with --full (VKFORMER_FAULT_SWEEP=full, `make fault-sweep`): every index of every function
    the layer can fail, once and from then on, every vkWaitForFences index timing out and every
    vkQueueSubmit index running out of memory instead of losing the device.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ISSUE_FUNCTIONS = ["vkAllocateMemory", "vkCreateBuffer", "vkCreateComputePipelines", "vkQueueSubmit",
                   "vkWaitForFences", "vkMapMemory", "vkCreateDescriptorPool", "vkAllocateDescriptorSets"]
MANY, HEAD, TAIL, SPREAD = 64, 16, 8, 24
QUICK_MANY, QUICK_HEAD, QUICK_TAIL, QUICK_SPREAD = 8, 3, 2, 3
LAYER = "VK_LAYER_VKFORMER_fault"
VALIDATION = "VK_LAYER_KHRONOS_validation"


def pick_indices(count, mode):
    """The call indices (1-based) to fail for a function called `count` times."""
    many, head, tail, spread = (QUICK_MANY, QUICK_HEAD, QUICK_TAIL, QUICK_SPREAD) if mode == "quick" \
        else (MANY, HEAD, TAIL, SPREAD)
    if mode in ("full", "every") or count <= many:
        return list(range(1, count + 1))
    picked = set(range(1, head + 1)) | set(range(count - tail + 1, count + 1))
    lo, hi = head + 1, count - tail  # the middle, spread evenly
    for k in range(spread):
        picked.add(lo + (hi - lo) * k // (spread - 1))
    return sorted(picked)


def plan_runs(calls, mode):
    """(function, VKFORMER_FAULT) for every faulted run, from the counting run's calls."""
    plan = []
    full = mode == "full"
    for fn in (sorted(calls) if full else ISSUE_FUNCTIONS):
        n = calls.get(fn, 0)
        indices = pick_indices(n, mode)
        if len(indices) < n:
            print(f"  {fn}: {len(indices)} of its {n} call indices (the first, the last and some spread between)")
        plan += [(fn, f"{fn}:{i}") for i in indices]
        # From then on: a lost device already stays lost, so vkWaitForFences needs no "+".
        if fn != "vkWaitForFences":
            plan += [(fn, f"{fn}:{i}+") for i in (indices if full else indices[:1])]
        if fn == "vkWaitForFences" and n:
            timeouts = indices if full else sorted({1, (n + 1) // 2, n})
            plan += [(fn, f"{fn}:{i}=VK_TIMEOUT") for i in timeouts]
        if fn == "vkQueueSubmit" and full:
            plan += [(fn, f"{fn}:{i}=VK_ERROR_OUT_OF_DEVICE_MEMORY") for i in indices]
    return plan


def parse_report(path):
    """The last report in a vkfault report file: {'calls': {...}, 'injected': {...}, 'live': {...}}."""
    try:
        text = open(path).read()
    except FileNotFoundError:
        return None, ""
    last = {}
    injections = []
    for line in text.splitlines():
        if line.startswith("[vkfault] injected ") and " call " in line:
            injections.append(line[len("[vkfault] injected "):])
            continue
        m = re.match(r"\[vkfault\] (calls|injected|live)((?: \S+=-?\d+)*)$", line)
        if m:
            last[m.group(1)] = {k: int(v) for k, v in (kv.split("=") for kv in m.group(2).split())}
    return (last if {"calls", "injected", "live"} <= last.keys() else None), "; ".join(injections)


class Runner:
    def __init__(self, args, out):
        self.args = args
        self.out = out
        self.serial = 0

    def run(self, name, argv, fault, drive=None):
        """Runs the tool once with VKFORMER_FAULT=fault; returns what the checks need. `drive`
        (the serve workload) runs the program instead: drive(argv, env, timeout) gives
        (rc, stdout, stderr, hung)."""
        d = tempfile.mkdtemp(prefix=name + "_", dir=self.out)
        report, vlog = os.path.join(d, "vkfault.txt"), os.path.join(d, "validation.txt")
        # The validation layer's own log: it also reports what happens after the program has
        # stopped listening (objects destroyed late, a device destroyed with children alive).
        with open(os.path.join(d, "vk_layer_settings.txt"), "w") as f:
            f.write(f"khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n"
                    f"khronos_validation.report_flags = error,warn\n"
                    f"khronos_validation.log_filename = {vlog}\n")
        env = dict(os.environ)
        env.update({
            "VK_ADD_LAYER_PATH": self.args.layer_dir,
            # Listed first, so it sits above the validation layer: the faults it makes never
            # reach validation, which sees only the calls that really happen.
            "VK_INSTANCE_LAYERS": f"{LAYER}:{VALIDATION}",
            "VK_LAYER_SETTINGS_PATH": d,
            "VKFORMER_FAULT": fault,
            "VKFORMER_FAULT_REPORT": report,
            "VKFORMER_TUNING": "static",
        })
        env.pop("VKFORMER_VALIDATION", None)
        t0 = time.monotonic()
        if drive:
            rc, stdout, stderr, hung = drive([self.args.vkformer] + argv, env, self.args.timeout)
        else:
            try:
                p = subprocess.run([self.args.vkformer] + argv, env=env, capture_output=True,
                                   timeout=self.args.timeout, stdin=subprocess.DEVNULL)
                rc, stdout, stderr, hung = p.returncode, p.stdout, p.stderr, False
            except subprocess.TimeoutExpired as e:
                rc, stdout, stderr, hung = None, e.stdout or b"", e.stderr or b"", True
        seconds = time.monotonic() - t0
        parsed, injections = parse_report(report)
        validation = open(vlog, errors="replace").read() if os.path.exists(vlog) else ""
        result = {"fault": fault, "rc": rc, "hung": hung, "seconds": round(seconds, 2),
                  "stdout": stdout.decode(errors="replace"), "stderr": stderr.decode(errors="replace"),
                  "report": parsed, "injections": injections, "validation": validation.strip()}
        if not self.args.keep:
            shutil.rmtree(d, ignore_errors=True)
        return result


SERVE_MODEL = "tiny"


def serve_drive(argv, env, timeout):
    """The serve workload: starts the server, sends two greedy completions one after the other
    (after one that failed: waits for /health, then one more), then SIGTERM. stdout is the
    transcript, a JSON list of ("ok", text) / ("error", status, message) / ("health", status,
    body) / ("start", ...) entries; rc the server's exit status."""
    import http.client
    import threading
    import urllib.error
    import urllib.request
    end = time.monotonic() + timeout
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines, port = [], [None]
    listening = threading.Event()

    def read():
        for raw in p.stderr:
            line = raw.decode(errors="replace")
            lines.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                port[0] = int(m.group(1))
                listening.set()
        listening.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    transcript = []

    def finish(rc, hung):
        reader.join(10)
        return rc, json.dumps(transcript).encode(), "".join(lines).encode(), hung

    def wait_for_exit():
        """The result once the server exits by the deadline; killed and marked hung past it."""
        try:
            return finish(p.wait(max(1, end - time.monotonic())), False)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return finish(None, True)

    listening.wait(max(1, end - time.monotonic()))
    if port[0] is None:  # failed to start (or hung while loading)
        return wait_for_exit()
    base = "http://127.0.0.1:%d" % port[0]

    def complete():
        body = json.dumps({"model": SERVE_MODEL, "prompt": "hello", "max_tokens": 4, "temperature": 0}).encode()
        req = urllib.request.Request(base + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=max(1, end - time.monotonic())) as r:
                transcript.append(["ok", json.loads(r.read())["choices"][0]["text"]])
                return True
        except urllib.error.HTTPError as e:
            transcript.append(["error", e.code, e.read().decode(errors="replace")])
        except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
            transcript.append(["error", 0, "no answer: %r" % e])
        return False

    def health():
        try:
            with urllib.request.urlopen(base + "/health", timeout=10) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except (OSError, http.client.HTTPException) as e:
            return 0, repr(e)

    failed = not complete()
    failed = not complete() or failed
    if failed:
        # Back to 200, or stuck with a reload that did not work (a fault from then on).
        status, text = health()
        while status != 200 and "did not work" not in text and time.monotonic() < end - 10:
            time.sleep(0.1)
            status, text = health()
        transcript.append(["health", status, text])
        complete()
    p.send_signal(signal.SIGTERM)
    return wait_for_exit()


def judge_serve(result, baseline, function):
    """The serve workload's own checks, once judge()'s common ones passed and the server ran."""
    transcript = json.loads(result["stdout"] or "[]")
    want = json.loads(baseline["stdout"])[0][1]
    if result["rc"] != 0:
        return f"exit status {result['rc']} after SIGTERM (expected 0): " + result["stderr"][-300:]
    recovered_after = None
    for i, entry in enumerate(transcript):
        if entry[0] == "ok" and entry[1] != want:
            return f"request {i}: 200 with {entry[1]!r}, without faults {want!r}"
        if entry[0] == "error":
            status, message = entry[1], entry[2]
            if status not in (500, 503):
                return f"request {i}: status {status} (expected 200, 500 or 503): {message[:300]}"
            if function not in message:
                return f"request {i}: the error does not name {function}: {message[:300]}"
        if entry[0] == "health":
            recovered_after = entry
    if recovered_after is not None:
        last = transcript[-1]
        from_then_on = "+" in result["fault"].split("=")[0]
        if last[0] != "ok" and not (from_then_on and "did not work" in recovered_after[2]):
            return f"after a failed request and /health {recovered_after[1]} {recovered_after[2][:200]}: " \
                   f"the next request got {last[:2]} {str(last[2:])[:200]}"
    return ""


# The demo prints how long things took; a run that recovered must print the same apart from those.
TIMING = re.compile(r"\d+(?:\.\d+)? ms\b")


def comparable(stdout):
    return TIMING.sub("<ms>", stdout)


def error_line(stderr):
    lines = [l for l in stderr.splitlines() if l.startswith("vkformer: error:")]
    return lines[-1] if lines else ""


def judge(result, baseline, function):
    """What is wrong with a faulted run, or '' when it ended as it must."""
    if result["hung"]:
        return "hang: no exit within the timeout"
    rc = result["rc"]
    if rc < 0:
        return f"killed by signal {-rc} ({signal.Signals(-rc).name})"
    if "Sanitizer" in result["stderr"]:
        return "sanitizer report: " + next(l for l in result["stderr"].splitlines() if "Sanitizer" in l)
    report = result["report"]
    if report is None:
        return "no vkfault report: was the layer loaded?"
    if report["injected"].get("total", 0) == 0:
        return "no fault injected: the run made fewer calls than the counting run"
    if report["live"].get("total", 0) != 0:
        alive = " ".join(f"{k}={v}" for k, v in report["live"].items() if v and k != "total")
        return "objects left alive at exit: " + alive
    if result["validation"]:
        return "validation message: " + result["validation"].splitlines()[0][:300]
    if result.get("served"):
        return judge_serve(result, baseline, function)
    if rc == 0:
        if comparable(result["stdout"]) == comparable(baseline["stdout"]):
            return ""
        return "exit 0 with another output than without faults: " + next(
            (f"{a!r} instead of {b!r}" for a, b in zip(comparable(result["stdout"]).splitlines(),
                                                       comparable(baseline["stdout"]).splitlines()) if a != b),
            "fewer or more lines")
    if rc != 1:
        return f"exit status {rc} (expected 1)"
    line = error_line(result["stderr"])
    if not line:
        return "exit 1 without a 'vkformer: error:' line"
    if function not in line:
        return f"the error does not name {function}: {line}"
    if not re.search(r"\btry\b", line):
        return f"the error does not say what to try: {line}"
    return ""


def sweep(runner, name, argv, mode, jobs, drive=None):
    base = runner.run(name, argv, "count", drive)
    if drive and not (base["rc"] == 0 and [e[0] for e in json.loads(base["stdout"])] == ["ok", "ok"]):
        print(f"{name}: the run without faults did not answer both requests: {base['stdout']}\n{base['stderr']}",
              file=sys.stderr)
        return None
    if base["rc"] != 0 or base["report"] is None:
        print(f"{name}: the run without faults failed (exit {base['rc']}):\n{base['stderr']}", file=sys.stderr)
        return None
    if base["validation"] or base["report"]["live"].get("total", 0) != 0:
        print(f"{name}: the run without faults left validation messages or live objects:\n"
              f"{base['validation'][:2000]}\n{base['report']['live']}", file=sys.stderr)
        return None
    calls = base["report"]["calls"]
    plan = plan_runs(calls, mode)
    if runner.args.only:
        plan = [(f.split(":")[0] if f.startswith("vk") else "vk" + f.split(":")[0], f) for f in runner.args.only]
    functions = sorted(calls) if mode == "full" else ISSUE_FUNCTIONS
    print(f"{name} ({mode}): {base['seconds']} s without faults; calls: " +
          ", ".join(f"{fn} {calls.get(fn, 0)}" for fn in functions) + f"; {len(plan)} faulted runs", flush=True)
    failures, results = [], []
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(runner.run, name, argv, fault, drive): (fn, fault) for fn, fault in plan}
        for fut in concurrent.futures.as_completed(futures):
            fn, fault = futures[fut]
            r = fut.result()
            # The server ran (listened) unless it ended at start-up with its error line.
            r["served"] = bool(drive) and r["stdout"] != "[]"
            why = judge(r, base, fn)
            r["verdict"] = why
            results.append(r)
            if why:
                failures.append((fault, why, r))
    results.sort(key=lambda r: r["fault"])
    recovered = sum(1 for r in results if r["rc"] == 0 and not r["verdict"])
    if drive:
        answered = sum(1 for r in results if r["served"] and not r["verdict"] and '"error"' in r["stdout"])
        print(f"{name}: {len(results)} runs in {time.monotonic() - t0:.0f} s, {len(failures)} failed; "
              f"{recovered} served to the end (exit 0), {answered} of them after answering a request 500/503",
              flush=True)
    else:
        print(f"{name}: {len(results)} runs in {time.monotonic() - t0:.0f} s, {len(failures)} failed, "
              f"{recovered} recovered (exit 0, same output)", flush=True)
    for fault, why, r in sorted(failures)[:40]:
        print(f"  FAIL {fault}: {why}", flush=True)
    return {"workload": name, "argv": argv, "calls": calls, "runs": results,
            "failures": [{"fault": f, "why": w} for f, w, _ in failures]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vkformer", required=True)
    ap.add_argument("--layer-dir", required=True, help="the folder with VkLayer_vkformer_fault.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tiny-llama", help="a GGUF for the generate workload")
    ap.add_argument("--workload", action="append", choices=["generate", "embed", "demo", "serve"],
                    help="which workloads (default: generate, embed and demo)")
    ap.add_argument("--every-index", action="store_true",
                    help="the default sweep without leaving out indices of a function called more than MANY times")
    ap.add_argument("--quick-for", action="append", default=[], metavar="WORKLOAD",
                    help="this workload in the quick mode unless the sweep is full (repeatable)")
    ap.add_argument("--full", action="store_true", help="every index of every function (VKFORMER_FAULT_SWEEP=full)")
    ap.add_argument("--quick", action="store_true", help="fewer indices (VKFORMER_FAULT_SWEEP=quick)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--keep", action="store_true", help="keep each run's folder (reports, logs)")
    ap.add_argument("--only", action="append", metavar="FAULT",
                    help="run only this VKFORMER_FAULT (repeatable), e.g. to repeat a failure")
    args = ap.parse_args()
    mode = os.environ.get("VKFORMER_FAULT_SWEEP", "default")
    if mode not in ("default", "quick", "full"):
        ap.error(f"VKFORMER_FAULT_SWEEP is 'quick' or 'full', not '{mode}'")
    mode = "full" if args.full else "quick" if args.quick else "every" if args.every_index else mode
    os.makedirs(args.out, exist_ok=True)
    runner = Runner(args, args.out)
    here = os.path.dirname(os.path.abspath(__file__))
    workloads = args.workload or ["generate", "embed", "demo"]
    if "serve" in workloads and not args.tiny_llama:
        ap.error("the serve workload takes --tiny-llama")
    # The layer itself: a malformed VKFORMER_FAULT must stop the program, not test nothing.
    bad = runner.run("layer_check", ["devices"], "vkNoSuchCall:1")
    if bad["rc"] != 1 or "is not a function this layer can fail" not in bad["stderr"]:
        print(f"the layer accepted VKFORMER_FAULT=vkNoSuchCall:1 (exit {bad['rc']}):\n{bad['stderr']}",
              file=sys.stderr)
        return 1
    summaries = []
    for w in workloads:
        drive = None
        if w == "generate":
            argv = ["generate", "--model", args.tiny_llama, "--prompt", "hello", "-n", "4"]
        elif w == "demo":
            # No model arguments: attention and the encoder-decoder transformer, made in process.
            argv = ["demo"]
        elif w == "serve":
            # One slot, 32 tokens, steps of 8: the fewest graphs to build, so the fewest calls.
            argv = ["serve", "--model", args.tiny_llama, "--model-name", SERVE_MODEL, "--host", "127.0.0.1",
                    "--port", "0", "--parallel", "1", "--ctx", "32", "--batch-tokens", "8", "--shutdown-grace", "5"]
            drive = serve_drive
        else:
            bert = os.path.join(args.out, "tiny_bert")
            subprocess.run([sys.executable, os.path.join(here, "make_tiny_bert.py"), bert], check=True)
            argv = ["embed", "--model", bert, "--json", "the cat sat on the mat", "a big dog"]
        s = sweep(runner, w, argv, "quick" if w in args.quick_for and mode != "full" else mode, args.jobs, drive)
        if s is None:
            return 1
        summaries.append(s)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summaries, f, indent=1)
    failed = sum(len(s["failures"]) for s in summaries)
    print(f"fault sweep: {sum(len(s['runs']) for s in summaries)} faulted runs, {failed} failed"
          f" ({mode}; details in {args.out}/summary.json)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
