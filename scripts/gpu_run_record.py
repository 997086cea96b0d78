#!/usr/bin/env python3
"""What scripts/gpu_run.sh writes under $OUT as each piece finishes, so that a run killed at any
moment (the device tool's limit, a hung step) still returns everything it measured:

  gpu_run_record.py step STEPS.jsonl --name N --status S --seconds T --elapsed E \\
      [--result KEY=FILE]... [--log FILE --tails TAILS.txt]
  gpu_run_record.py suite TESTS.jsonl --name N --binary PATH --exit C --seconds T --log FILE \\
      --tails TAILS.txt
  gpu_run_record.py ggml-ops FILE          # test-backend-ops perf output -> JSON on stdout
  gpu_run_record.py check DIR              # every result file under DIR parses (exit 1 if not)

Each record is one JSON line appended with one write() to a file opened O_APPEND (the test
suites finish in parallel); a reader takes the complete lines and drops a last line cut off by
a kill (read_jsonl). A step's result files (a step's own JSON: the bench's, llama-bench's) are
embedded in its line; a file that does not parse is embedded as text with the parser's error,
never dropped. Log tails go to one file (the device tool returns at most 8 files): the last
lines of each suite and step, more of them for a failing one.
"""
import argparse
import json
import os
import re
import sys

TAIL_OK = 30          # lines kept of a passing suite's or step's log
TAIL_FAILED = 400     # ... of a failing one
TAIL_BYTES = 48 * 1024


