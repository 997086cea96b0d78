#!/usr/bin/python3
"""An fp64 PyTorch reference for llama-architecture GGUF models, and a Python tokenizer for their
byte-level BPE vocabulary. tools/make_llama_golden.py and tools/make_tiny_llama.py use it to write
the golden data vkformer's LanguageModel is tested against.

    apt-get install python3-torch libopenblas0-pthread     # Debian 12: PyTorch 1.13 (CPU)
    /usr/bin/python3 -m pip install --break-system-packages --no-deps gguf==0.19.0
    # tokenizers and (for --check-hf) transformers 4.33: see tools/make_embedding_golden.py
    OMP_WAIT_POLICY=passive /usr/bin/python3 tools/llama_reference.py MODEL.gguf \
        "The capital of France is" [--tokens 8] [--check-hf]

Weights: each tensor is dequantized to f32 by the `gguf` package (gguf.quants.dequantize, which
vkformer's dequantize_row equals bit for bit) and then held in float64; every product, sum,
norm, softmax and rotation below is float64.

RoPE: llama.cpp's convert script permutes the rows of Hugging Face's q/k projections so that
HF's rotate_half RoPE (pairs i, i + d/2) becomes ggml's interleaved RoPE (pairs 2i, 2i + 1).
This reference inverts that permutation and applies rotate_half, so it does not share the GGUF
convention it checks. With SmolLM2-135M-Instruct Q4_1 it continues "The capital of France is"
greedily with " Paris." (the known answer); a wrong un-permutation gives garbage instead.

--check-hf also runs transformers' LlamaForCausalLM in float64 on the same un-permuted weights
and prints the largest logit difference (it casts RMSNorm and softmax to float32 internally, so
expect ~1e-5 relative, not 1e-12).
"""
import argparse
import sys

import numpy as np
import torch
import gguf

torch.set_default_dtype(torch.float64)


class Config:
    """The llama hyper-parameters a GGUF file's metadata states."""

    def __init__(self, reader: gguf.GGUFReader):
        def get(key, default=None):
            field = reader.fields.get(key)
            if field is None:
                if default is None:
                    sys.exit(f"{key} missing from the GGUF metadata")
                return default
            return field.contents()

        arch = get("general.architecture")
        if arch != "llama":
            sys.exit(f"general.architecture is {arch!r}; this reference runs 'llama' only")
        self.n_layers = int(get("llama.block_count"))
        self.d_model = int(get("llama.embedding_length"))
        self.d_ff = int(get("llama.feed_forward_length"))
        self.n_heads = int(get("llama.attention.head_count"))
        self.n_kv_heads = int(get("llama.attention.head_count_kv", self.n_heads))
        self.head_dim = self.d_model // self.n_heads
        self.rms_eps = float(get("llama.attention.layer_norm_rms_epsilon"))
        self.rope_base = float(get("llama.rope.freq_base", 10000.0))
        self.rope_dims = int(get("llama.rope.dimension_count", self.head_dim))
        self.context_length = int(get("llama.context_length"))
        names = {t.name for t in reader.tensors}
        self.tied_output = "output.weight" not in names
        self.vocab_size = int(next(t for t in reader.tensors if t.name == "token_embd.weight").shape[1])
        if self.rope_dims != self.head_dim:
            sys.exit(f"rope over {self.rope_dims} of {self.head_dim} dims is not supported here")

    def __repr__(self):
        return repr(vars(self))


