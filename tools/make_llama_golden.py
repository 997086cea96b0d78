#!/usr/bin/python3
"""Writes tests/golden_llama/: token ids, fp64 reference logits, greedy continuations and
teacher-forced argmaxes of SmolLM2-135M-Instruct Q4_1, which vkformer's LanguageModel tests
compare with (tests/golden_llama/README.md says how and at which tolerance).

    OMP_WAIT_POLICY=passive /usr/bin/python3 tools/make_llama_golden.py [--model FILE]
    # FILE defaults to what scripts/fetch_smollm2.sh prints; setup: tools/llama_reference.py

The reference is tools/llama_reference.py (float64 throughout, weights dequantized from the same
GGUF by the gguf package). Token ids come from a `tokenizers` byte-level BPE built from the
GGUF's vocabulary and merges (llama_reference.tokenizer_from_gguf); the files store the ids, so
the C++ tests feed ids and do not depend on vkformer's tokenizer.

Logits are stored as float16: the rounding of a row is at most 2^-11 x max|logit| (measured:
4.3e-4), twenty times inside the 1e-2 x max|logit| tolerance they are checked with.
"""
import argparse
import hashlib
import importlib.metadata
import json
import pathlib
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import llama_reference as ref_lib  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "golden_llama"
GREEDY_TOKENS = 32
TOP_K = 5

PROMPTS = {
    "plain": "The capital of France is",
    "chat": "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    # Chosen among a few code and list prompts for the largest smallest top-2 margin (0.13).
    "list": "A list of the planets in the solar system:\n1. Mercury\n2.",
}
# The prompt whose logits are stored at every position (the others: at the last position only).
ALL_POSITIONS = "plain"

# Written for this file: plain English prose, long enough for more than 300 tokens.
LONG_TEXT = (
    "The old harbour town woke slowly on winter mornings. Before the sun cleared the hills, the "
    "fishing boats had already left, their lamps drifting out past the breakwater like a line of "
    "small stars. The baker on the corner lit his ovens at four, and by six the smell of fresh "
    "bread reached the square, where a few stalls were being set up for the weekly market. "
    "Most of the traders had come for years: a woman who sold honey from her own hives, two "
    "brothers with crates of apples and pears, and an elderly man who repaired clocks and "
    "radios on a folding table.\n\n"
    "Visitors often asked why the town had never grown into a city. The answer was partly "
    "geography. The cliffs to the north left no room for new streets, and the only road inland "
    "climbed steeply through a narrow valley that flooded every few winters. When the railway "
    "was planned in the last century, the engineers chose a flatter route twenty miles away, and "
    "the factories followed the railway. The town kept its harbour, its school and its small "
    "hospital, but the young people who wanted careers in engineering or medicine usually moved "
    "away.\n\n"
    "In recent years, however, something had changed. Fast internet reached the valley, and a "
    "handful of people discovered that they could work for companies in distant cities while "
    "living beside the sea. They restored empty houses, opened a bookshop and a cafe, and "
    "started a sailing club for children. The school, which had been close to closing, now had "
    "enough pupils for three classes again. Some residents worried that prices would rise and "
    "that the town would lose its character, while others were simply glad to see lights in "
    "windows that had been dark for a decade. At the monthly council meeting, the debate about "
    "how to balance these hopes and fears was usually polite, occasionally heated, and always "
    "followed by tea."
)
# Positions of the long text whose full logits are stored (the last one is added).
LONG_LOGIT_POSITIONS = [0, 1, 7, 31, 63, 127, 200, 255]


def default_model() -> pathlib.Path:
    out = subprocess.run([str(ROOT / "scripts" / "fetch_smollm2.sh")], check=True,
                         capture_output=True, text=True).stdout
    return pathlib.Path(out.strip().splitlines()[-1])


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def topk(logits):
    values, ids = torch.topk(logits, TOP_K, dim=-1)
    return ids.tolist(), [[round(float(v), 5) for v in row] for row in values]


