#!/usr/bin/env python3
# Why Gemma 3's q4_0 keys prefer a small Hadamard block (issue 37; bench/RESULTS.md, "Gemma 3's
# q4_0 keys: why a smaller rotation block does better"). An independent numpy forward of
# Gemma 3 270M (float32, the GGUF's weights dequantized by llama.cpp's gguf-py; its chunk-0
# perplexity 18.9516 against vkformer's f16 18.9532) gives each layer's real roped q and k; the
# keys are then quantized as ggml's quantize_row_q4_0_ref after a Hadamard rotation of a chosen
# block (optionally after a fixed random sign flip, or with k * s and q / s, s from the q/k norms'
# gains), and per layer the keys' relative squared error and the scores' error (q·k against
# q·dequant(k), rms over the causal pairs) are printed; or perplexity on llama-perplexity's
# chunks (BOS first, the second half scored) with q4_0 keys (values in f32).
#
#   vkformer tokenize -m gemma-3-270m-q4_k_m.gguf --no-parse-special "$(head -c 40000 TEXT)" > tok.json
#   PYTHONPATH=<llama.cpp>/gguf-py python3 bench/gemma3_q4_0_keys.py stats MODEL.gguf tok.json OUT.json
#   PYTHONPATH=<llama.cpp>/gguf-py python3 bench/gemma3_q4_0_keys.py ppl MODEL.gguf tok.json OUT.json \
#       CHUNKS name=block[:signs[:scaled[:jitter]]],...   # block -1: no quantization; jitter: a seed
#   PYTHONPATH=<llama.cpp>/gguf-py python3 bench/gemma3_q4_0_keys.py cache MODEL.gguf tok.json OUT.json DUMP BLOCK
#       # DUMP: k<layer>.bin (q4_0) and v<layer>.bin (f16), vkformer's caches after chunk 0
import sys, json, time
import numpy as np
import gguf
from gguf import quants


def load(model):
    r = gguf.GGUFReader(model)
    W = {}
    for t in r.tensors:
        a = quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        W[t.name] = a
    return W


def rms(x, w, eps=1e-6):
    return x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + eps).astype(np.float32) * w


def hadamard(n):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return (h / np.sqrt(n)).astype(np.float32)


