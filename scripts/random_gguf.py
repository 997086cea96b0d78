#!/usr/bin/env python3
"""Random-weight GGUF language models with a real model's shapes, types and tokenizer, in pure
Python (no numpy, no gguf package): for the GPU machine, where a model file is too large to
carry (at most 64 MiB travels) and the `gguf` package is missing.

  random_gguf.py spec SRC.gguf SPEC.json.gz       # the header of a real file: metadata, tensors
  random_gguf.py like SPEC.json.gz OUT.gguf [--layers N] [--vocab N]
  random_gguf.py llama32-1b OUT.gguf [--layers N] [--vocab N]

`spec` keeps every metadata key (the tokenizer included) and each tensor's name, type and shape.
`like` writes a file with that spec and random weights; `llama32-1b` one with Llama-3.2-1B's
shapes (16 blocks, width 2048, 32 query and 8 KV heads of 64, FFN 8192, vocabulary 128256, tied
output) in llama.cpp's Q4_K_M mix: Q4_K, with Q6_K for attn_v and ffn_down in the blocks
llama.cpp gives more bits and for the token table, and a synthetic byte-level vocabulary.
--layers and --vocab shrink either (the smoke run on lavapipe).

Quantized blocks are random bytes with small random scales, as bench/quant.cpp makes them, so
values look like a model's (|w| up to ~0.1); a pool of blocks is made once and tiled, which keeps
a 1 GB file to seconds. Speed only: the logits mean nothing.
"""
import argparse
import gzip
import json
import os
import random
import struct
import sys

# ggml types: number -> (name, elements per block, bytes per block)
TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
         6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 12: ("Q4_K", 256, 144),
         14: ("Q6_K", 256, 210), 30: ("BF16", 1, 2)}
BY_NAME = {v[0]: k for k, v in TYPES.items()}
# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


# ---- reading a header -------------------------------------------------------------------------

class Reader:
    def __init__(self, f):
        self.f = f

    def take(self, fmt):
        n = struct.calcsize(fmt)
        return struct.unpack(fmt, self.f.read(n))[0]

    def string(self):
        return self.f.read(self.take("<Q")).decode("utf-8", "surrogateescape")

    def value(self, vtype):
        if vtype == STR:
            return self.string()
        if vtype == ARR:
            sub, n = self.take("<I"), self.take("<Q")
            if sub == ARR:
                sys.exit("nested arrays are not supported")
            return [sub, [self.value(sub) for _ in range(n)]]
        return self.take(SCALAR[vtype])


def read_spec(path):
    with open(path, "rb") as f:
        r = Reader(f)
        if f.read(4) != b"GGUF":
            sys.exit(f"{path}: not a GGUF file")
        version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
        metadata = []
        for _ in range(n_kv):
            key, vtype = r.string(), r.take("<I")
            metadata.append([key, vtype, r.value(vtype)])
        tensors = []
        for _ in range(n_tensors):
            name, n_dims = r.string(), r.take("<I")
            ne = [r.take("<Q") for _ in range(n_dims)]
            ttype, _offset = r.take("<I"), r.take("<Q")
            tensors.append([name, TYPES[ttype][0] if ttype in TYPES else ttype, ne])
    return {"source": os.path.basename(path), "version": version, "metadata": metadata,
            "tensors": tensors}


# ---- a Llama-3.2-1B-shaped spec ---------------------------------------------------------------