def append_line(path, doc):
    data = (json.dumps(doc, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_jsonl(path):
    """(records, problems): the complete lines of a JSON-lines file; a last line without its
    newline (a write cut off by a kill) is reported, not parsed."""
    records, problems = [], []
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        return [], [f"{path}: {e}"]
    lines = data.split(b"\n")
    if lines and lines[-1]:
        problems.append(f"{path}: the last line was cut off ({len(lines[-1])} bytes, dropped)")
    for i, line in enumerate(lines[:-1], 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as e:
            problems.append(f"{path}:{i}: {e}")
    return records, problems


def tail_text(path, failed):
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            text = fh.read().decode("utf-8", "replace")
    except OSError as e:
        return f"(no log: {e})\n"
    lines = text.splitlines()
    keep = TAIL_FAILED if failed else TAIL_OK
    cut = len(lines) > keep or size > TAIL_BYTES
    return ("[... cut ...]\n" if cut else "") + "\n".join(lines[-keep:]) + "\n"


def append_tail(tails, title, log, failed):
    block = f"===== {title} =====\n" + tail_text(log, failed)
    fd = os.open(tails, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, block.encode())
    finally:
        os.close(fd)


def load_result(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as e:
        return {"unreadable": str(e)}
    if path.endswith(".jsonl"):
        recs = []
        for line in text.splitlines():
            try:
                recs.append(json.loads(line))
            except ValueError:
                if line.strip():
                    recs.append({"unparsed": line[:2000]})
        return recs
    try:
        return json.loads(text)
    except ValueError as e:
        return {"unparsed": text[:20000], "error": str(e)}


def cmd_step(a):
    doc = {"step": a.name, "status": a.status, "seconds": a.seconds, "elapsed": a.elapsed}
    for kv in a.result or []:
        key, _, path = kv.partition("=")
        if os.path.exists(path) and os.path.getsize(path) > 0:
            doc[key] = load_result(path)
    append_line(a.file, doc)
    if a.log and a.tails:
        append_tail(a.tails, f"step {a.name}: {a.status} in {a.seconds} s", a.log, a.status != "ok")


GTEST_FAILED = re.compile(r"^\[  FAILED  \] (\S+)")
GTEST_SKIPPED = re.compile(r"^\[  SKIPPED \] (\S+)")
GTEST_PASSED = re.compile(r"^\[  PASSED  \] (\d+) tests?")
GTEST_RAN = re.compile(r"^\[==========\] (\d+) tests? from \d+ test suites? ran")


def parse_gtest(text):
    """The counts and names a GoogleTest log reports; the skip reasons are the lines before each
    [  SKIPPED ] (GTEST_SKIP() << why)."""
    failed, skipped, ran, passed = [], [], None, None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = GTEST_FAILED.match(line)
        name = m.group(1).rstrip(",") if m else ""
        if m and not name.isdigit() and name not in failed:  # not "[  FAILED  ] 2 tests, listed below:"
            failed.append(name)
        m = GTEST_SKIPPED.match(line)
        if m and not any(s["test"] == m.group(1) for s in skipped):
            why = lines[i - 1].strip() if i > 0 and not lines[i - 1].startswith("[") else ""
            skipped.append({"test": m.group(1), "why": why[:300]})
        m = GTEST_RAN.match(line)
        if m:
            ran = int(m.group(1))
        m = GTEST_PASSED.match(line)
        if m:
            passed = int(m.group(1))
    return {"ran": ran, "passed": passed, "failed": failed, "skipped": skipped}


def cmd_suite(a):
    try:
        with open(a.log, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        text = ""
    doc = {"suite": a.name, "binary": os.path.basename(a.binary), "path": a.binary, "exit": a.exit,
           "seconds": a.seconds}
    doc.update(parse_gtest(text))
    if a.exit in (124, 137):
        doc["timeout"] = True
    append_line(a.file, doc)
    append_tail(a.tails, f"suite {a.name}: exit {a.exit} in {a.seconds} s", a.log, a.exit != 0)


# test-backend-ops perf, console output:
#   MUL_MAT(type_a=q4_0,type_b=f32,m=4096,n=512,k=14336,...):   312 runs -  3209.12 us/run - ...
GGML_PERF = re.compile(r"^\s*(\w+)\((.*)\):\s+(\d+) runs -\s+([\d.]+) us/run")


def cmd_ggml_ops(a):
    rows = []
    with open(a.file, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            m = GGML_PERF.match(line)
            if not m:
                continue
            params = dict(kv.split("=", 1) for kv in re.split(r",(?![^\[]*\])", m.group(2)) if "=" in kv)
            rows.append({"op": m.group(1), "params": params, "runs": int(m.group(3)),
                         "us_per_run": float(m.group(4))})
    json.dump({"ops": rows}, sys.stdout)
    print()


def cmd_check(a):
    """Every result file under DIR parses: JSON lines (a cut-off last line allowed), JSON
    documents, and the summary is text. Prints what was found, exit 1 on a broken file."""
    bad = 0
    for name in sorted(os.listdir(a.dir)):
        path = os.path.join(a.dir, name)
        if name.endswith(".jsonl"):
            recs, problems = read_jsonl(path)
            broken = [p for p in problems if "cut off" not in p]
            print(f"{name}: {len(recs)} records" + (f"; {'; '.join(problems)}" if problems else ""))
            bad += len(broken)
        elif name.endswith(".json"):
            try:
                with open(path) as fh:
                    json.load(fh)
                print(f"{name}: a JSON document")
            except ValueError as e:
                print(f"{name}: does not parse: {e}")
                bad += 1
        else:
            print(f"{name}: {os.path.getsize(path)} bytes")
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("step")
    s.add_argument("file")
    s.add_argument("--name", required=True)
    s.add_argument("--status", required=True)
    s.add_argument("--seconds", type=int, required=True)
    s.add_argument("--elapsed", type=int, required=True)
    s.add_argument("--result", action="append", help="KEY=FILE: embed FILE's JSON under KEY")
    s.add_argument("--log")
    s.add_argument("--tails")
    t = sub.add_parser("suite")
    t.add_argument("file")
    for name in ("name", "binary", "log", "tails"):
        t.add_argument("--" + name, required=True)
    t.add_argument("--exit", type=int, required=True)
    t.add_argument("--seconds", type=int, required=True)
    g = sub.add_parser("ggml-ops")
    g.add_argument("file")
    c = sub.add_parser("check")
    c.add_argument("dir")
    a = p.parse_args()
    return {"step": cmd_step, "suite": cmd_suite, "ggml-ops": cmd_ggml_ops, "check": cmd_check}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