def unpermute_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Inverse of convert_hf_to_gguf's permute: within each head, interleaved row pairs
    (2i, 2i+1) go back to rotate_half's halves (i, i + head_dim/2)."""
    rows = w.shape[0]
    return w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_weights(reader: gguf.GGUFReader, cfg: Config) -> dict:
    """GGUF tensor name -> float64 torch tensor, rows = output features, q/k un-permuted."""
    weights = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        values = values.reshape([int(n) for n in reversed(t.shape.tolist())])
        if t.name.endswith("attn_q.weight"):
            values = unpermute_rows(values, cfg.n_heads)
        elif t.name.endswith("attn_k.weight"):
            values = unpermute_rows(values, cfg.n_kv_heads)
        weights[t.name] = torch.from_numpy(np.ascontiguousarray(values))
    return weights


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaReference:
    """A plain llama forward pass in float64, with a K/V cache so greedy decoding is cheap."""

    def __init__(self, path, dtype=torch.float64):
        """dtype float32 runs the same math in float32, to measure what an fp32 engine may
        expect to differ by; the golden data is float64."""
        reader = gguf.GGUFReader(str(path))
        self.reader = reader
        self.cfg = Config(reader)
        self.w = {k: v.to(dtype) for k, v in load_weights(reader, self.cfg).items()}
        self.output = self.w["token_embd.weight" if self.cfg.tied_output else "output.weight"]
        self.reset()

    def reset(self):
        self.cache = [None] * self.cfg.n_layers  # per layer: (k, v) [Hkv, positions, head_dim]

    @property
    def position(self):
        return 0 if self.cache[0] is None else self.cache[0][0].shape[1]

    def rope(self, x, positions):
        """x [heads, S, head_dim] (rotate_half layout) rotated by angle pos * base^(-2i/dims)."""
        c = self.cfg
        inv_freq = c.rope_base ** (-torch.arange(0, c.rope_dims, 2, dtype=torch.float64) / c.rope_dims)
        angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        return x * angles.cos().to(x.dtype) + rotate_half(x) * angles.sin().to(x.dtype)

    def forward(self, ids):
        """Runs ids at positions [position, position + len(ids)), keeps their K/V, returns the
        logits of every one of them [len(ids), vocab] (float64)."""
        c, w = self.cfg, self.w
        ids = torch.as_tensor(ids, dtype=torch.long)
        n = ids.shape[0]
        start = self.position
        positions = torch.arange(start, start + n)
        x = w["token_embd.weight"][ids]
        group = c.n_heads // c.n_kv_heads
        # Causal mask over all cached + new keys: key j is visible to query i if j <= start + i.
        keys = torch.arange(start + n)
        mask = torch.where(keys[None, :] <= positions[:, None], 0.0, float("-inf")).to(x.dtype)
        for layer in range(c.n_layers):
            p = f"blk.{layer}."
            h = rms_norm(x, w[p + "attn_norm.weight"], c.rms_eps)
            q = (h @ w[p + "attn_q.weight"].T).view(n, c.n_heads, c.head_dim).transpose(0, 1)
            k = (h @ w[p + "attn_k.weight"].T).view(n, c.n_kv_heads, c.head_dim).transpose(0, 1)
            v = (h @ w[p + "attn_v.weight"].T).view(n, c.n_kv_heads, c.head_dim).transpose(0, 1)
            q, k = self.rope(q, positions), self.rope(k, positions)
            if self.cache[layer] is not None:
                k = torch.cat((self.cache[layer][0], k), dim=1)
                v = torch.cat((self.cache[layer][1], v), dim=1)
            self.cache[layer] = (k, v)
            # Query head h reads KV head h // group (grouped-query attention).
            k_all = k.repeat_interleave(group, dim=0)
            v_all = v.repeat_interleave(group, dim=0)
            scores = q @ k_all.transpose(1, 2) / np.sqrt(c.head_dim) + mask
            attn = torch.softmax(scores, dim=-1) @ v_all  # [H, n, hd]
            x = x + attn.transpose(0, 1).reshape(n, c.d_model) @ w[p + "attn_output.weight"].T
            h = rms_norm(x, w[p + "ffn_norm.weight"], c.rms_eps)
            gate = h @ w[p + "ffn_gate.weight"].T
            up = h @ w[p + "ffn_up.weight"].T
            x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "ffn_down.weight"].T
        x = rms_norm(x, w["output_norm.weight"], c.rms_eps)
        return x @ self.output.T

    def full_logits(self, ids):
        """All positions' logits of ids from position 0, without touching the cache."""
        saved = self.cache
        self.reset()
        try:
            return self.forward(ids)
        finally:
            self.cache = saved

    def greedy(self, prompt, n_tokens):
        """Greedy continuation of prompt (cached decoding): (new ids, logits of each step [n, vocab])."""
        self.reset()
        logits = self.forward(prompt)[-1]
        out, steps = [], []
        for _ in range(n_tokens):
            steps.append(logits)
            token = int(torch.argmax(logits))
            out.append(token)
            logits = self.forward([token])[-1]
        return out, torch.stack(steps)