def gpt2_byte_symbols():
    """GPT-2's printable stand-ins for the 256 bytes (bytes_to_unicode)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


def llama32_1b_spec(layers=16, vocab=128256):
    d, heads, kv_heads, ff = 2048, 32, 8, 8192
    tokens = gpt2_byte_symbols()
    tokens += [f"tok{i:06d}" for i in range(vocab - len(tokens) - 2)] + ["<|begin_of_text|>", "<|eot_id|>"]
    a = "llama"
    metadata = [
        ["general.architecture", STR, a], ["general.name", STR, "Llama-3.2-1B-shaped random Q4_K_M"],
        [f"{a}.block_count", U32, layers], [f"{a}.context_length", U32, 131072],
        [f"{a}.embedding_length", U32, d], [f"{a}.feed_forward_length", U32, ff],
        [f"{a}.attention.head_count", U32, heads], [f"{a}.attention.head_count_kv", U32, kv_heads],
        [f"{a}.rope.freq_base", F32, 500000.0], [f"{a}.attention.layer_norm_rms_epsilon", F32, 1e-5],
        [f"{a}.rope.dimension_count", U32, d // heads], [f"{a}.vocab_size", U32, vocab],
        ["tokenizer.ggml.model", STR, "gpt2"], ["tokenizer.ggml.pre", STR, "llama-bpe"],
        ["tokenizer.ggml.tokens", ARR, [STR, tokens]],
        ["tokenizer.ggml.token_type", ARR, [I32, [1] * (vocab - 2) + [3, 3]]],
        ["tokenizer.ggml.merges", ARR, [STR, []]],
        ["tokenizer.ggml.bos_token_id", U32, vocab - 2], ["tokenizer.ggml.eos_token_id", U32, vocab - 1],
    ]
    tensors = [["token_embd.weight", "Q6_K", [d, vocab]]]
    # llama.cpp's Q4_K_M: attn_v and ffn_down get Q6_K in the first and last eighth of the
    # blocks and in every third block between (use_more_bits).
    more = lambda i: i < layers // 8 or i >= 7 * layers // 8 or (i - layers // 8) % 3 == 2
    for i in range(layers):
        p, hi = f"blk.{i}.", "Q6_K" if more(i) else "Q4_K"
        tensors += [[p + "attn_norm.weight", "F32", [d]],
                    [p + "attn_q.weight", "Q4_K", [d, d]],
                    [p + "attn_k.weight", "Q4_K", [d, kv_heads * (d // heads)]],
                    [p + "attn_v.weight", hi, [d, kv_heads * (d // heads)]],
                    [p + "attn_output.weight", "Q4_K", [d, d]],
                    [p + "ffn_norm.weight", "F32", [d]],
                    [p + "ffn_gate.weight", "Q4_K", [d, ff]],
                    [p + "ffn_up.weight", "Q4_K", [d, ff]],
                    [p + "ffn_down.weight", hi, [ff, d]]]
    tensors.append(["output_norm.weight", "F32", [d]])
    return {"source": "llama32-1b preset", "version": 3, "metadata": metadata, "tensors": tensors}


def shrink(spec, layers=None, vocab=None):
    """Fewer blocks (blk.N for N < layers) and/or a smaller vocabulary (the token table, output
    and tokenizer arrays cut; merges naming removed tokens dropped; special ids kept inside)."""
    meta = {m[0]: m for m in spec["metadata"]}
    arch = meta["general.architecture"][2]
    if layers is not None:
        meta[f"{arch}.block_count"][2] = layers
        spec["tensors"] = [t for t in spec["tensors"]
                           if not t[0].startswith("blk.") or int(t[0].split(".")[1]) < layers]
    if vocab is not None:
        tokens = meta["tokenizer.ggml.tokens"][2][1]
        if vocab < len(tokens):
            kept = set(tokens[:vocab])
            for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
                if key in meta:
                    meta[key][2][1] = meta[key][2][1][:vocab]
            if "tokenizer.ggml.merges" in meta:
                merges = meta["tokenizer.ggml.merges"][2][1]
                meta["tokenizer.ggml.merges"][2][1] = [
                    m for m in merges if all(p in kept for p in m.split(" ", 1)) and m.replace(" ", "") in kept]
            for key in list(meta):
                if key.startswith("tokenizer.ggml.") and key.endswith("_token_id") and meta[key][2] >= vocab:
                    meta[key][2] = vocab - 1
            if f"{arch}.vocab_size" in meta:
                meta[f"{arch}.vocab_size"][2] = vocab
            for t in spec["tensors"]:
                if t[0] in ("token_embd.weight", "output.weight"):
                    t[2][1] = vocab
    return spec


# ---- writing ----------------------------------------------------------------------------------

def pack_string(s):
    b = s.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(b)) + b


def pack_value(vtype, value):
    if vtype == STR:
        return pack_string(value)
    if vtype == ARR:
        sub, items = value
        head = struct.pack("<IQ", sub, len(items))
        if sub == STR:
            return head + b"".join(pack_string(s) for s in items)
        return head + struct.pack("<%d%s" % (len(items), SCALAR[sub][1]), *items)
    return struct.pack(SCALAR[vtype], value)


def half(x):
    return struct.pack("<e", x)


def block_pool(tname, rng, blocks=4096):
    """`blocks` random blocks of a type with model-like scales (bench/quant.cpp's recipe)."""
    _, size, nbytes = TYPES[BY_NAME[tname]]
    if size == 1:  # plain floats: small values
        fmt = {"F32": "<f", "F16": "<e"}.get(tname)
        if fmt is None:  # BF16: the top half of an f32
            return b"".join(struct.pack("<f", rng.uniform(-0.05, 0.05))[2:] for _ in range(blocks * 16))
        return b"".join(struct.pack(fmt, rng.uniform(-0.05, 0.05)) for _ in range(blocks * 16))
    out = bytearray(rng.randbytes(blocks * nbytes))
    for i in range(blocks):
        at = i * nbytes
        if tname == "Q4_K":
            out[at:at + 4] = half(rng.uniform(5e-5, 3e-4)) + half(rng.uniform(5e-5, 3e-4))
        elif tname == "Q6_K":
            out[at + 208:at + 210] = half(rng.uniform(5e-5, 3e-4))
        else:
            out[at:at + 2] = half(rng.uniform(0.001, 0.006))
            if tname in ("Q4_1", "Q5_1"):
                out[at + 2:at + 4] = half(rng.uniform(-0.05, 0.0))
    return bytes(out)


def tensor_bytes(name, tname, ne):
    _, size, nbytes = TYPES[BY_NAME[tname]]
    n = 1
    for x in ne:
        n *= x
    if ne[0] % size:
        sys.exit(f"{name}: row length {ne[0]} is not a multiple of {tname}'s block of {size}")
    return n // size * nbytes


def write(spec, out, seed=0):
    rng = random.Random(seed)
    meta = {m[0]: m for m in spec["metadata"]}
    align = meta["general.alignment"][2] if "general.alignment" in meta else 32
    pools = {}
    header = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(spec["tensors"]), len(spec["metadata"])))
    for key, vtype, value in spec["metadata"]:
        header += pack_string(key) + struct.pack("<I", vtype) + pack_value(vtype, value)
    offset, layout = 0, []
    for name, tname, ne in spec["tensors"]:
        if tname not in BY_NAME:
            sys.exit(f"{name}: ggml type {tname} is not supported here")
        n = tensor_bytes(name, tname, ne)
        header += pack_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
        header += struct.pack("<IQ", BY_NAME[tname], offset)
        layout.append((name, tname, ne, offset, n))
        offset = (offset + n + align - 1) // align * align
    header += b"\0" * (-len(header) % align)
    total = 0
    with open(out + ".tmp", "wb") as f:
        f.write(header)
        for name, tname, ne, at, n in layout:
            f.seek(len(header) + at)
            if len(ne) == 1 and tname == "F32":  # norms: near 1
                f.write(struct.pack("<%df" % ne[0], *(1.0 + rng.uniform(-0.1, 0.1) for _ in range(ne[0]))))
            else:
                # A pool of blocks tiled from a random block boundary (scales stay in place).
                pool = pools.setdefault(tname, block_pool(tname, rng))
                unit = TYPES[BY_NAME[tname]][2]
                start = rng.randrange(len(pool) // unit // 2) * unit
                left = n
                while left:
                    chunk = pool[start:start + left]
                    f.write(chunk)
                    left -= len(chunk)
                    start = 0
            total += n
        f.truncate(len(header) + offset)
    os.replace(out + ".tmp", out)
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("spec")
    s.add_argument("src")
    s.add_argument("out")
    for name in ("like", "llama32-1b"):
        p = sub.add_parser(name)
        if name == "like":
            p.add_argument("spec")
        p.add_argument("out")
        p.add_argument("--layers", type=int)
        p.add_argument("--vocab", type=int)
        p.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.cmd == "spec":
        spec = read_spec(a.src)
        with gzip.open(a.out, "wt", encoding="utf-8") as f:
            json.dump(spec, f, ensure_ascii=False)
        print(f"wrote {a.out}: {len(spec['metadata'])} keys, {len(spec['tensors'])} tensors of {a.src}")
        return
    if a.cmd == "like":
        opener = gzip.open if a.spec.endswith(".gz") else open
        with opener(a.spec, "rt", encoding="utf-8") as f:
            spec = json.load(f)
    else:
        spec = llama32_1b_spec()
    spec = shrink(spec, a.layers, a.vocab)
    weights = write(spec, a.out, a.seed)
    print(f"wrote {a.out}: {len(spec['tensors'])} tensors like {spec['source']}, "
          f"{weights / 2**20:.1f} MiB of weights")


if __name__ == "__main__":
    main()
