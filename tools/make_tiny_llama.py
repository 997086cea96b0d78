#!/usr/bin/python3
"""Random-weight llama GGUF files: the tiny models of the fast C++ tests, and stand-ins with
another model's exact shapes, types and metadata.

    /usr/bin/python3 tools/make_tiny_llama.py      # tests/golden_llama/tiny/ (needs torch)
    python3 tools/make_tiny_llama.py --like SRC.gguf OUT.gguf [--seed N]
    python3 tools/make_tiny_llama.py --dump-spec SRC.gguf SPEC.json
    python3 tools/make_tiny_llama.py --like SPEC.json OUT.gguf

The default writes, with the `gguf` package's GGUFWriter, into tests/golden_llama/tiny/:
- tiny_llama_tied.gguf: llama architecture, 2 blocks, width 64, 4 query heads and 2 KV heads of
  16 dims, SwiGLU FFN 96, context 128, RoPE base 10000 over 16 dims, RMSNorm eps 1e-5, output
  tied to token_embd (Q8_0). The projections mix Q4_1, Q8_0, Q4_0, F16, BF16 and F32 (see
  TYPES); norms are F32. Vocabulary: 384 byte-level BPE tokens (3 ChatML control tokens, the
  256 byte symbols, 125 merges learned here from CORPUS), tokenizer.ggml.model gpt2, pre smollm,
  add_bos_token false, bos 1 (<|im_start|>), eos 2 (<|im_end|>), as SmolLM2 has them.
- tiny_llama_untied.gguf: the same blocks, token_embd Q4_0 and a separate output.weight Q4_1.
- tiny_llama_kquant.gguf (--kquant, needs only gguf and numpy): the same vocabulary at widths in
  whole 256-element super-blocks (width 256, FFN 256, 4 query and 2 KV heads of 64 dims, 2
  blocks) with Q4_K_M's types: Q4_K, Q6_K and Q5_0 in every role across the blocks, a Q6_K
  token table that is also the output. The k-quant blocks are random (the package cannot
  quantize to them) with model-like scales; tests/llama_model_test.cpp's double-precision
  llama is its reference.
- golden.json + logits_<model>_<sequence>.npy: id sequences and the float64 reference's logits
  (tools/llama_reference.py) at every position, as float32; and texts with the ids a `tokenizers`
  BPE built from the tiny vocabulary gives them.

--like writes random weights (normal, quantized by the package) with exactly the tensors (names,
shapes, types, order) and metadata (keys, value types, values, alignment) of a GGUF file, or of
a spec JSON written by --dump-spec (small enough to travel where the model cannot). It needs only
gguf and numpy. Tensor types the package cannot quantize (the K quants) are refused by name.
"""
import argparse
import collections
import hashlib
import json
import pathlib
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "golden_llama" / "tiny"

N_LAYERS, D_MODEL, N_HEADS, N_KV_HEADS, D_FF, CONTEXT = 2, 64, 4, 2, 96, 128
HEAD_DIM = D_MODEL // N_HEADS
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
N_MERGES = 125
# Weight types per block: every type vkformer dequantizes appears in each role across blocks.
TYPES = [
    {"attn_q": Q.Q4_1, "attn_k": Q.Q8_0, "attn_v": Q.Q4_0, "attn_output": Q.F16,
     "ffn_gate": Q.BF16, "ffn_up": Q.Q4_1, "ffn_down": Q.Q8_0},
    {"attn_q": Q.Q8_0, "attn_k": Q.Q4_0, "attn_v": Q.F16, "attn_output": Q.Q4_1,
     "ffn_gate": Q.Q4_0, "ffn_up": Q.F32, "ffn_down": Q.Q4_1},
]
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
          " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
          "{% endif %}")
# The merges are learned from this (written for this file), so common words become single tokens.
CORPUS = (
    "the cat sat on the mat. the dog ran in the park, and the cat watched the dog. "
    "There is a small house by the river; in the house there is a table and two chairs. "
    "What is the capital of France? The capital of France is Paris. "
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 2024. def add(a, b):\n    return a + b\n"
    "Hello, world! Hello again, world. I'm here, you're there, we've been everywhere. "
)


