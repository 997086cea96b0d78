#!/usr/bin/env python3
"""One table for a GPU run: a row per figure the GPU measurement issue (issue 22, then 41) asks
for, each with vkformer's number, the reference (PyTorch on the same GPU, the copy bandwidth
vkformer measured, ggml-vulkan in the same run), the ratio and whether the target holds, or
"not measured: why". Inputs are the results of one run (scripts/gpu_run.sh):

  python3 bench/compare.py --out-dir DIR [--markdown summary.md] [--json results.json] [--smoke]
      # what gpu_run.sh streamed into DIR (steps.jsonl, tests.jsonl, torch.jsonl), complete or
      # cut short: a run killed at any moment still makes a table of what it measured
  python3 bench/compare.py --vkformer vkformer.json --torch torch.json \\
      [--smollm2 llm.json] [--llama1b llm.json --llama1b-bytes N] [--tests tests.json] \\
      [--tune tune.json] [--ggml llama-bench.json] [--steps steps.tsv]   # single files

--smoke reads the small shapes the lavapipe dry run measures instead of the GPU sizes (the rows,
their order and their targets stay those of the issue). --json writes the rows and every input
in one document. Exit status 1 if a row is missing or malformed (never for a target missed:
that is what the table reports). The ggml-vulkan rows take llama-bench's and test-backend-ops'
figures from the same run; without them they say "not measured", never an older run's figure.
"""
import argparse
import json
import os
import sys

def mm(dt, m, n, k, variant="square"):
    return f"matmul/{variant}/{dt}/m={m},n={n},k={k}"


def att(dt, b, h, s, d, causal):
    return f"attention/fused{'.causal' if causal else ''}/{dt}/batch={b},heads={h},seq={s},d_k={d}"


# The transformer matmul shapes of vkformer bench (f16 >= 50% of PyTorch, not slower than f32).
TRANSFORMER = [("bert-base.qkv", 1024, 2304, 768), ("bert-base.out", 1024, 768, 768),
               ("bert-base.ffn1", 1024, 3072, 768), ("bert-base.ffn2", 1024, 768, 3072),
               ("bert-base.qkv", 4096, 2304, 768), ("bert-base.ffn1", 4096, 3072, 768),
               ("bert-base.ffn2", 4096, 768, 3072), ("d512.qkv", 1024, 1536, 512),
               ("d512.ffn1", 1024, 2048, 512), ("d512.ffn2", 1024, 512, 2048),
               ("minilm.qkv", 4096, 1152, 384), ("minilm.out", 4096, 384, 384),
               ("minilm.ffn1", 4096, 1536, 384), ("minilm.ffn2", 4096, 384, 1536)]