def rotate(x, block):  # x [..., D] times blockdiag(H_block)
    if not block:
        return x
    H = hadamard(block)
    s = x.shape
    return (x.reshape(*s[:-1], s[-1] // block, block) @ H).reshape(s)


def q4_0(x):  # ggml quantize_row_q4_0_ref then dequantize, per block of 32 on the last axis
    s = x.shape
    b = x.reshape(-1, 32).astype(np.float32)
    idx = np.argmax(np.abs(b), axis=1)
    m = b[np.arange(b.shape[0]), idx]
    d = (m / np.float32(-8)).astype(np.float32)
    with np.errstate(divide='ignore'):
        idd = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.minimum(15, np.trunc(b * idd[:, None] + np.float32(8.5))).astype(np.int32)
    dh = d.astype(np.float16).astype(np.float32)
    return ((q - 8).astype(np.float32) * dh[:, None]).reshape(s)


def q8_0(x):
    s = x.shape
    b = x.reshape(-1, 32).astype(np.float32)
    amax = np.max(np.abs(b), axis=1)
    d = amax / np.float32(127)
    idd = np.where(d != 0, 1 / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.round(b * idd[:, None])
    return (q * d.astype(np.float16).astype(np.float32)[:, None]).reshape(s)


def rope_neox(x, pos, base):  # x [n, heads, D]
    D = x.shape[-1]
    half = D // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2 / D)
    ang = pos[:, None].astype(np.float64) * inv[None, :]
    c = np.cos(ang).astype(np.float32)[:, None, :]
    s = np.sin(ang).astype(np.float32)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


SIGNS = None


def forward(W, tokens, kquant=None, krot=0, layers_q=None, capture=None, signs=0, kscale=False, kv_capture=False, jitter=0):
    n = len(tokens)
    E = W['token_embd.weight']
    x = E[tokens] * np.float32(np.sqrt(640))
    pos = np.arange(n)
    mask = np.triu(np.full((n, n), -np.inf, dtype=np.float32), 1)
    for il in range(18):
        p = f'blk.{il}.'
        h = rms(x, W[p + 'attn_norm.weight'])
        q = (h @ W[p + 'attn_q.weight'].T).reshape(n, 4, 256)
        k = (h @ W[p + 'attn_k.weight'].T).reshape(n, 1, 256)
        v = (h @ W[p + 'attn_v.weight'].T).reshape(n, 1, 256)
        q = rms(q, W[p + 'attn_q_norm.weight'])
        k = rms(k, W[p + 'attn_k_norm.weight'])
        base = 1e6 if (il + 1) % 6 == 0 else 1e4
        q = rope_neox(q, pos, base)
        k = rope_neox(k, pos, base)
        if capture is not None:
            capture.append((q.copy(), k.copy(), v.copy()) if kv_capture else (q.copy(), k.copy()))
        if kquant is not None and (layers_q is None or il in layers_q):
            if signs:
                q, k = q * SIGNS, k * SIGNS
            if kscale:  # k * s, q / s: scores unchanged, s from the norms' gains (rope pairs alike)
                def pair(w):
                    g = np.sqrt((w[:128] ** 2 + w[128:] ** 2) / 2)
                    return np.concatenate([g, g])
                sc_ = np.sqrt(np.clip(pair(W[p + 'attn_q_norm.weight']) / np.maximum(pair(W[p + 'attn_k_norm.weight']), 1e-3), 1 / 16, 16)).astype(np.float32)
                q, k = q / sc_, k * sc_
            if jitter:  # keys times 1 + 1e-6 N(0, 1): float rounding's size, moving only q4_0's ties
                k = k * (1 + 1e-6 * np.random.default_rng(jitter * 100 + il).standard_normal(k.shape)).astype(np.float32)
            qr, kr = rotate(q, krot), rotate(k, krot)
            k_used = kquant(kr)
            q_used = qr
        else:
            q_used, k_used = q, k
        sc = np.einsum('nhd,mgd->hnm', q_used, k_used) / np.float32(16) + mask
        sc = sc - sc.max(-1, keepdims=True)
        pr = np.exp(sc)
        pr /= pr.sum(-1, keepdims=True)
        o = np.einsum('hnm,md->nhd', pr, v[:, 0, :]).reshape(n, 1024)
        o = o @ W[p + 'attn_output.weight'].T
        x = x + rms(o, W[p + 'post_attention_norm.weight'])
        h = rms(x, W[p + 'ffn_norm.weight'])
        f = gelu_tanh(h @ W[p + 'ffn_gate.weight'].T) * (h @ W[p + 'ffn_up.weight'].T)
        f = f @ W[p + 'ffn_down.weight'].T
        x = x + rms(f, W[p + 'post_ffw_norm.weight'])
    return x


def chunk_nll(W, chunk, **kw):  # kw: forward's
    n = len(chunk)
    x = forward(W, chunk, **kw)
    first = n // 2
    xs = rms(x[first:n - 1], W['output_norm.weight'])
    logits = (xs @ W['token_embd.weight'].T).astype(np.float64)
    m = logits.max(-1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(logits - m).sum(-1))
    tgt = np.array(chunk[first + 1:n])
    return lse - logits[np.arange(len(tgt)), tgt]


def main():
    global SIGNS
    mode, model, tok, out_path = sys.argv[1:5]
    W = load(model)
    ids = json.load(open(tok))['ids']
    SIGNS = np.where(np.random.default_rng(37).random(256) < 0.5, -1.0, 1.0).astype(np.float32)

    def chunk(c):
        ch = list(ids[c * 512:(c + 1) * 512])
        ch[0] = 2  # BOS, as llama-perplexity
        return ch

    def rot(x, block, signs):
        return rotate(x * SIGNS if signs else x, block)

    if mode == 'cache':  # vkformer's caches after chunk 0 (dumped raw, sys.argv[5]) against numpy's
        dump, krot = sys.argv[5], int(sys.argv[6])
        cap = []
        # numpy's forward with the same q4_0 keys, so that each layer's inputs are the same as
        # vkformer's; the last row is not in the cache (perplexity never appends the last token)
        chunk_nll(W, chunk(0), capture=cap, kv_capture=True, kquant=q4_0, krot=krot)
        out = {}
        for il, (q, k, v) in enumerate(cap):
            n = k.shape[0] - 1
            k, v = k[:n], v[:n]
            kr = rotate(k[:, 0], krot)
            raw = np.fromfile(f'{dump}/k{il}.bin', dtype=np.uint8)
            rows = raw.size // 144
            blocks = raw.reshape(rows, 8, 18)[:n]
            d = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float32)
            qs = blocks[..., 2:]
            nib = np.concatenate([qs & 15, qs >> 4], axis=-1).astype(np.float32) - 8
            got = (nib * d[..., None]).reshape(n, 256)
            want = q4_0(kr)
            vraw = np.fromfile(f'{dump}/v{il}.bin', dtype=np.float16).reshape(-1, 256)[:n].astype(np.float32)
            row = dict(
                k_vs_numpy_q4_0=float(np.sqrt(np.sum((got - want) ** 2) / np.sum(want ** 2))),
                k_vs_numpy_f32=float(np.sqrt(np.sum((got - kr) ** 2) / np.sum(kr ** 2))),
                numpy_q4_0_vs_f32=float(np.sqrt(np.sum((want - kr) ** 2) / np.sum(kr ** 2))),
                blocks_differing=float(np.mean(np.any(np.abs(got - want).reshape(n, 8, 32) > 1e-3 * np.abs(want).reshape(n, 8, 32).max(-1, keepdims=True) + 1e-6, -1))),
                worst_row=int(np.argmax(np.sum((got - want) ** 2, -1))),
                row0=float(np.sqrt(np.sum((got[0] - want[0]) ** 2) / max(np.sum(want[0] ** 2), 1e-30))),
                v_vs_numpy=float(np.sqrt(np.sum((vraw - v[:, 0]) ** 2) / np.sum(v[:, 0] ** 2))))
            out[il] = row
            print(il, ' '.join(f'{a}={b:.4g}' for a, b in row.items()), flush=True)
        json.dump(out, open(out_path, 'w'), indent=1)
        return
    if mode == 'stats':
        cap = []
        nll = chunk_nll(W, chunk(0), capture=cap)
        print('chunk0 ppl f32', float(np.exp(nll.mean())), flush=True)
        out = {}
        for il, (q, k) in enumerate(cap):
            n = q.shape[0]
            causal = np.tril(np.ones((n, n), bool))
            s_ref = np.einsum('nhd,md->hnm', q, k[:, 0]) / 16
            row = {}
            for name, blk, sg in [('none', 0, 0), ('h256', 256, 0), ('h64', 64, 0), ('h32', 32, 0), ('h16', 16, 0),
                                  ('sh256', 256, 1), ('sh64', 64, 1), ('sh32', 32, 1)]:
                kr = rot(k, blk, sg); qr = rot(q, blk, sg)
                kq = q4_0(kr)
                kerr = float(np.sum((kq - kr) ** 2) / np.sum(kr ** 2))
                s = np.einsum('nhd,md->hnm', qr, kq[:, 0]) / 16
                e = (s - s_ref)[:, causal]
                # rotated keys' largest |value| over their rms: the outliers a block's scale follows
                peak = float(np.mean(np.max(np.abs(kr), -1) / np.sqrt(np.mean(kr ** 2, -1))))
                row[name] = dict(k_rel_mse=kerr, score_err_rms=float(np.sqrt(np.mean(e ** 2))), peak_over_rms=peak)
            out[il] = row
            print(il, ' '.join(f"{n}:{v['k_rel_mse']:.4f}/{v['score_err_rms']:.3f}/{v['peak_over_rms']:.1f}" for n, v in row.items()), flush=True)
        json.dump(out, open(out_path, 'w'), indent=1)
    else:
        nchunks, specs = int(sys.argv[5]), sys.argv[6]
        res = {}
        for spec in specs.split(','):
            name, b = spec.split('=')
            blk, sg, ks, jit = (int(t) for t in (b + ':0:0:0').split(':')[:4])
            t = time.time()
            nlls = []
            for c in range(nchunks):
                kq = None if blk < 0 else q4_0
                if kq is None:
                    nlls.append(chunk_nll(W, chunk(c)))
                else:
                    # forward() flips the signs, scales and rotates q and k before q4_0 takes k
                    nlls.append(chunk_nll(W, chunk(c), kquant=kq, krot=blk, signs=sg, kscale=bool(ks), jitter=jit))
                print(name, c, float(np.exp(np.concatenate(nlls).mean())), f'{time.time()-t:.0f}s', flush=True)
            res[name] = dict(block=blk, signs=sg, kscale=ks, jitter=jit, chunk_ppl=[float(np.exp(np.concatenate(nlls[:i + 1]).mean())) for i in range(len(nlls))])
        json.dump(res, open(out_path, 'w'), indent=1)


if __name__ == '__main__':
    main()
