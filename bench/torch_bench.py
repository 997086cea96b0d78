#!/usr/bin/env python3
"""PyTorch timings of the workloads `vkformer bench` measures, under the same benchmark ids, so
bench/compare.py can put the two side by side (run both in one command on one GPU).

Times come from torch.cuda.Event pairs around each run (or wall clock on the CPU), after warm-up;
median, min and max over repeats. PyTorch runs "eager": modules in eval mode under
torch.inference_mode(), which allows its fused fast paths (as a user would run them).

  python3 bench/torch_bench.py --json torch.json            # CUDA if available, else CPU
  python3 bench/torch_bench.py --quick --device cpu         # a smaller set
  python3 bench/torch_bench.py --smoke                      # tiny shapes: the smoke run's
  python3 bench/torch_bench.py --issue22 --json torch.json  # what bench/compare.py's GPU table needs
  python3 bench/torch_bench.py --filter 'minilm|sentence_embedding' --warmup 1 --repeats 3
  python3 bench/torch_bench.py --issue22 --jsonl torch.jsonl  # a line per figure as it is measured

--jsonl appends the device as one line, then each figure as its own line the moment it is
measured (the GPU run streams them under $OUT, so a run cut short keeps what it timed).

Row ops (softmax, layer norm, RMS norm) are also timed at >= 64 MiB next to a plain copy of the
same bytes (`copy/...`), and the quantized-weight shapes of `vkformer bench` (`matmul_q/...`) as
f16 F.linear: PyTorch has no ggml blocks, so that is the dense equivalent.
"""
import argparse
import json
import math
import os
import re
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "f16": torch.float16}