def figures(smoke):
    """(figure, kind, args): `kind` says how the row is computed; in smoke runs the ids are the
    small shapes the smoke measures (same rows, same targets)."""
    f = []
    s = smoke
    f.append(("Every test passes on the driver, validation + sync validation", "tests", {}))
    f.append(("f16 matmul 4096^3 >= 70% of torch.matmul", "torch_speed",
              {"id": mm("f16", *(256,) * 3) if s else mm("f16", 4096, 4096, 4096), "bound": 0.70}))
    f.append(("f32 matmul 4096^3 (reported)", "torch_speed",
              {"id": mm("f32", *(256,) * 3) if s else mm("f32", 4096, 4096, 4096), "bound": None}))
    for v, m, n, k in TRANSFORMER:
        f.append((f"f16 {v} {m}x{n}x{k} >= 50% of PyTorch", "torch_speed",
                  {"id": mm("f16", m, n, k, v), "bound": 0.50}))
        f.append((f"f16 {v} {m}x{n}x{k} not slower than vkformer's f32", "f16_vs_f32",
                  {"f16": mm("f16", m, n, k, v), "f32": mm("f32", m, n, k, v)}))
    for wt in ("q4_0", "q4_k"):
        qid = ("matmul_q/smollm2.ffn_up/q4_1/m=1,n=1536,k=576" if s
               else f"matmul_q/ffn-large/{wt}/m=512,n=4096,k=14336")
        f.append((f"{wt.upper()} prompt GEMM 4096x512x14336 >= 2x ggml-vulkan", "ggml_op",
                  {"id": qid, "type": wt, "m": 4096, "n": 512, "k": 14336, "bound": 2.0}))
        f.append((f"{wt.upper()} prompt GEMM 4096x512x14336 vs PyTorch f16 F.linear (reported)", "torch_speed",
                  {"id": qid, "bound": None}))
    for b, h, d in ((1, 8, 64), (1, 16, 128)):
        for causal in (False, True):
            if s:
                aid = att("f32", 1, 8, 128, 64, False)
            else:
                aid = att("f16", b, h, 2048, d, causal)
            f.append((f"fused attention f16 b{b} h{h} d{d} seq 2048{' causal' if causal else ''} >= 70% of SDPA",
                      "torch_speed", {"id": aid, "bound": 0.70}))
    rows = {"softmax": ("softmax/masked/{dt}/rows=24576,length=2048", "softmax/masked/f32/rows=12288,length=128"),
            "layer norm": ("layer_norm/affine/{dt}/rows=8192,d=4096", "layer_norm/affine/f32/rows=1024,d=512"),
            "RMS norm": ("rms_norm/weight/{dt}/rows=8192,d=4096", "rms_norm/weight/f32/rows=4096,d=4096")}
    for op, (full, small) in rows.items():
        for dt in ("f32", "f16"):
            f.append((f"{op} {dt} >= 64 MiB >= 70% of the measured copy bandwidth", "copy_share",
                      {"id": small if s else full.format(dt=dt), "bound": 0.70}))
    f.append(("BERT-base encoder layer f16 b8 s512 >= 70% of PyTorch eager", "torch_speed",
              {"id": "encoder_layer/bert-base/f32/batch=1,seq=128,d_model=768,heads=12,ff=3072" if s else
               "encoder_layer/bert-base/f16/batch=8,seq=512,d_model=768,heads=12,ff=3072", "bound": 0.70}))
    f.append(("all-MiniLM-L6-v2 batch 32x128 >= 70% of sentence-transformers", "torch_speed",
              {"id": "sentence_embedding/all-MiniLM-L6-v2/f32/batch=1,seq=16" if s else
               "sentence_embedding/all-MiniLM-L6-v2/f16/batch=32,seq=128", "bound": 0.70}))
    for dt in ("f16", "f32"):
        f.append((f"KV-cached decoder step d512 6 layers ctx 1024 {dt} <= 50% of eager latency", "torch_latency",
                  {"id": ("decoder_step/d512.kv-cache/f32/batch=1,context=128,src=128,d_model=512,layers=6" if s else
                          f"decoder_step/d512.kv-cache/{dt}/batch=1,context=1024,src=128,d_model=512,layers=6"),
                   "bound": 0.50}))
    f.append(("SmolLM2-135M Q4_1 tg128 >= 2x ggml-vulkan", "llm_vs_ggml",
              {"model": "smollm2", "test": "tg", "bound": 2.0}))
    f.append(("SmolLM2-135M Q4_1 pp512 >= 1.5x ggml-vulkan", "llm_vs_ggml",
              {"model": "smollm2", "test": "pp", "bound": 1.5}))
    f.append(("Llama-3.2-1B-shaped Q4_K generation >= 60% of the copy-bandwidth bound", "llm_vs_bound",
              {"model": "llama1b", "bound": 0.60}))
    return f


def load(path):
    if not path:
        return None
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError) as e:
        return {"_error": f"{path}: {e}"}


def read_jsonl(path):
    """The complete lines of a JSON-lines file (a last line cut off by a kill is dropped)."""
    try:
        with open(path, "rb") as fh:
            lines = fh.read().split(b"\n")
    except OSError:
        return []
    out = []
    for line in lines[:-1]:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def merge_bench(docs):
    """vkformer bench documents of one run (the run splits the benchmarks in groups): one device
    entry with every group's results and the peaks that were measured."""
    docs = [d for d in docs if isinstance(d, dict) and d.get("devices")]
    if not docs:
        return None
    first = dict(docs[0]["devices"][0])
    first["results"] = [r for d in docs for r in d["devices"][0].get("results", [])]
    for d in docs:
        peak = d["devices"][0].get("peak") or {}
        if peak.get("copy_gbps"):
            first["peak"] = peak
    return {"devices": [first]}


