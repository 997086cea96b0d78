#!/usr/bin/env python3
"""A tiny random BERT folder (Hugging Face layout: config.json, model.safetensors, vocab.txt) for
`vkformer embed` in the fault sweep, in pure Python so the sweep needs no packages.

    make_tiny_bert.py OUT_DIR

2 layers of width 16, 2 heads, feed-forward 24, 64 positions, a 20-token WordPiece vocabulary;
weights uniform from a fixed seed. The numbers mean nothing: the sweep compares a faulted run's
output only with the same model's run without faults.
"""
import json
import os
import random
import struct
import sys

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "on", "mat",
         "##s", "run", "##ning", ",", ".", "!", "big", "small"]
HIDDEN, HEADS, INTER, LAYERS, POSITIONS = 16, 2, 24, 2, 64


def tensors():
    rng = random.Random(100)
    out = []

    def add(name, shape, lo, hi):
        n = 1
        for d in shape:
            n *= d
        out.append((name, shape, [rng.uniform(lo, hi) for _ in range(n)]))

    h, v = HIDDEN, len(VOCAB)
    add("embeddings.word_embeddings.weight", [v, h], -1, 1)
    add("embeddings.position_embeddings.weight", [POSITIONS, h], -0.5, 0.5)
    add("embeddings.token_type_embeddings.weight", [2, h], -0.5, 0.5)
    add("embeddings.LayerNorm.weight", [h], 0.8, 1.2)
    add("embeddings.LayerNorm.bias", [h], -0.2, 0.2)
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for m in ("attention.self.query", "attention.self.key", "attention.self.value",
                  "attention.output.dense"):
            add(p + m + ".weight", [h, h], -0.4, 0.4)
            add(p + m + ".bias", [h], -0.2, 0.2)
        add(p + "intermediate.dense.weight", [INTER, h], -0.4, 0.4)
        add(p + "intermediate.dense.bias", [INTER], -0.2, 0.2)
        add(p + "output.dense.weight", [h, INTER], -0.4, 0.4)
        add(p + "output.dense.bias", [h], -0.2, 0.2)
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            add(p + n + ".weight", [h], 0.8, 1.2)
            add(p + n + ".bias", [h], -0.2, 0.2)
    return out


def write_safetensors(path, items):
    header, blobs, offset = {}, [], 0
    for name, shape, values in items:
        blob = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_bert.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    config = {"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
              "hidden_size": HIDDEN, "num_attention_heads": HEADS, "intermediate_size": INTER,
              "num_hidden_layers": LAYERS, "max_position_embeddings": POSITIONS,
              "type_vocab_size": 2, "vocab_size": len(VOCAB), "layer_norm_eps": 1e-12,
              "pad_token_id": 0}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    write_safetensors(os.path.join(out, "model.safetensors"), tensors())
    with open(os.path.join(out, "vocab.txt"), "w") as f:
        f.write("".join(t + "\n" for t in VOCAB))


if __name__ == "__main__":
    main()
