#!/usr/bin/env python3
"""Writes tests/golden_quant/weights.gguf, the quantized weights of tests/quant_matmul_test.cpp.

    python3 -m pip install gguf numpy
    python3 tools/make_quant_golden.py

For each weight type vkformer's kernels read (BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K, Q5_K) and each
shape [N, K] in SHAPES (K_SHAPES for the k-quants), the file holds
  "<type>.<N>x<K>"          the weights in the type's own blocks: as the `gguf` package (llama.cpp's
                            Python quantizer) quantizes them, or, for the k-quants, which it cannot
                            quantize, random blocks with model-like scales, and
  "<type>.<N>x<K>.dequant"  F32: gguf.quants.dequantize of those blocks, which vkformer's
                            dequantization must equal bit for bit and which the test's fp64
                            reference multiplies.
The values are normal(0, 0.5) with, per row, one block of zeros (d = 0) in the first row, one
constant block (max == min) in the second, and a few outliers of +-4 (large scales next to small
ones). The k-quant blocks have random quants (and Q5_K's fifth bits), 6-bit (Q4_K, Q5_K) or int8
(Q6_K) sub-block scales and mins, fp16 super-block scales of the size llama.cpp's quantizer gives normal(0, 0.5) weights,
and one super-block with d = 0 in the first row. Activations are made by the test itself.
The tensors of earlier versions of this script are unchanged (their random stream comes first).
"""
import pathlib

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "golden_quant"
TYPES = [Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1]
# N odd and past a 32-wide tile, K = one block, three blocks and SmolLM2's width.
SHAPES = [(17, 32), (65, 96), (19, 576)]
LATER_TYPES = [Q.Q5_0]
# The k-quants: K = one, two and three 256-element super-blocks (Q6_K's 210-byte super-blocks
# start at odd halfwords in every other row when K is an odd number of them).
K_TYPES = [Q.Q4_K, Q.Q6_K]
K_SHAPES = [(17, 256), (65, 512), (19, 768)]
# Added later, from a stream of their own.
LATER_K_TYPES = [Q.Q5_K]
# Byte offsets of the fp16 super-block scales (ggml-common.h) and their ranges.
K_SCALES = {Q.Q4_K: [(0, 0.0005, 0.003), (2, 0.0002, 0.002)], Q.Q6_K: [(208, 0.0002, 0.001)],
            Q.Q5_K: [(0, 0.0002, 0.0015), (2, 0.0001, 0.001)]}


def values(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    v = (0.5 * rng.standard_normal((n, k))).astype(np.float32)
    v[0, :32] = 0.0
    if n > 1:
        v[1, :32] = 0.75
    outliers = rng.integers(0, n * k, size=max(1, n * k // 200))
    v.reshape(-1)[outliers] = rng.choice([-4.0, 4.0], size=outliers.size)
    return v


def k_blocks(rng: np.random.Generator, qtype: Q, n: int, k: int) -> np.ndarray:
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    blocks = n * (k // block_size)
    raw = rng.integers(0, 256, size=(blocks, type_size), dtype=np.uint8)
    for offset, lo, hi in K_SCALES[qtype]:
        scale = rng.uniform(lo, hi, size=blocks).astype(np.float16)
        scale[0] = 0.0
        raw[:, offset:offset + 2] = scale.view(np.uint8).reshape(-1, 2)
    return raw.reshape(n, (k // block_size) * type_size)


def add_weight(w: gguf.GGUFWriter, qtype: Q, n: int, k: int, raw: np.ndarray) -> None:
    """The blocks as "<type>.<N>x<K>" and gguf's dequantization of them beside them."""
    name = f"{qtype.name.lower()}.{n}x{k}"
    w.add_tensor(name, raw, raw_dtype=qtype)
    w.add_tensor(name + ".dequant", gguf.quants.dequantize(raw, qtype).astype(np.float32))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2613)
    w = gguf.GGUFWriter(OUT / "weights.gguf", "testarch")
    for qtype in TYPES:
        for n, k in SHAPES:
            add_weight(w, qtype, n, k, gguf.quants.quantize(values(rng, n, k), qtype))
    later = np.random.default_rng(2614)
    for qtype in LATER_TYPES:
        for n, k in SHAPES:
            add_weight(w, qtype, n, k, gguf.quants.quantize(values(later, n, k), qtype))
    for qtype in K_TYPES:
        for n, k in K_SHAPES:
            add_weight(w, qtype, n, k, k_blocks(later, qtype, n, k))
    later_k = np.random.default_rng(2615)
    for qtype in LATER_K_TYPES:
        for n, k in K_SHAPES:
            add_weight(w, qtype, n, k, k_blocks(later_k, qtype, n, k))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