def from_out_dir(d):
    """The single-file inputs, from what gpu_run.sh streamed into `d`."""
    steps = read_jsonl(os.path.join(d, "steps.jsonl"))
    by_key = {}
    for s in steps:
        for k, v in s.items():
            if k not in ("step", "status", "seconds", "elapsed"):
                by_key.setdefault(k, []).append(v)
    suites = read_jsonl(os.path.join(d, "tests.jsonl"))
    tests_step = next((s for s in steps if s["step"] == "tests"), None)
    tests = None
    if suites or tests_step:
        tests = {"suites": suites, "failed": [t["suite"] for t in suites if t.get("exit") != 0],
                 "finished": bool(tests_step), "status": tests_step["status"] if tests_step else None}
    torch_lines = read_jsonl(os.path.join(d, "torch.jsonl"))
    th = None
    if torch_lines:
        dev = [t["device"] for t in torch_lines if "device" in t]
        th = {"device": dev[-1] if dev else {}, "results": [t for t in torch_lines if "id" in t]}
    ggml = by_key.get("llama_bench", [None])[-1]
    return {"vkformer": merge_bench(by_key.get("vkformer", [])), "torch": th, "tests": tests,
            "smollm2": by_key.get("smollm2", [None])[-1], "llama1b": by_key.get("llama1b", [None])[-1],
            "ggml": ggml if isinstance(ggml, list) else None,
            "ggml_ops": by_key.get("test_backend_ops", [None])[-1],
            "tune": by_key.get("tune", [None])[-1], "devices": by_key.get("devices", [None])[-1],
            "setup": by_key.get("setup", [None])[-1], "bundle": by_key.get("bundle", [None])[-1],
            "steps": [{"step": s["step"], "status": s["status"], "seconds": s["seconds"]} for s in steps]}


class Inputs:
    def __init__(self, a, docs):
        self.a = a
        self.vk_doc = docs["vkformer"]
        self.th_doc = docs["torch"]
        self.vk, self.peak, self.vk_device = {}, {}, {}
        if self.vk_doc and "devices" in self.vk_doc and self.vk_doc["devices"]:
            dev = self.vk_doc["devices"][0]
            self.vk = {r["id"]: r for r in dev.get("results", []) if r.get("status") == "ok"}
            self.vk_all = {r["id"]: r for r in dev.get("results", [])}
            self.peak = dev.get("peak", {})
            self.vk_device = dev.get("device", {})
        else:
            self.vk_all = {}
        self.th = {}
        self.th_info = {}
        if self.th_doc and "results" in self.th_doc:
            self.th = {r["id"]: r for r in self.th_doc["results"] if r.get("status") == "ok"}
            self.th_all = {r["id"]: r for r in self.th_doc["results"]}
            self.th_info = self.th_doc.get("device", {})
        else:
            self.th_all = {}
        self.tests = docs["tests"]
        self.llm = {"smollm2": docs["smollm2"], "llama1b": docs["llama1b"]}
        self.ggml = docs["ggml"]
        self.ggml_ops = docs.get("ggml_ops")

    def vk_missing(self, bid):
        if not self.vk_doc:
            return "no vkformer bench results (the bench step did not run or failed)"
        r = self.vk_all.get(bid)
        if r is None:
            return f"vkformer bench has no {bid}"
        return f"vkformer {r.get('status')}: {(r.get('reason') or '')[:90]}"

    def torch_missing(self, bid):
        if not self.th_doc:
            return "no PyTorch results (no torch here, or the step failed)"
        if not self.th_info.get("cuda_available"):
            cuda = "no CUDA"
        else:
            cuda = ""
        r = self.th_all.get(bid)
        if r is None:
            return (cuda + ": " if cuda else "") + f"PyTorch has no {bid}"
        return (cuda + ": " if cuda else "") + f"PyTorch {r.get('status')}: {(r.get('reason') or '')[:80]}"


def fmt_us(us):
    return f"{us / 1000:.3f} ms" if us >= 1000 else f"{us:.1f} us"