# ---- a byte-level BPE vocabulary ------------------------------------------------------------

def byte_symbols():
    """GPT-2's byte -> printable character map: printable Latin-1 bytes map to themselves, the
    other bytes to the code points from 256 upward, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def pretokenize(text):
    """SmolLM2's pre-tokenizer: each digit alone, then the GPT-2 regex."""
    import regex
    gpt2 = regex.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")
    words = []
    for piece in regex.split(r"(\p{N})", text):
        words += gpt2.findall(piece)
    return words


def learn_vocabulary():
    """(tokens, types, merges): specials, the 256 byte symbols, then N_MERGES merges, each the
    most frequent adjacent pair in CORPUS (ties: the smallest pair), so the result is fixed."""
    sym = byte_symbols()
    words = collections.Counter(tuple(sym[b] for b in w.encode()) for w in pretokenize(CORPUS))
    merges = []
    for _ in range(N_MERGES):
        pairs = collections.Counter()
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += n
        if not pairs:
            sys.exit("the corpus has too few pairs for the merges asked for")
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged = collections.Counter()
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    tokens = SPECIAL + [sym[b] for b in range(256)] + [a + b for a, b in merges]
    if len(set(tokens)) != len(tokens):
        sys.exit("a merge produced a token twice")
    types = [gguf.TokenType.CONTROL] * len(SPECIAL) + [gguf.TokenType.NORMAL] * (len(tokens) - len(SPECIAL))
    return tokens, types, [f"{a} {b}" for a, b in merges]


# ---- the tiny models ------------------------------------------------------------------------

def add_tensor(w, name, values, qtype):
    data = gguf.quants.quantize(np.ascontiguousarray(values, dtype=np.float32), qtype)
    w.add_tensor(name, data, raw_dtype=qtype if data.dtype == np.uint8 else None)


def tiny_weights(rng, vocab):
    """name -> (f32 values [rows, cols], type) of one random llama."""
    def normal(rows, cols, scale=1.0):
        return rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)

    def norm_weight():
        return (1.0 + 0.1 * rng.standard_normal(D_MODEL)).reshape(1, -1)

    out = {}
    kv = N_KV_HEADS * HEAD_DIM
    for layer, types in enumerate(TYPES):
        p = f"blk.{layer}."
        out[p + "attn_norm.weight"] = (norm_weight(), Q.F32)
        # Larger q/k make attention far from uniform, so positions (RoPE) matter in the logits.
        out[p + "attn_q.weight"] = (normal(D_MODEL, D_MODEL, 3.0), types["attn_q"])
        out[p + "attn_k.weight"] = (normal(kv, D_MODEL, 3.0), types["attn_k"])
        out[p + "attn_v.weight"] = (normal(kv, D_MODEL), types["attn_v"])
        out[p + "attn_output.weight"] = (normal(D_MODEL, D_MODEL), types["attn_output"])
        out[p + "ffn_norm.weight"] = (norm_weight(), Q.F32)
        out[p + "ffn_gate.weight"] = (normal(D_FF, D_MODEL), types["ffn_gate"])
        out[p + "ffn_up.weight"] = (normal(D_FF, D_MODEL), types["ffn_up"])
        out[p + "ffn_down.weight"] = (normal(D_MODEL, D_FF), types["ffn_down"])
    out["output_norm.weight"] = (norm_weight(), Q.F32)
    out["token_embd.weight"] = (rng.standard_normal((vocab, D_MODEL)), None)
    out["output.weight"] = (rng.standard_normal((vocab, D_MODEL)), Q.Q4_1)
    return out