def timer(device, fn, warmup, repeats, budget_s):
    """Median/min/max microseconds of fn() after warm-up, at most `repeats` runs or `budget_s`."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    for _ in range(repeats):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
        if time.perf_counter() - start > budget_s:
            break
    return {"median_us": statistics.median(times), "min_us": min(times), "max_us": max(times),
            "repeats": len(times)}


def shape_id(name, variant, dtype, shape):
    return f"{name}/{variant}/{dtype}/" + ",".join(f"{k}={v}" for k, v in shape)


def rms_norm(x, w, eps=1e-5):
    if hasattr(F, "rms_norm"):  # PyTorch >= 2.4
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * w


def sdpa(q, k, v, causal):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # PyTorch < 2.0
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


class CachedDecoder(nn.Module):
    """One token through nn.TransformerDecoderLayer weights with K/V caches, written out in
    eager PyTorch (nn.TransformerDecoder has no cache): what vkformer's decoder_step does."""

    def __init__(self, layers, heads, context, memory_len, batch, dtype, device):
        super().__init__()
        self.layers = layers
        self.h = heads
        e = layers[0].self_attn.embed_dim
        self.pos = context - 1
        mk = lambda: torch.randn(batch, heads, context, e // heads, dtype=dtype, device=device)
        mm = lambda: torch.randn(batch, heads, memory_len, e // heads, dtype=dtype, device=device)
        self.caches = [(mk(), mk()) for _ in layers]
        self.cross = [(mm(), mm()) for _ in layers]

    def heads(self, x):
        b, s, e = x.shape
        return x.view(b, s, self.h, e // self.h).transpose(1, 2)

    def forward(self, x):
        for layer, (kc, vc), (km, vm) in zip(self.layers, self.caches, self.cross):
            a = layer.self_attn
            q, k, v = F.linear(x, a.in_proj_weight, a.in_proj_bias).chunk(3, dim=-1)
            kc[:, :, self.pos] = self.heads(k)[:, :, 0]
            vc[:, :, self.pos] = self.heads(v)[:, :, 0]
            o = sdpa(self.heads(q), kc, vc, False).transpose(1, 2).flatten(2)
            x = layer.norm1(x + a.out_proj(o))
            c = layer.multihead_attn
            e = x.shape[-1]
            qc = F.linear(x, c.in_proj_weight[:e], c.in_proj_bias[:e])
            o = sdpa(self.heads(qc), km, vm, False).transpose(1, 2).flatten(2)
            x = layer.norm2(x + c.out_proj(o))
            x = layer.norm3(x + layer.linear2(F.relu(layer.linear1(x))))
        return x


def minilm_dir():
    """Where scripts/fetch_minilm.sh installs all-MiniLM-L6-v2 (or $VKFORMER_MINILM_DIR), as
    vkformer bench looks for it."""
    if os.environ.get("VKFORMER_MINILM_DIR"):
        return os.environ["VKFORMER_MINILM_DIR"]
    cache = os.environ.get("VKFORMER_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vkformer")
    return os.path.join(cache, "all-MiniLM-L6-v2", "model")


def sentence_embedding(bsz, s, t, device):
    """all-MiniLM-L6-v2 in sentence-transformers, token ids in (no tokenizer, as vkformer bench
    times it): BertModel, mean pooling, Normalize; every token real, a fixed seed."""
    path = minilm_dir()
    if not os.path.isfile(os.path.join(path, "model.safetensors")):
        raise RuntimeError(f"run scripts/fetch_minilm.sh: all-MiniLM-L6-v2 is not in {path}")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise RuntimeError(f"sentence-transformers is not installed ({e})")
    model = SentenceTransformer(path, device=str(device)).to(t).eval()
    g = torch.Generator().manual_seed(42)
    ids = torch.randint(1996, 30522, (bsz, s), generator=g)
    ids[:, 0], ids[:, -1] = 101, 102
    features = {"input_ids": ids.to(device), "attention_mask": torch.ones_like(ids).to(device),
                "token_type_ids": torch.zeros_like(ids).to(device)}
    return lambda: model(dict(features))["sentence_embedding"]


def benchmarks(device, quick):
    """(id, make) pairs: make() returns the function to time."""
    out = []

    def add(name, variant, dtype, shape, make):
        out.append((shape_id(name, variant, dtype, shape), make))

    dts = ["f32", "f16"] if device.type == "cuda" else ["f32"]  # CPU half matmuls are slow
    squares = [256, 1024] if quick else [256, 512, 1024, 2048, 4096]
    for dt in dts:
        t = DTYPES[dt]
        for n in squares:
            def make(n=n, t=t):
                a = torch.randn(n, n, dtype=t, device=device)
                b = torch.randn(n, n, dtype=t, device=device)
                return lambda: torch.matmul(a, b)
            add("matmul", "square", dt, [("m", n), ("n", n), ("k", n)], make)
        linears = [("bert-base.qkv", 1024, 2304, 768), ("bert-base.ffn1", 1024, 3072, 768),
                   ("bert-base.ffn2", 1024, 768, 3072), ("bert-base.out", 1024, 768, 768),
                   ("d512.qkv", 1024, 1536, 512), ("d512.ffn1", 1024, 2048, 512),
                   ("d512.ffn2", 1024, 512, 2048)]
        if not quick:
            linears += [("bert-base.qkv", 4096, 2304, 768), ("bert-base.ffn1", 4096, 3072, 768),
                        ("bert-base.ffn2", 4096, 768, 3072)]
        for variant, m, n, k in linears:
            def make(m=m, n=n, k=k, t=t):
                x = torch.randn(m, k, dtype=t, device=device)
                w = torch.randn(n, k, dtype=t, device=device)
                b = torch.randn(n, dtype=t, device=device)
                return lambda: F.linear(x, w, b)
            add("matmul", variant, dt, [("m", m), ("n", n), ("k", k)], make)
        if not quick:
            def make(t=t):
                a = torch.randn(4096, 14336, dtype=t, device=device)
                b = torch.randn(14336, 512, dtype=t, device=device)
                return lambda: torch.matmul(a, b)
            add("matmul", "ffn-large", dt, [("m", 4096), ("n", 512), ("k", 14336)], make)

        seqs = [128, 512] if quick else [128, 512, 1024, 2048, 4096]
        for bsz, heads, dk in [(1, 8, 64), (8, 12, 64), (1, 16, 128)]:
            for s in seqs:
                for causal in (False, True):
                    def make(bsz=bsz, heads=heads, dk=dk, s=s, causal=causal, t=t):
                        q, k, v = (torch.randn(bsz, heads, s, dk, dtype=t, device=device) for _ in range(3))
                        return lambda: sdpa(q, k, v, causal)
                    variant = "fused.causal" if causal else "fused"
                    add("attention", variant, dt,
                        [("batch", bsz), ("heads", heads), ("seq", s), ("d_k", dk)], make)

        # A decoding step's attention over a long cache (grouped-query heads), as vkformer's
        # attention/decode benchmarks.
        if not quick:
            for heads, kv_heads, context, dk in [(32, 8, 4096, 64), (32, 8, 8192, 128)]:
                def make(heads=heads, kv_heads=kv_heads, context=context, dk=dk, t=t):
                    q = torch.randn(1, heads, 1, dk, dtype=t, device=device)
                    k, v = (torch.randn(1, kv_heads, context, dk, dtype=t, device=device)
                            for _ in range(2))
                    try:  # PyTorch >= 2.5 reads K/V per group in place
                        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                        return lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                    except (TypeError, AttributeError):
                        pass
                    g = heads // kv_heads
                    return lambda: sdpa(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                        False)
                add("attention", "decode", dt, [("batch", 1), ("heads", heads),
                                                ("kv_heads", kv_heads), ("context", context),
                                                ("d_k", dk)], make)

        enc = [(1, 128), (8, 128)] if quick else [(1, 128), (1, 512), (8, 128), (8, 512)]
        for bsz, s in enc:
            def make(bsz=bsz, s=s, t=t):
                layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu",
                                                   batch_first=True).to(device, t).eval()
                x = torch.randn(bsz, s, 768, dtype=t, device=device)
                return lambda: layer(x)
            add("encoder_layer", "bert-base", dt,
                [("batch", bsz), ("seq", s), ("d_model", 768), ("heads", 12), ("ff", 3072)], make)

        for bsz in ([1] if quick else [1, 8]):
            def make(bsz=bsz, t=t):
                model = nn.Transformer(512, 8, 6, 6, 2048, dropout=0.0, batch_first=True).to(device, t).eval()
                src = torch.randn(bsz, 128, 512, dtype=t, device=device)
                tgt = torch.randn(bsz, 128, 512, dtype=t, device=device)
                mask = torch.triu(torch.full((128, 128), float("-inf"), device=device), 1).to(t)
                return lambda: model(src, tgt, tgt_mask=mask)
            add("transformer", "d512.6+6", dt,
                [("batch", bsz), ("src", 128), ("tgt", 128), ("d_model", 512), ("layers", 12)], make)

        # all-MiniLM-L6-v2's projections at its benchmarked token counts, then the whole model.
        for tokens in (32 * 128, 16):
            for variant, n, k in [("minilm.qkv", 1152, 384), ("minilm.out", 384, 384),
                                  ("minilm.ffn1", 1536, 384), ("minilm.ffn2", 384, 1536)]:
                def make(m=tokens, n=n, k=k, t=t):
                    x = torch.randn(m, k, dtype=t, device=device)
                    w = torch.randn(n, k, dtype=t, device=device)
                    b = torch.randn(n, dtype=t, device=device)
                    return lambda: F.linear(x, w, b)
                add("matmul", variant, dt, [("m", tokens), ("n", n), ("k", k)], make)
        for bsz, s in [(32, 128), (1, 16)]:
            add("sentence_embedding", "all-MiniLM-L6-v2", dt, [("batch", bsz), ("seq", s)],
                lambda bsz=bsz, s=s, t=t: sentence_embedding(bsz, s, t, device))

        for context in ([128] if quick else [128, 512, 1024, 2048]):
            def make(context=context, t=t):
                layers = nn.ModuleList(
                    nn.TransformerDecoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
                    for _ in range(6)).to(device, t).eval()
                dec = CachedDecoder(layers, 8, context, 128, 1, t, device)
                x = torch.randn(1, 1, 512, dtype=t, device=device)
                return lambda: dec(x)
            add("decoder_step", "d512.kv-cache", dt,
                [("batch", 1), ("context", context), ("src", 128), ("d_model", 512), ("layers", 6)], make)
        # Row ops as vkformer bench runs them: masked softmax over attention scores, layer norm
        # and RMS norm, at the sizes of >= 64 MiB the GPU issue asks for, and a copy of the same
        # bytes (what "% of the copy bandwidth" is measured against here).
        for bh, s in ([(96, 128)] if quick else [(96, 128), (12, 2048), (12, 4096)]):
            def make(bh=bh, s=s, t=t):
                x = torch.randn(bh, s, s, dtype=t, device=device)
                mask = torch.triu(torch.full((s, s), float("-inf"), device=device), 1).to(t)
                return lambda: torch.softmax(x * 0.125 + mask, -1)
            add("softmax", "masked", dt, [("rows", bh * s), ("length", s)], make)
        norms = [(1024, 512)] if quick else [(1024, 512), (4096, 4096), (8192, 4096)]
        for rows, d in norms:
            def make(rows=rows, d=d, t=t):
                x = torch.randn(rows, d, dtype=t, device=device)
                g, b = torch.ones(d, dtype=t, device=device), torch.zeros(d, dtype=t, device=device)
                return lambda: F.layer_norm(x, (d,), g, b)
            add("layer_norm", "affine", dt, [("rows", rows), ("d", d)], make)
            def make(rows=rows, d=d, t=t):
                x = torch.randn(rows, d, dtype=t, device=device)
                w = torch.ones(d, dtype=t, device=device)
                return lambda: rms_norm(x, w)
            add("rms_norm", "weight", dt, [("rows", rows), ("d", d)], make)
        for mib in ([8] if quick else [64, 256]):
            def make(mib=mib, t=t):
                n = mib * 2**20 // torch.tensor([], dtype=t).element_size()
                x, y = torch.randn(n, dtype=t, device=device), torch.empty(n, dtype=t, device=device)
                return lambda: y.copy_(x)
            add("copy", "plain", dt, [("mib", mib)], make)

    # vkformer bench's quantized-weight linears (matmul_q) as dense f16 (f32 on a CPU) F.linear.
    qt = DTYPES["f16" if device.type == "cuda" else "f32"]
    quant = [("smollm2.ffn_up", "q4_1", 1, 1536, 576), ("smollm2.ffn_up", "q4_1", 128, 1536, 576)]
    if not quick:
        quant += [("smollm2.ffn_up", "q4_1", 512, 1536, 576), ("smollm2.ffn_down", "q4_1", 512, 576, 1536),
                  ("llama1b.ffn_up", "q4_k", 1, 8192, 2048), ("llama1b.ffn_up", "q4_k", 128, 8192, 2048),
                  ("ffn-large", "q4_0", 512, 4096, 14336), ("ffn-large", "q4_k", 512, 4096, 14336)]
    for variant, wt, m, n, k in quant:
        def make(m=m, n=n, k=k):
            x = torch.randn(m, k, dtype=qt, device=device)
            w = torch.randn(n, k, dtype=qt, device=device) * 0.05
            return lambda: F.linear(x, w)
        add("matmul_q", variant, wt, [("m", m), ("n", n), ("k", k)], make)
    return out


def smoke_benchmarks(device):
    """Tiny shapes with the smoke run's vkformer ids (bench --quick), any device, in seconds."""
    out = []

    def add(name, variant, dtype, shape, make):
        out.append((shape_id(name, variant, dtype, shape), make))

    t = torch.float32
    def mm(n=256):
        a, b = torch.randn(n, n, dtype=t, device=device), torch.randn(n, n, dtype=t, device=device)
        return lambda: torch.matmul(a, b)
    add("matmul", "square", "f32", [("m", 256), ("n", 256), ("k", 256)], mm)
    def att():
        q, k, v = (torch.randn(1, 8, 128, 64, dtype=t, device=device) for _ in range(3))
        return lambda: sdpa(q, k, v, False)
    add("attention", "fused", "f32", [("batch", 1), ("heads", 8), ("seq", 128), ("d_k", 64)], att)
    def sm():
        x = torch.randn(96, 128, 128, dtype=t, device=device)
        mask = torch.triu(torch.full((128, 128), float("-inf"), device=device), 1)
        return lambda: torch.softmax(x * 0.125 + mask, -1)
    add("softmax", "masked", "f32", [("rows", 96 * 128), ("length", 128)], sm)
    def ln():
        x = torch.randn(1024, 512, dtype=t, device=device)
        return lambda: F.layer_norm(x, (512,))
    add("layer_norm", "affine", "f32", [("rows", 1024), ("d", 512)], ln)
    def q():
        x, w = torch.randn(1, 576, device=device), torch.randn(1536, 576, device=device)
        return lambda: F.linear(x, w)
    add("matmul_q", "smollm2.ffn_up", "q4_1", [("m", 1), ("n", 1536), ("k", 576)], q)
    def rms():
        x, w = torch.randn(4096, 4096, device=device), torch.ones(4096, device=device)
        return lambda: rms_norm(x, w)
    add("rms_norm", "weight", "f32", [("rows", 4096), ("d", 4096)], rms)
    def enc():
        layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu",
                                           batch_first=True).to(device).eval()
        x = torch.randn(1, 128, 768, device=device)
        return lambda: layer(x)
    add("encoder_layer", "bert-base", "f32",
        [("batch", 1), ("seq", 128), ("d_model", 768), ("heads", 12), ("ff", 3072)], enc)
    def dec():
        layers = nn.ModuleList(nn.TransformerDecoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
                               for _ in range(6)).to(device).eval()
        d = CachedDecoder(layers, 8, 128, 128, 1, t, device)
        x = torch.randn(1, 1, 512, device=device)
        return lambda: d(x)
    add("decoder_step", "d512.kv-cache", "f32",
        [("batch", 1), ("context", 128), ("src", 128), ("d_model", 512), ("layers", 6)], dec)
    return out


# What bench/compare.py's table for the GPU issue (issue 22) reads: --issue22 keeps these ids.
ISSUE22 = (r"^(matmul/(square/f(16|32)/m=4096|bert-base|d512|minilm|ffn-large)|matmul_q/|"
           r"attention/fused.*seq=2048|softmax/masked/.*length=(2048|4096)|layer_norm/affine/.*d=4096|"
           r"rms_norm/|copy/|encoder_layer/bert-base/.*batch=8,seq=512|"
           r"decoder_step/d512.kv-cache/.*context=1024|sentence_embedding/.*batch=32)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", help="write the results here at the end")
    p.add_argument("--jsonl", help="append the device and then each result as it comes, a JSON line each")
    p.add_argument("--quick", action="store_true", help="a small subset")
    p.add_argument("--smoke", action="store_true", help="tiny shapes (the lavapipe smoke run)")
    p.add_argument("--issue22", action="store_true", help="only what the GPU issue's table needs")
    p.add_argument("--filter", default="", help="only ids matching this regular expression (re.search)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--budget", type=float, default=2.0, help="seconds of timed runs per benchmark")
    a = p.parse_args()
    device = torch.device(a.device)
    info = {"name": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cuda_available": torch.cuda.is_available(), "device": device.type,
            "timer": "CUDA events per run, median" if device.type == "cuda" else "wall clock per run, median"}
    print(f"PyTorch {torch.__version__} on {info['name']}")
    stream = open(a.jsonl, "a", buffering=1) if a.jsonl else None  # line-buffered: a line, a write
    if stream:
        stream.write(json.dumps({"device": info}) + "\n")
    results = []
    with torch.inference_mode():
        chosen = smoke_benchmarks(device) if a.smoke else benchmarks(device, a.quick)
        for bench_id, make in chosen:
            if a.filter and not re.search(a.filter, bench_id):
                continue
            if a.issue22 and not re.search(ISSUE22, bench_id):
                continue
            try:
                r = timer(device, make(), a.warmup, a.repeats, a.budget)
                r.update(id=bench_id, status="ok")
                print(f"{bench_id:80s} {r['median_us']:12.1f} us")
            except (RuntimeError, OSError, ImportError) as e:  # out of memory, no model, ...
                r = {"id": bench_id, "status": "skipped", "reason": str(e).splitlines()[0]}
                print(f"{bench_id:80s} skipped: {r['reason']}")
            results.append(r)
            if stream:
                stream.write(json.dumps(r) + "\n")
            if device.type == "cuda":
                torch.cuda.empty_cache()
    if stream:
        stream.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": info, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
