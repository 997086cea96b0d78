#!/usr/bin/env python3
"""Writes tests/golden_quant/weights.gguf, the quantized weights of tests/quant_matmul_test.cpp.

    python3 -m pip install gguf numpy
    python3 tools/make_quant_golden.py

For each weight type vkformer's kernels read (BF16, Q8_0, Q4_0, Q4_1) and each shape [N, K] in
SHAPES, the file holds
  "<type>.<N>x<K>"          the weights as the `gguf` package (llama.cpp's Python quantizer)
                            quantizes them, in the type's own blocks, and
  "<type>.<N>x<K>.dequant"  F32: gguf.quants.dequantize of those blocks, which vkformer's
                            dequantization must equal bit for bit and which the test's fp64
                            reference multiplies.
The values are normal(0, 0.5) with, per row, one block of zeros (d = 0) in the first row, one
constant block (max == min) in the second, and a few outliers of +-4 (large scales next to small
ones). Activations are made by the test itself.
"""
import pathlib

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "golden_quant"
TYPES = [Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1]
# N odd and past a 32-wide tile, K = one block, three blocks and SmolLM2's width.
SHAPES = [(17, 32), (65, 96), (19, 576)]


def values(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    v = (0.5 * rng.standard_normal((n, k))).astype(np.float32)
    v[0, :32] = 0.0
    if n > 1:
        v[1, :32] = 0.75
    outliers = rng.integers(0, n * k, size=max(1, n * k // 200))
    v.reshape(-1)[outliers] = rng.choice([-4.0, 4.0], size=outliers.size)
    return v


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2613)
    w = gguf.GGUFWriter(OUT / "weights.gguf", "testarch")
    for qtype in TYPES:
        for n, k in SHAPES:
            raw = gguf.quants.quantize(values(rng, n, k), qtype)
            name = f"{qtype.name.lower()}.{n}x{k}"
            w.add_tensor(name, raw, raw_dtype=qtype)
            w.add_tensor(name + ".dequant", gguf.quants.dequantize(raw, qtype).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