def llama_writer(path, name, vocabulary, layers, d_model, d_ff, heads, kv_heads, file_type):
    """A GGUFWriter with the llama metadata and the tiny vocabulary and chat template."""
    tokens, types, merges = vocabulary
    w = gguf.GGUFWriter(path, "llama")
    w.add_name(name)
    w.add_block_count(layers)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(d_model)
    w.add_feed_forward_length(d_ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_rope_dimension_count(d_model // heads)
    w.add_file_type(file_type)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    w.add_add_space_prefix(False)
    w.add_chat_template(CHATML)
    return w


def write_tiny(path, weights, vocabulary, tied):
    w = llama_writer(path, "vkformer tiny llama (random weights, " + ("tied" if tied else "untied") + " output)",
                     vocabulary, N_LAYERS, D_MODEL, D_FF, N_HEADS, N_KV_HEADS, gguf.LlamaFileType.MOSTLY_Q4_1)
    for name, (values, qtype) in weights.items():
        if name == "token_embd.weight":
            qtype = Q.Q8_0 if tied else Q.Q4_0
        if name == "output.weight" and tied:
            continue
        add_tensor(w, name, values, qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---- the k-quant tiny model ------------------------------------------------------------------

K_PATH = OUT / "tiny_llama_kquant.gguf"
# Width and FFN in whole 256-element super-blocks; 4 query heads and 2 KV heads of 64 dims.
K_D_MODEL, K_D_FF, K_HEADS, K_KV_HEADS = 256, 256, 4, 2
# Q4_K_M's types (and its Q5_0 fallback) in every role across the two blocks; the token table
# (also the output projection) Q6_K.
K_TYPES = [
    {"attn_q": Q.Q4_K, "attn_k": Q.Q6_K, "attn_v": Q.Q5_0, "attn_output": Q.Q6_K,
     "ffn_gate": Q.Q4_K, "ffn_up": Q.Q5_0, "ffn_down": Q.Q6_K},
    {"attn_q": Q.Q5_0, "attn_k": Q.Q4_K, "attn_v": Q.Q6_K, "attn_output": Q.Q4_K,
     "ffn_gate": Q.Q6_K, "ffn_up": Q.Q4_K, "ffn_down": Q.Q4_K},
]


def pack_q4k_scales(sc, mn):
    """The 12 scale bytes of Q4_K super-blocks from 6-bit scales and mins [blocks, 8] (the
    inverse of ggml's get_scale_min_k4)."""
    out = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    for j in range(4):
        out[:, j] = sc[:, j] | ((sc[:, j + 4] >> 4) << 6)
        out[:, j + 4] = mn[:, j] | ((mn[:, j + 4] >> 4) << 6)
        out[:, j + 8] = (sc[:, j + 4] & 0xF) | ((mn[:, j + 4] & 0xF) << 4)
    return out


def k_quant_weight(rng, qtype, rows, cols, std):
    """Random super-blocks (the gguf package cannot quantize to the k-quants) whose values have
    about `std` and mean 0: Q4_K sub-blocks take a min near 7.5 times their scale (the middle
    of the nibbles), Q6_K's int8 scales are symmetric."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    n = rows * cols // block_size
    raw = rng.integers(0, 256, size=(n, type_size), dtype=np.uint8)
    if qtype == Q.Q4_K:
        sc = rng.integers(1, 9, size=(n, 8)).astype(np.uint8)
        mn = np.minimum(np.rint(sc * 7.5 + rng.integers(-2, 3, size=(n, 8))), 63).astype(np.uint8)
        raw[:, 4:16] = pack_q4k_scales(sc, mn)
        offsets = [0, 2]
    else:
        offsets = [208]

    def set_scales(value):
        for o in offsets:
            raw[:, o:o + 2] = np.full(n, value, np.float16).view(np.uint8).reshape(-1, 2)

    set_scales(1.0)
    unit = gguf.quants.dequantize(raw.reshape(rows, -1), qtype).std()
    set_scales(std / unit)
    return raw.reshape(rows, cols // block_size * type_size)


def write_kquant_tiny(vocabulary, rng):
    """tiny_llama_kquant.gguf: the tiny vocabulary and metadata at k-quant widths."""
    w = llama_writer(K_PATH, "vkformer tiny llama (random weights, k-quants)", vocabulary, len(K_TYPES),
                     K_D_MODEL, K_D_FF, K_HEADS, K_KV_HEADS, gguf.LlamaFileType.MOSTLY_Q4_K_M)
    d, kv = K_D_MODEL, K_KV_HEADS * (K_D_MODEL // K_HEADS)

    def matrix(name, rows, cols, qtype, scale=1.0):
        std = scale / np.sqrt(cols)
        if qtype in (Q.Q4_K, Q.Q6_K):
            w.add_tensor(name, k_quant_weight(rng, qtype, rows, cols, std), raw_dtype=qtype)
        else:
            add_tensor(w, name, rng.standard_normal((rows, cols)) * std, qtype)

    def norm(name):
        add_tensor(w, name, (1.0 + 0.1 * rng.standard_normal(d)).reshape(1, -1), Q.F32)

    matrix("token_embd.weight", len(vocabulary[0]), d, Q.Q6_K, np.sqrt(d))
    for layer, types in enumerate(K_TYPES):
        p = f"blk.{layer}."
        norm(p + "attn_norm.weight")
        matrix(p + "attn_q.weight", d, d, types["attn_q"], 3.0)
        matrix(p + "attn_k.weight", kv, d, types["attn_k"], 3.0)
        matrix(p + "attn_v.weight", kv, d, types["attn_v"])
        matrix(p + "attn_output.weight", d, d, types["attn_output"])
        norm(p + "ffn_norm.weight")
        matrix(p + "ffn_gate.weight", K_D_FF, d, types["ffn_gate"])
        matrix(p + "ffn_up.weight", K_D_FF, d, types["ffn_up"])
        matrix(p + "ffn_down.weight", d, K_D_FF, types["ffn_down"])
    norm("output_norm.weight")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


TEXTS = [
    "Hello, world!",
    "The capital of France is",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "def add(a, b):\n    return a + b\n",
    "naïve café, 日本語 🙂 and 12345",
    "   leading spaces and\ttabs\n\n",
]


def make_goldens():
    import torch
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import llama_reference as ref_lib

    OUT.mkdir(parents=True, exist_ok=True)
    vocabulary = learn_vocabulary()
    vocab = len(vocabulary[0])
    weights = tiny_weights(np.random.default_rng(20241), vocab)
    models = {"tied": OUT / "tiny_llama_tied.gguf", "untied": OUT / "tiny_llama_untied.gguf"}
    for kind, path in models.items():
        write_tiny(path, weights, vocabulary, tied=(kind == "tied"))

    tok = ref_lib.tokenizer_from_gguf(gguf.GGUFReader(models["tied"]))
    texts = []
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False).ids
        if tok.decode(ids, skip_special_tokens=False) != text:
            sys.exit(f"{text!r} does not decode back")
        texts.append({"text": text, "ids": ids})
    rng = np.random.default_rng(7)
    sequences = {
        "one_token": [1],
        "chat": texts[2]["ids"],
        "hello": texts[0]["ids"],
        # 101 ids (odd, more than 3 tiles of 32) up to position 100 of the 128-token context.
        "random_101": rng.integers(0, vocab, size=101).tolist(),
    }
    golden = {"command": "/usr/bin/python3 tools/make_tiny_llama.py", "vocab_size": vocab,
              "texts": texts, "models": {}}
    for kind, path in models.items():
        ref = ref_lib.LlamaReference(path)
        entry = {"file": path.name, "config": vars(ref.cfg), "sequences": {}}
        for name, ids in sequences.items():
            logits = ref.full_logits(ids)
            # The cached path (all but the last id, then the last alone) must agree.
            ref.reset()
            if len(ids) > 1:
                ref.forward(ids[:-1])
            drift = float((ref.forward(ids[-1:])[-1] - logits[-1]).abs().max())
            if drift > 1e-9:
                sys.exit(f"{kind}/{name}: cached and full logits differ by {drift}")
            file = f"logits_{kind}_{name}.npy"
            np.save(OUT / file, logits.numpy().astype(np.float32))
            margins = ref_lib.top2_margin(logits)
            entry["sequences"][name] = {
                "ids": ids, "logits_file": file, "shape": list(logits.shape),
                "argmax": logits.argmax(-1).tolist(),
                "top2_margin": [round(float(m), 5) for m in margins],
                "max_abs_logit": round(float(logits.abs().max()), 4)}
            print(f"{kind}/{name}: {len(ids)} ids, max|logit| {float(logits.abs().max()):.2f}, "
                  f"min top-2 margin {float(margins.min()):.4f}")
        golden["models"][kind] = entry
    (OUT / "golden.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT} ({total / 1e3:.0f} kB)")


# ---- --like: another model's shapes and metadata, random weights ----------------------------

def spec_from_gguf(path):
    """{metadata: [[key, type, value, sub_type]], tensors: [[name, type, shape (ne order)]]}."""
    r = gguf.GGUFReader(path)
    metadata = []
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        if len(field.types) > 2:
            sys.exit(f"{path}: {key} is a nested array, which --like does not copy")
        value = field.contents()
        sub = field.types[1].name if field.types[0] == V.ARRAY else None
        metadata.append([key, field.types[0].name, value, sub])
    tensors = [[t.name, t.tensor_type.name, [int(n) for n in t.shape]] for t in r.tensors]
    return {"source": pathlib.Path(path).name, "metadata": metadata, "tensors": tensors}


def write_like(spec, out, seed):
    rng = np.random.default_rng(seed)
    meta = {m[0]: m for m in spec["metadata"]}
    arch = meta.get("general.architecture", [None, None, "llama"])[2]
    w = gguf.GGUFWriter(out, arch)
    for key, vtype, value, sub in spec["metadata"]:
        if key == "general.architecture":
            continue  # the writer adds it
        if key == "general.alignment":
            w.add_custom_alignment(int(value))
            continue
        w.add_key_value(key, value, V[vtype], sub_type=V[sub] if sub else None)
    for name, tname, ne in spec["tensors"]:
        qtype = Q[tname]
        shape = list(reversed(ne))
        if qtype not in (Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1):
            sys.exit(f"{name}: type {tname} cannot be quantized by the gguf package; --like "
                     f"supports F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1")
        if len(shape) == 1:  # norms: near 1, as trained models have them
            values = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            values = rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(shape[-1]))
            if name == "token_embd.weight":
                values *= np.float32(np.sqrt(shape[-1]) / 8)
        add_tensor(w, name, values, qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--like", nargs=2, metavar=("SRC", "OUT"), help="SRC: a .gguf or a --dump-spec .json")
    ap.add_argument("--dump-spec", nargs=2, metavar=("SRC", "SPEC"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kquant", action="store_true", help="only write " + str(K_PATH.relative_to(ROOT)))
    args = ap.parse_args()
    if args.dump_spec:
        src, dst = args.dump_spec
        pathlib.Path(dst).write_text(json.dumps(spec_from_gguf(src), ensure_ascii=False))
    elif args.like:
        src, dst = args.like
        spec = json.loads(pathlib.Path(src).read_text()) if src.endswith(".json") else spec_from_gguf(src)
        write_like(spec, dst, args.seed)
        # The same spec, seed and package versions give the same bytes: compare hashes to know
        # that a file made on another machine is this one.
        digest = hashlib.sha256(pathlib.Path(dst).read_bytes()).hexdigest()
        print(f"wrote {dst}: {len(spec['tensors'])} tensors like {src}, seed {args.seed}, sha256 {digest}")
    elif args.kquant:
        write_kquant_tiny(learn_vocabulary(), np.random.default_rng(20242))
        print(f"wrote {K_PATH} ({K_PATH.stat().st_size / 1e3:.0f} kB)")
    else:
        make_goldens()


if __name__ == "__main__":
    main()