def row_for(inp, kind, args):
    """(vkformer, reference, ratio, holds) as texts; holds is 'yes', 'no', '-' or 'not measured: why'."""
    vk, th = inp.vk, inp.th
    torch_label = "PyTorch" + ("" if inp.th_info.get("cuda_available") else " (CPU, no CUDA)")
    if kind == "tests":
        t = inp.tests
        if not t or "_error" in t:
            return "-", "-", "-", "not measured: the tests step did not run"
        n, bad = len(t["suites"]), t["failed"]
        if t.get("finished") is False:
            return f"{n - len(bad)} of {n} suites pass", "-", "-", \
                "not measured: the tests step did not finish" + (" (failed: " + ", ".join(bad) + ")" if bad else "")
        if t.get("status") not in (None, "ok") and not bad:
            return f"{n} of {n} suites pass", "-", "-", f"no: the tests step ended '{t['status']}'"
        return f"{n - len(bad)} of {n} suites pass", "-", "-", "yes" if not bad else "no: " + ", ".join(bad)
    if kind in ("torch_speed", "torch_latency"):
        bid, bound = args["id"], args["bound"]
        if bid not in vk:
            return "-", "-", "-", "not measured: " + inp.vk_missing(bid)
        if bid not in th:
            return fmt_us(vk[bid]["median_us"]), "-", "-", "not measured: " + inp.torch_missing(bid)
        v, t = vk[bid]["median_us"], th[bid]["median_us"]
        ref = f"{fmt_us(t)} ({torch_label})"
        if kind == "torch_speed":
            ratio = t / v
            holds = "-" if bound is None else ("yes" if ratio >= bound else "no")
            return fmt_us(v), ref, f"{ratio * 100:.0f}% of PyTorch's speed", holds
        ratio = v / t
        return fmt_us(v), ref, f"{ratio * 100:.0f}% of PyTorch's latency", "yes" if ratio <= args["bound"] else "no"
    if kind == "f16_vs_f32":
        a, b = args["f16"], args["f32"]
        if a not in vk or b not in vk:
            miss = a if a not in vk else b
            return "-", "-", "-", "not measured: " + inp.vk_missing(miss)
        v16, v32 = vk[a]["median_us"], vk[b]["median_us"]
        return fmt_us(v16), f"{fmt_us(v32)} (vkformer f32)", f"{v32 / v16:.2f}x f32's speed", \
            "yes" if v16 <= v32 else "no"
    if kind == "copy_share":
        bid = args["id"]
        if bid not in vk:
            return "-", "-", "-", "not measured: " + inp.vk_missing(bid)
        copy = inp.peak.get("copy_gbps") or 0
        gbps = vk[bid]["gbps"]
        if copy <= 0:
            return f"{gbps:.1f} GB/s", "-", "-", "not measured: no copy bandwidth (bench ran with --no-peak)"
        share = gbps / copy
        return f"{gbps:.1f} GB/s", f"{copy:.1f} GB/s (vkformer's copy probe)", f"{share * 100:.0f}% of copy", \
            "yes" if share >= args["bound"] else "no"
    if kind == "ggml_op":
        bid = args["id"]
        if bid not in vk:
            return "-", "-", "-", "not measured: " + inp.vk_missing(bid)
        v = vk[bid]["median_us"]
        ops = (inp.ggml_ops or {}).get("ops") or []
        want = {"type_a": args["type"].lower(), "m": str(args["m"]), "n": str(args["n"]), "k": str(args["k"])}
        match = [o for o in ops if o.get("op") == "MUL_MAT" and
                 all(str(o["params"].get(k, "")).lower() == x for k, x in want.items())]
        if not match:
            why = "ggml-vulkan's test-backend-ops was not carried or did not run" if not ops else \
                f"test-backend-ops has no MUL_MAT {want}"
            return fmt_us(v), "-", "-", "not measured: " + why
        g = match[0]["us_per_run"]
        ratio = g / v
        return fmt_us(v), f"{fmt_us(g)} (ggml-vulkan test-backend-ops, same run)", f"{ratio:.2f}x ggml-vulkan's speed", \
            "yes" if ratio >= args["bound"] else "no"
    if kind == "llm_vs_ggml":
        doc = inp.llm.get(args["model"])
        if not doc or "llm" not in doc:
            return "-", "-", "-", "not measured: no vkformer bench --model result for " + args["model"]
        tests = {t["test"][:2]: t for t in doc["llm"]}
        t = tests.get(args["test"])
        if not t:
            return "-", "-", "-", f"not measured: no {args['test']} test in the run"
        ref, src = ggml_reference(inp.ggml, t["test"])
        if ref is None:
            return f"{t['avg_ts']:.1f} t/s ({t['test']})", "-", "-", "not measured: " + src
        ratio = t["avg_ts"] / ref
        return f"{t['avg_ts']:.1f} t/s ({t['test']})", f"{ref:.1f} t/s ({src})", f"{ratio:.2f}x", \
            "yes" if ratio >= args["bound"] else "no"
    if kind == "llm_vs_bound":
        doc = inp.llm.get(args["model"])
        if not doc or "llm" not in doc:
            return "-", "-", "-", "not measured: no vkformer bench --model result for " + args["model"]
        tg = [t for t in doc["llm"] if t["test"].startswith("tg")]
        copy = inp.peak.get("copy_gbps") or 0
        if not tg or copy <= 0 or not inp.a.llama1b_bytes:
            return "-", "-", "-", "not measured: needs a tg result, the copy bandwidth and the file size"
        bound_ts = copy * 1e9 / inp.a.llama1b_bytes
        share = tg[0]["avg_ts"] / bound_ts
        return f"{tg[0]['avg_ts']:.1f} t/s", f"{bound_ts:.1f} t/s ({copy:.0f} GB/s / {inp.a.llama1b_bytes / 2**20:.0f} MiB)", \
            f"{share * 100:.0f}% of the bound", "yes" if share >= args["bound"] else "no"
    return "-", "-", "-", f"not measured: unknown row kind {kind}"