def top2_margin(logits):
    """logit(top-1) - logit(top-2) for each row: small margins mark near ties."""
    top = torch.topk(logits, 2, dim=-1).values
    return top[..., 0] - top[..., 1]


def hf_logits(ref: LlamaReference, ids):
    """transformers' LlamaForCausalLM (4.33) in float64 on the same un-permuted weights."""
    from transformers import LlamaConfig, LlamaForCausalLM
    c, w = ref.cfg, ref.w
    config = LlamaConfig(vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff,
                         num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads,
                         num_key_value_heads=c.n_kv_heads, rms_norm_eps=c.rms_eps,
                         rope_theta=c.rope_base, max_position_embeddings=c.context_length,
                         tie_word_embeddings=c.tied_output, hidden_act="silu")
    model = LlamaForCausalLM(config).double().eval()
    names = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm",
             "ffn_norm": "post_attention_layernorm"}
    state = {"model.embed_tokens.weight": w["token_embd.weight"], "model.norm.weight": w["output_norm.weight"],
             "lm_head.weight": ref.output}
    for layer in range(c.n_layers):
        for g, h in names.items():
            state[f"model.layers.{layer}.{h}.weight"] = w[f"blk.{layer}.{g}.weight"]
    missing = [k for k in model.state_dict() if k not in state and "rotary_emb" not in k]
    if missing:
        sys.exit(f"HF weights not filled: {missing[:5]}")
    model.load_state_dict(state, strict=False)
    with torch.no_grad():
        return model(torch.as_tensor([ids])).logits[0]


# ---- tokenizer ------------------------------------------------------------------------------

def tokenizer_from_gguf(reader: gguf.GGUFReader):
    """A `tokenizers` byte-level BPE with the GGUF's tokens and merges, SmolLM2's pre-tokenizer
    (digits one by one, then the GPT-2 regex) and its control tokens as special tokens. Used only
    to make the golden ids; vkformer's C++ tokenizer is tested against llama.cpp separately."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    pre = reader.fields["tokenizer.ggml.pre"].contents() if "tokenizer.ggml.pre" in reader.fields else "default"
    if reader.fields["tokenizer.ggml.model"].contents() != "gpt2" or pre != "smollm":
        sys.exit(f"tokenizer is not gpt2/smollm (pre {pre!r}); only SmolLM2's is built here")
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ")) for m in reader.fields["tokenizer.ggml.merges"].contents()]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    control = gguf.TokenType.CONTROL
    tok.add_special_tokens([AddedToken(t, normalized=False)
                            for t, ty in zip(tokens, types) if ty == control])
    return tok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("text")
    ap.add_argument("--tokens", type=int, default=8, help="greedy tokens to generate")
    ap.add_argument("--check-hf", action="store_true", help="compare with transformers' LlamaForCausalLM")
    args = ap.parse_args()
    ref = LlamaReference(args.model)
    print(ref.cfg)
    tok = tokenizer_from_gguf(ref.reader)
    ids = tok.encode(args.text, add_special_tokens=False).ids
    print("ids", ids)
    out, steps = ref.greedy(ids, args.tokens)
    print("greedy", out, repr(tok.decode(out)))
    print("margins", [round(float(m), 3) for m in top2_margin(steps)])
    if args.check_hf:
        mine = ref.full_logits(ids + out)
        theirs = hf_logits(ref, ids + out)
        diff = (mine - theirs).abs().max(dim=-1).values / mine.abs().max(dim=-1).values
        print(f"HF float64 vs this reference: max |diff| / max|logit| per position <= {float(diff.max()):.3g}")


if __name__ == "__main__":
    main()
