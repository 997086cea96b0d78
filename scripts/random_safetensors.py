#!/usr/bin/env python3
"""A model folder with random weights in a real one's safetensors layout, in pure Python: the
GPU run's all-MiniLM-L6-v2 (its 87 MiB of weights cannot travel; its small files can).

  random_safetensors.py pack MODEL_DIR SPEC.json.gz   # the header and the small files
  random_safetensors.py unpack SPEC.json.gz OUT_DIR   # the folder again, random weights

Weights: small uniform values (norm weights near 1), from a pool tiled into each tensor, so the
file takes a second. Speed only: the embeddings mean nothing.
"""
import argparse
import base64
import gzip
import json
import os
import random
import struct
import sys

SMALL = 2 << 20  # files up to this size travel as they are (config, vocabulary, tokenizer)
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4}


def pack(model_dir, out):
    with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    files = {}
    for root, _, names in os.walk(model_dir):
        for name in names:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, model_dir)
            if rel == "model.safetensors" or name.startswith(".") or os.path.getsize(path) > SMALL:
                continue
            files[rel] = base64.b64encode(open(path, "rb").read()).decode()
    with gzip.open(out, "wt") as f:
        json.dump({"header": header, "files": files}, f)
    print(f"wrote {out}: {len(header) - ('__metadata__' in header)} tensors, {len(files)} files")


def unpack(spec_path, out_dir, seed=0):
    spec = json.load(gzip.open(spec_path, "rt"))
    os.makedirs(out_dir, exist_ok=True)
    for rel, data in spec["files"].items():
        path = os.path.join(out_dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "wb").write(base64.b64decode(data))
    header = spec["header"]
    rng = random.Random(seed)
    pools = {}
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    with open(os.path.join(out_dir, "model.safetensors.tmp"), "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        base = 8 + len(blob)
        for name, t in sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                              key=lambda kv: kv[1]["data_offsets"][0]):
            begin, end = t["data_offsets"]
            dt = t["dtype"]
            if dt not in SIZES:
                sys.exit(f"{name}: dtype {dt} is not supported here")
            if dt not in pools:
                if dt in ("I64", "I32"):
                    pools[dt] = b"\0" * (1 << 20)  # position/type ids: zeros are valid
                else:
                    fmt = {"F32": "<f", "F16": "<e"}.get(dt, "<f")
                    vals = [struct.pack(fmt, rng.uniform(-0.05, 0.05)) for _ in range(1 << 16)]
                    pools[dt] = b"".join(v[2:] if dt == "BF16" else v for v in vals)
            f.seek(base + begin)
            left, pool = end - begin, pools[dt]
            if len(t["shape"]) == 1 and dt == "F32" and name.endswith("weight"):  # norms: near 1
                f.write(struct.pack("<%df" % (left // 4), *(1.0 + rng.uniform(-0.1, 0.1) for _ in range(left // 4))))
                continue
            while left:
                chunk = pool[:left]
                f.write(chunk)
                left -= len(chunk)
        f.truncate(base + max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"))
    os.replace(os.path.join(out_dir, "model.safetensors.tmp"), os.path.join(out_dir, "model.safetensors"))
    print(f"wrote {out_dir}: random weights in {spec_path}'s layout")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("model_dir")
    p.add_argument("spec")
    u = sub.add_parser("unpack")
    u.add_argument("spec")
    u.add_argument("out_dir")
    a = ap.parse_args()
    if a.cmd == "pack":
        pack(a.model_dir, a.spec)
    else:
        unpack(a.spec, a.out_dir)


if __name__ == "__main__":
    main()