def save_logits(name, logits, positions, files):
    path = OUT / f"logits_{name}.npy"
    arr = logits.numpy().astype(np.float16)
    if not np.isfinite(arr).all():
        sys.exit(f"{name}: logits overflow float16")
    np.save(path, arr)
    files[path.name] = {"dtype": "float16", "shape": list(arr.shape), "positions": positions,
                        "max_abs_logit_per_row": [round(float(m), 4) for m in logits.abs().max(-1).values]}
    return path.name


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=pathlib.Path, help="SmolLM2-135M-Instruct.Q4_1.gguf")
    args = ap.parse_args()
    model = args.model or default_model()
    OUT.mkdir(parents=True, exist_ok=True)

    ref = ref_lib.LlamaReference(model)
    tok = ref_lib.tokenizer_from_gguf(ref.reader)
    files, cases = {}, {}

    for name, text in PROMPTS.items():
        ids = tok.encode(text, add_special_tokens=False).ids
        if tok.decode(ids, skip_special_tokens=False) != text:
            sys.exit(f"{name}: ids do not decode back to the text")
        new, step_logits = ref.greedy(ids, GREEDY_TOKENS)
        # The same sequence recomputed from scratch (no cache) must agree: its argmax at each
        # step is the greedy token, and its logits equal the cached ones to rounding.
        full = ref.full_logits(ids + new)
        recomputed = full[len(ids) - 1: len(ids) - 1 + GREEDY_TOKENS]
        drift = float((recomputed - step_logits).abs().max())
        if recomputed.argmax(-1).tolist() != new or drift > 1e-9:
            sys.exit(f"{name}: cached greedy and full recompute disagree (max |diff| {drift})")
        margins = ref_lib.top2_margin(recomputed)
        end = [i for i, t in enumerate(new) if t in (tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>"))]
        positions = list(range(len(ids))) if name == ALL_POSITIONS else [len(ids) - 1]
        top_ids, top_values = topk(recomputed)
        cases[name] = {
            "text": text, "ids": ids,
            "logits_file": save_logits(name, full[positions], positions, files),
            "greedy": {"ids": new, "text": tok.decode(new, skip_special_tokens=False),
                       "first_end_of_generation": end[0] if end else None,
                       "top2_margin": [round(float(m), 5) for m in margins],
                       "top5_ids": top_ids, "top5_logits": top_values},
        }
        print(f"{name}: {len(ids)} ids, greedy {tok.decode(new, skip_special_tokens=False)!r}, "
              f"min margin {float(margins.min()):.4f} at step {int(margins.argmin())}, cache drift {drift:.2g}")

    ids = tok.encode(LONG_TEXT, add_special_tokens=False).ids
    if len(ids) < 300:
        sys.exit(f"the long text has {len(ids)} tokens; make it longer")
    if tok.decode(ids, skip_special_tokens=False) != LONG_TEXT:
        sys.exit("the long text's ids do not decode back to it")
    full = ref.full_logits(ids)
    margins = ref_lib.top2_margin(full)
    positions = LONG_LOGIT_POSITIONS + [len(ids) - 1]
    top_ids, top_values = topk(full)
    argmax = full.argmax(-1).tolist()
    cases["long"] = {
        "text": LONG_TEXT, "ids": ids,
        "logits_file": save_logits("long", full[positions], positions, files),
        "teacher_forced": {"argmax": argmax, "top2_margin": [round(float(m), 5) for m in margins],
                           "top5_ids": top_ids, "top5_logits": top_values,
                           "argmax_equals_next_id": sum(a == b for a, b in zip(argmax, ids[1:]))},
    }
    print(f"long: {len(ids)} ids; argmax = next id at {cases['long']['teacher_forced']['argmax_equals_next_id']} "
          f"positions; margins < 0.05 at {int((margins < 0.05).sum())}, < 0.2 at {int((margins < 0.2).sum())}")

    import tokenizers
    manifest = {
        "what": "SmolLM2-135M-Instruct Q4_1: float64 reference logits, greedy continuations and "
                "teacher-forced argmaxes (tests/golden_llama/README.md)",
        "command": "OMP_WAIT_POLICY=passive /usr/bin/python3 tools/make_llama_golden.py",
        "model": {"file": model.name, "sha256": sha256(model), "config": vars(ref.cfg)},
        "reference": "tools/llama_reference.py: float64 PyTorch, weights from gguf.quants.dequantize, "
                     "q/k un-permuted, Hugging Face rotate_half RoPE",
        "versions": {"torch": torch.__version__, "gguf": importlib.metadata.version("gguf"),
                     "tokenizers": tokenizers.__version__, "numpy": np.__version__},
        "ids_made_by": "tokenizers ByteLevel BPE from the GGUF tokens/merges, pre-tokenizer Digits(individual) + "
                       "ByteLevel(GPT-2 regex), control tokens special; add_special_tokens=False (add_bos_token is false)",
        "greedy_tokens": GREEDY_TOKENS,
        "logits_storage": "float16 rows at the listed positions (rounding <= 2^-11 x max|logit|)",
        "files": files,
        "cases": cases,
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    total = sum(p.stat().st_size for p in OUT.glob("*") if p.is_file())
    print(f"wrote {OUT} ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