def ggml_reference(ggml, test):
    """(t/s, source) of ggml-vulkan for `test` (pp512/tg128) from llama-bench -o json(l) in the
    same run, else (None, why)."""
    if isinstance(ggml, list):
        for r in ggml:
            n_p, n_g = r.get("n_prompt", 0), r.get("n_gen", 0)
            name = f"pp{n_p}" if n_p and not n_g else f"tg{n_g}"
            if name == test and "avg_ts" in r:
                return r["avg_ts"], "ggml-vulkan, same run"
    if not ggml:
        return None, "ggml-vulkan's llama-bench was not carried or did not run"
    return None, f"llama-bench has no {test} result"


def write_atomically(path, text):
    """A file that is whole or absent: a run killed while writing it leaves the old one."""
    with open(path + ".part", "w") as fh:
        fh.write(text)
    os.replace(path + ".part", path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("positional", nargs="*", help="vkformer.json torch.json (older form)")
    for name in ("vkformer", "torch", "smollm2", "llama1b", "tests", "tune", "ggml", "devices", "steps",
                 "markdown", "json", "out-dir"):
        p.add_argument("--" + name)
    p.add_argument("--llama1b-bytes", type=int, default=0, help="the Llama-3.2-1B-shaped file's size")
    p.add_argument("--elapsed", type=float, default=0)
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args()
    if a.positional:
        a.vkformer = a.vkformer or a.positional[0]
        if len(a.positional) > 1:
            a.torch = a.torch or a.positional[1]
    if a.out_dir:
        docs = from_out_dir(a.out_dir)
    else:
        docs = {k: load(getattr(a, k)) for k in ("vkformer", "torch", "tests", "smollm2", "llama1b", "ggml", "tune",
                                                 "devices")}
        docs.update(ggml_ops=None, setup=None, bundle=None, steps=None)
    inp = Inputs(a, docs)

    lines = []
    d = inp.vk_device
    th = inp.th_info
    lines.append(f"# vkformer GPU run{' (smoke, small sizes)' if a.smoke else ''}\n")
    lines.append(f"- vkformer device: {d.get('name', '-')} ({d.get('driver', '')} {d.get('driver_version', '')}, "
                 f"Vulkan {d.get('api_version', '-')})")
    if th:
        lines.append(f"- PyTorch {th.get('torch')} on {th.get('name')}"
                     f"{'' if th.get('cuda_available') else ' (no CUDA: CPU timings)'}")
    else:
        lines.append("- PyTorch: not run (no torch here, or its step failed): no CUDA figures")
    if inp.peak:
        lines.append(f"- peaks: FMA {inp.peak.get('fma_gflops', 0):.0f} GFLOP/s, copy {inp.peak.get('copy_gbps', 0):.1f} GB/s")
    if a.elapsed:
        lines.append(f"- whole run: {a.elapsed:.0f} s")
    bundle = docs.get("bundle") or {}
    if bundle.get("commit"):
        lines.append(f"- bundle: commit {bundle['commit'][:10]}"
                     f"{' + %d uncommitted files' % bundle['uncommitted_files'] if bundle.get('uncommitted_files') else ''}, "
                     f"made {bundle.get('made')}, ggml-vulkan: {' '.join(bundle.get('peer') or []) or 'not carried'}")
    setup = docs.get("setup") or {}
    if setup.get("layer"):
        lines.append(f"- validation layer: {setup['layer'].get('version')} (carried; passed over: "
                     f"{', '.join(str(l.get('version')) for l in setup.get('layers_rejected', [])) or 'none'})")
    lines.append("")
    lines.append("| figure (issues 22, 41) | vkformer | reference | ratio | holds | measured at |")
    lines.append("|---|---|---|---|---|---|")
    rows = []
    problems = 0
    for what, kind, args in figures(a.smoke):
        try:
            v, ref, ratio, holds = row_for(inp, kind, args)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            v, ref, ratio, holds = "-", "-", "-", f"not measured: malformed input ({type(e).__name__}: {e})"
            problems += 1
        rows.append({"figure": what, "kind": kind, "args": args, "vkformer": v, "reference": ref,
                     "ratio": ratio, "holds": holds})
        at = args.get("id") or args.get("f16") or (args.get("model", "") + " " + args.get("test", "")).strip() or "-"
        lines.append(f"| {what} | {v} | {ref} | {ratio} | {holds} | `{at}` |")

    tune = docs["tune"]
    if tune and "tunables" in tune:
        lines.append("\n## vkformer tune\n")
        lines.append(f"{tune.get('took_s', 0):.1f} s of a {tune['settings']['budget_s']:.0f} s budget.\n")
        lines.append("| tunable | static | kept | static ms | kept ms | result |\n|---|---|---|---|---|---|")
        for t in tune["tunables"]:
            static = t["candidates"][0]["value"] if t.get("candidates") else "-"
            lines.append(f"| {t['id']} | {static} | {t.get('winner') or '-'} | {t['static_us'] / 1000:.3f} | "
                         f"{t['winner_us'] / 1000:.3f} | {t['status']}: {t['note']} |")

    steps = docs["steps"] or []
    if a.steps and os.path.exists(a.steps):
        for line in open(a.steps):
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3:
                steps.append({"step": parts[0], "status": parts[1], "seconds": int(parts[2])})
    if steps:
        lines.append("\n## Steps\n\n| step | status | seconds |\n|---|---|---|")
        lines += [f"| {s['step']} | {s['status']} | {s['seconds']} |" for s in steps]

    # Everything joined by id, for bench/RESULTS.md.
    both = sorted(set(inp.vk) & set(inp.th))
    if both:
        lines.append("\n## Every benchmark measured by both\n\n| benchmark | vkformer | PyTorch | speed vs PyTorch |\n|---|---|---|---|")
        for bid in both:
            v, t = inp.vk[bid]["median_us"], inp.th[bid]["median_us"]
            lines.append(f"| `{bid}` | {fmt_us(v)} | {fmt_us(t)} | {t / v:.2f}x |")

    text = "\n".join(lines) + "\n"
    print(text)
    if a.markdown:
        write_atomically(a.markdown, text)
    if a.json:
        doc = {"rows": rows, "steps": steps, "smoke": a.smoke, "elapsed_s": a.elapsed,
               "inputs": {"vkformer": inp.vk_doc, "torch": inp.th_doc, "tests": inp.tests, "tune": tune,
                          "devices": docs["devices"], "setup": docs.get("setup"), "bundle": docs.get("bundle"), "smollm2": inp.llm["smollm2"],
                          "llama1b": inp.llm["llama1b"], "ggml": inp.ggml, "ggml_ops": inp.ggml_ops}}
        write_atomically(a.json, json.dumps(doc, indent=1))
    expected = len(figures(a.smoke))
    if len(rows) != expected or problems:
        print(f"compare.py: {len(rows)} rows of {expected}, {problems} malformed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
