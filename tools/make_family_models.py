#!/usr/bin/env python3
"""Tiny random-weight models of each decoder-only family vkformer loads, converted by llama.cpp's
own convert_hf_to_gguf.py, with Hugging Face transformers' logits as their golden data:
tests/golden_families/ for tests/llm_families_test.cpp.

    python3 tools/make_family_models.py LLAMA_CPP_DIR [--venv DIR] [--out DIR]

LLAMA_CPP_DIR holds convert_hf_to_gguf.py, conversion/ and gguf-py/ (llama-cpp-python's source
package vendors them: vendor/llama.cpp). The script re-runs itself in a virtual environment it
makes (default /tmp/vkformer-families-venv) with torch and transformers from PyPI; CI needs
neither: it reads what this wrote.

Each family's model is its real configuration shrunk in width and depth (width 32, 4 query heads
of 8 dims, FFN 64, a 320-token vocabulary) with every feature kept: biases, q/k norms, post-norms,
GQA, tied or separate output, RoPE style, base and scaling (Llama 3.1's rope_freqs, Gemma 3's
linear scaling and local base), soft-capping (Gemma 2, with caps small enough that tanh bends)
and a sliding window of 6, shorter than the longer prompts. Weights, norms and biases are random
(normal), so a wrong norm offset or a missed bias shows. For each family it writes
<family>.f32.gguf, <family>.f16.gguf and <family>.q8_0.gguf (the converter's own --outtype) and
in manifest.json per prompt (token ids) the .npy file of the model's float32 logits at every
position, and a 32-token greedy continuation of the first long prompt, and the long prompt's
logits of the model with its weights rounded through Q8_0 as the converter rounds them (the Q8_0
file's reference).

K-quants (--llama-quantize PATH, llama.cpp's own llama-quantize; gguf-py cannot write them): a
second model per family, the same configuration at the smallest widths whose every matrix row is
whole 256-element super-blocks (width 256, 4 query heads of 64, FFN 256; 1 block), converted
to F32 and quantized by llama-quantize to Q4_K_M (every family) and Q5_K_M (K_QUANTS_5 below):
<family>_k.q4_k_m.gguf, <family>_k.q5_k_m.gguf. At width 32 every K-type tensor would fall back
to Q5_0/Q5_1/Q8_0 and the K kernels would not run. Their reference, <family>_k_long_<type>.npy, is
transformers on the same weights dequantized: each tensor of the quantized file decoded by
gguf-py and put back into the transformers model, its rows matched to the model's rows through the
F32 file (the converter reorders Llama's q/k rows for its RoPE layout; quantization is per row, so
the rows' order does not change what they round to). manifest.json records each file's tensor
types.

The converter needs a tokenizer; these models have none, so the script gives the converter's
model class a set_vocab that writes a 320-token SentencePiece-style vocabulary (control tokens
<unk> <s> </s>, the 256 byte tokens, then pieces). llama.cpp's converter writes no sliding window
for Mistral (it maps it to the llama architecture); the script adds
llama.attention.sliding_window = the model's window, which vkformer honours where a file has it.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

VOCAB = 320
WINDOW = 6
PROMPTS = {
    "one": [7],
    "short": [1, 45, 301, 12, 99, 7, 260, 3, 18, 200, 77],
    "long": [1] + [(37 * i + 11) % (VOCAB - 3) + 3 for i in range(39)],
}
GREEDY = 32
ROOT = pathlib.Path(__file__).resolve().parent.parent
# The K-quant models: every row of every matrix whole 256-element super-blocks (hidden and FFN
# 256, 4 query heads of 64 so that attn_output's rows are 256 wide too).
# One block: llama-quantize's Q4_K_M/Q5_K_M then give its attn_v and ffn_down Q6_K (as in a real
# model's first and last blocks) and its other matrices Q4_K/Q5_K; a second block would double
# the files without another kernel or shape.
K_WIDTH = dict(hidden_size=256, intermediate_size=256, num_attention_heads=4, head_dim=64,
               num_hidden_layers=1,
               # the narrow models' 0.25 scaled by sqrt(32/256): activations and logits of the
               # same size, so top-1 margins are alike
               initializer_range=0.0884)
K_QUANTS = ("Q4_K_M",)
K_QUANTS_5 = ("llama3", "qwen2")  # also Q5_K_M: one separate-output llama, one with biases


def families():
    """name -> (transformers config class name, model class name, config kwargs)."""
    base = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
                rms_norm_eps=1e-5, initializer_range=0.25, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return {
        # Llama 3.1: rope "llama3" scaling (the converter writes rope_freqs), separate output.
        "llama3": ("LlamaConfig", "LlamaForCausalLM", dict(
            base, num_key_value_heads=1, tie_word_embeddings=False,
            rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                 high_freq_factor=4.0, original_max_position_embeddings=64))),
        # Llama 2 style: plain RoPE base 10000, no scaling, tied output.
        "llama2": ("LlamaConfig", "LlamaForCausalLM", dict(
            base, tie_word_embeddings=True, rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
        "mistral": ("MistralConfig", "MistralForCausalLM", dict(
            base, tie_word_embeddings=False, sliding_window=WINDOW,
            rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
        "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(
            base, tie_word_embeddings=True, use_sliding_window=False,
            rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
        "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(
            base, tie_word_embeddings=True, rms_norm_eps=1e-6,
            rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
        "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(
            base, rms_norm_eps=1e-6, sliding_window=WINDOW, query_pre_attn_scalar=8,
            attn_logit_softcapping=1.5, final_logit_softcapping=3.0, hidden_activation="gelu_pytorch_tanh",
            rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
        # 6 layers: five sliding, one global (layer 5), as Gemma 3's pattern has them.
        "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
            base, num_hidden_layers=6, num_key_value_heads=1, rms_norm_eps=1e-6, sliding_window=WINDOW,
            query_pre_attn_scalar=8, hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=None,
            attn_logit_softcapping=None,
            rope_parameters=dict(full_attention=dict(rope_type="linear", factor=8.0, rope_theta=1000000.0),
                                 sliding_attention=dict(rope_type="default", rope_theta=10000.0)))),
        "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(
            base, num_key_value_heads=4, tie_word_embeddings=False, sliding_window=WINDOW,
            original_max_position_embeddings=256,
            rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
    }


def tiny_vocab(self):
    """A converter model class's set_vocab for a model without a tokenizer."""
    import gguf
    tokens, scores, types = [], [], []
    for t in ("<unk>", "<s>", "</s>"):
        tokens.append(t); scores.append(0.0); types.append(gguf.TokenType.CONTROL)
    for b in range(256):
        tokens.append(f"<0x{b:02X}>"); scores.append(0.0); types.append(gguf.TokenType.BYTE)
    letters = "abcdefghijklmnopqrstuvwxyz"
    while len(tokens) < VOCAB:
        i = len(tokens) - 259
        tokens.append("\u2581" + letters[i % 26] + letters[(i // 26) % 26]); scores.append(-float(i))
        types.append(gguf.TokenType.NORMAL)
    self.gguf_writer.add_tokenizer_model("llama")
    self.gguf_writer.add_tokenizer_pre("default")
    self.gguf_writer.add_token_list(tokens)
    self.gguf_writer.add_token_scores(scores)
    self.gguf_writer.add_token_types(types)
    self.gguf_writer.add_bos_token_id(1)
    self.gguf_writer.add_eos_token_id(2)
    self.gguf_writer.add_unk_token_id(0)
    self.gguf_writer.add_add_bos_token(False)


def convert(llama_cpp, model_dir, out, outtype, window_for_llama):
    """Runs convert_hf_to_gguf.main() in this process with the tiny vocabulary patched in."""
    sys.path.insert(0, str(llama_cpp / "gguf-py"))
    sys.path.insert(0, str(llama_cpp))
    import convert_hf_to_gguf as conv
    original = conv.get_model_class

    def patched(*args, **kwargs):
        cls = original(*args, **kwargs)
        extra = {"set_vocab": tiny_vocab, "model_arch": cls.model_arch}
        if window_for_llama:
            def set_gguf_parameters(self, _base=cls.set_gguf_parameters):
                _base(self)
                self.gguf_writer.add_sliding_window(window_for_llama)
            extra["set_gguf_parameters"] = set_gguf_parameters
        return type(cls.__name__, (cls,), extra)

    conv.get_model_class = patched
    sys.argv = ["convert_hf_to_gguf.py", str(model_dir), "--outtype", outtype, "--outfile", str(out)]
    conv.main()


def random_model(seed_name, spec, kwargs, model_dir):
    """The family's transformers model with seeded random weights, saved for the converter."""
    import torch
    import transformers
    config_cls, model_cls, _ = spec
    torch.manual_seed(sum(map(ord, seed_name)))
    config = getattr(transformers, config_cls)(**kwargs)
    model = getattr(transformers, model_cls)(config).eval()
    model.config._attn_implementation = "eager"  # honours soft-capping and the sliding window
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight"):
                # Llama's RMSNorm multiplies by w, Gemma's by 1 + w: around 1 either way.
                offset = 0.0 if "Gemma" in model_cls else 1.0
                p.copy_(offset + 0.2 * torch.randn_like(p))
            elif pname.endswith(".bias"):
                p.copy_(0.3 * torch.randn_like(p))
    model.save_pretrained(model_dir, safe_serialization=True)
    # Gemma 3's converter counts the vocabulary from tokenizer.json.
    (model_dir / "tokenizer.json").write_text(json.dumps(
        {"model": {"vocab": {f"t{i}": i for i in range(VOCAB)}}, "added_tokens": []}))
    return model


def run_converter(name, llama_cpp, model_dir, out, outtype):
    window = WINDOW if name == "mistral" else 0
    r = subprocess.run([sys.executable, __file__, "--convert", str(llama_cpp), str(model_dir), str(out),
                        outtype, str(window)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{name} {outtype}: convert_hf_to_gguf failed:\n{r.stderr[-3000:]}")


def build(name, spec, work, out_dir, llama_cpp, skip_convert=False):
    import numpy as np
    import torch
    kwargs = spec[2]
    model_dir = work / name
    model = random_model(name, spec, kwargs, model_dir)
    files = {}
    for outtype in ("f32", "f16", "q8_0"):
        out = out_dir / f"{name}.{outtype}.gguf"
        files[outtype] = out.name
        if skip_convert and out.exists():
            continue
        run_converter(name, llama_cpp, model_dir, out, outtype)
    entry = {"gguf": files, "prompts": {}}
    with torch.no_grad():
        for pname, ids in PROMPTS.items():
            logits = model(torch.tensor([ids])).logits[0].float().numpy()
            f = f"{name}_{pname}.npy"
            np.save(out_dir / f, logits.astype(np.float32))
            entry["prompts"][pname] = {"ids": ids, "logits": f}
        seq = list(PROMPTS["long"])
        for _ in range(GREEDY):
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
        entry["greedy"] = {"prompt": "long", "tokens": seq[len(PROMPTS["long"]):]}
        # The Q8_0 file's own reference: this model with every matrix the converter quantizes
        # (all of them here: each row is whole 32-element blocks) rounded through gguf-py's Q8_0,
        # the function the converter used, so only vkformer's arithmetic differs.
        sys.path.insert(0, str(llama_cpp / "gguf-py"))
        import gguf
        q8 = gguf.GGMLQuantizationType.Q8_0
        for p in model.parameters():
            if p.ndim == 2 and p.shape[-1] % 32 == 0:
                a = p.numpy().astype(np.float32)
                p.copy_(torch.from_numpy(gguf.quants.dequantize(gguf.quants.quantize(a, q8), q8).reshape(a.shape)))
        f = f"{name}_long_q8_0.npy"
        np.save(out_dir / f, model(torch.tensor([PROMPTS["long"]])).logits[0].float().numpy().astype(np.float32))
        entry["q8_0_dequantized"] = {"prompt": "long", "logits": f}
    entry["config"] = plain(kwargs)
    return entry


def plain(kwargs):
    return {k: (v if isinstance(v, (int, float, str, bool, type(None), list, dict)) else str(v))
            for k, v in kwargs.items()}


def k_quant_config(kwargs):
    k = dict(kwargs, **K_WIDTH)
    if "query_pre_attn_scalar" in k:  # Gemma scales scores by 1/sqrt(head_dim), as it does
        k["query_pre_attn_scalar"] = K_WIDTH["head_dim"]
    return k


def dequantize_into(model, f32_path, quant_path, gguf):
    """Puts each matrix of quant_path, decoded by gguf-py, into the transformers model. A model
    matrix's rows are found in the F32 file by their bytes (random rows are unique), which says
    which tensor and which of its rows each one became. Returns {tensor name: type name}."""
    import numpy as np
    import torch
    rows = {}
    for t in gguf.GGUFReader(f32_path).tensors:
        if len(t.shape) == 2:
            for i, r in enumerate(np.asarray(t.data)):
                rows[r.tobytes()] = (t.name, i)
    quant = {t.name: t for t in gguf.GGUFReader(quant_path).tensors}
    decoded = {}
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.ndim != 2:
                continue
            hits = [rows.get(r.tobytes()) for r in p.numpy().astype(np.float32)]
            names = {h[0] for h in hits if h}
            if None in hits or len(names) != 1:
                sys.exit(f"{pname}: its rows are not the rows of one tensor of {f32_path}")
            tname = names.pop()
            if tname not in decoded:
                t = quant[tname]
                decoded[tname] = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
            p.copy_(torch.from_numpy(decoded[tname][[h[1] for h in hits]].astype(np.float32)))
    return {name: t.tensor_type.name for name, t in quant.items()}


def build_k_quants(name, spec, work, out_dir, llama_cpp, llama_quantize, skip_convert=False):
    """The family's K-quant model (K_WIDTH), its Q4_K_M (and Q5_K_M) files from llama-quantize and
    transformers' logits on each file's dequantized weights."""
    import numpy as np
    import torch
    sys.path.insert(0, str(llama_cpp / "gguf-py"))
    import gguf
    kwargs = k_quant_config(spec[2])
    model_dir = work / f"{name}_k"
    model = random_model(f"{name}_k", spec, kwargs, model_dir)
    f32 = work / f"{name}_k.f32.gguf"
    run_converter(name, llama_cpp, model_dir, f32, "f32")
    ids = PROMPTS["long"]
    with torch.no_grad():
        top1 = model(torch.tensor([ids])).logits[0].argmax(-1)
    original = {k: v.clone() for k, v in model.state_dict().items()}
    entry = {"prompt": "long", "config": plain(kwargs), "files": {}}
    for qtype in K_QUANTS + (("Q5_K_M",) if name in K_QUANTS_5 else ()):
        out = out_dir / f"{name}_k.{qtype.lower()}.gguf"
        if not (skip_convert and out.exists()):
            r = subprocess.run([str(llama_quantize), str(f32), str(out), qtype], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"{name} {qtype}: llama-quantize failed:\n{r.stdout[-2000:]}{r.stderr[-3000:]}")
        model.load_state_dict(original)
        types = dequantize_into(model, f32, out, gguf)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float().numpy()
        f = f"{name}_k_long_{qtype.lower()}.npy"
        np.save(out_dir / f, logits.astype(np.float32))
        entry["files"][qtype.lower()] = {
            "gguf": out.name, "logits": f, "tensor_types": types,
            # how often the quantization kept the unquantized model's top token (recorded only)
            "top1_as_unquantized": int((torch.from_numpy(logits).argmax(-1) == top1).sum()),
        }
    return entry


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--convert":
        _, _, llama_cpp, model_dir, out, outtype, window = sys.argv
        convert(pathlib.Path(llama_cpp), model_dir, out, outtype, int(window))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("llama_cpp", type=pathlib.Path)
    ap.add_argument("--venv", type=pathlib.Path, default=pathlib.Path("/tmp/vkformer-families-venv"))
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "tests" / "golden_families")
    ap.add_argument("--only", nargs="*", help="families to (re)make; the manifest keeps the others")
    ap.add_argument("--skip-convert", action="store_true",
                    help="keep GGUF files already there (the weights are seeded: the same model)")
    ap.add_argument("--llama-quantize", type=pathlib.Path,
                    help="llama.cpp's llama-quantize (tools/build_llama_cpp_peer.sh): also make the "
                         "K-quant models; without it the manifest keeps the ones it has")
    ap.add_argument("--k-quants-only", action="store_true",
                    help="with --llama-quantize: make only the K-quant models, keep the rest")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        py = args.venv / "bin" / "python"
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(args.venv)], check=True)
            subprocess.run([str(py), "-m", "pip", "install", "torch", "transformers", "safetensors", "numpy",
                            "sentencepiece", "pyyaml"], check=True)
        os.execv(str(py), [str(py), __file__] + sys.argv[1:])
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / ".work"
    work.mkdir(exist_ok=True)
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name, spec in families().items():
        if args.only and name not in args.only:
            continue
        k_quants = manifest.get(name, {}).get("k_quants")
        if not args.k_quants_only:
            manifest[name] = build(name, spec, work, args.out, args.llama_cpp.resolve(), args.skip_convert)
        if args.llama_quantize:
            k_quants = build_k_quants(name, spec, work, args.out, args.llama_cpp.resolve(),
                                      args.llama_quantize.resolve(), args.skip_convert)
        if k_quants:
            manifest[name]["k_quants"] = k_quants
        manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
        print(name, "done", flush=True)
    import shutil
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
