#!/usr/bin/env python3
"""Writes the GGUF test fixtures of tests/gguf_test.cpp into tests/golden_gguf/.

    python3 -m pip install gguf numpy
    python3 tools/make_gguf_fixtures.py                  # the small files below
    python3 tools/make_gguf_fixtures.py --smollm2 FILE   # also the SmolLM2 rows (FILE from
                                                         # scripts/fetch_smollm2.sh)

Everything is written with the `gguf` package (llama.cpp's own Python GGUF writer and
quantizer), and the expected f32 values are its dequantization (gguf.quants.dequantize), which
the C++ dequantize_row must equal exactly:

- all_types.gguf: one key of every metadata value type (and arrays of each, of strings, of
  arrays), and one small tensor of each type the package writes: F32 and F16 from values,
  BF16 / Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 quantized by the package, Q2_K .. Q6_K (which it can
  only dequantize) from random bytes with finite fp16 scales. expected_<TYPE>.npy: each tensor
  dequantized, shape [rows, row length].
- aligned64.gguf: general.alignment = 64 and two tensors.
- smollm2/expected.json + smollm2/*.npy (with --smollm2): a few rows of one tensor of each type
  in SmolLM2-135M-Instruct.Q4_1.gguf, dequantized.
"""
import argparse
import json
import pathlib

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "golden_gguf"

# Byte offsets of the fp16 scales in the K blocks the package cannot quantize (ggml-common.h).
K_SCALE_OFFSETS = {Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}


def metadata(w: gguf.GGUFWriter) -> None:
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.1)
    w.add_bool("test.bool_true", True)
    w.add_bool("test.bool_false", False)
    w.add_string("test.string", "héllo, 世界 🙂")
    w.add_key_value("test.empty_string", "", V.STRING)  # add_string skips empty ones
    w.add_uint64("test.u64", 18000000000000000000)
    w.add_int64("test.i64", -9000000000000000000)
    w.add_float64("test.f64", -1.0e300)
    for vtype, values in [
        (V.UINT8, [0, 1, 255]), (V.INT8, [-128, 0, 127]), (V.UINT16, [0, 65535]),
        (V.INT16, [-32768, 32767]), (V.UINT32, [0, 4294967295]), (V.INT32, [-2147483648, 7]),
        (V.FLOAT32, [1.5, -0.25, 3.0e38]), (V.BOOL, [True, False, True]),
        (V.UINT64, [0, 18446744073709551615]), (V.INT64, [-9223372036854775808, 1]),
        (V.FLOAT64, [2.5, -1.0e-300]),
    ]:
        w.add_key_value(f"test.array.{vtype.name.lower()}", values, V.ARRAY, sub_type=vtype)
    w.add_array("test.array.string", ["a", "", "ünïcode", "<|im_start|>"])
    w.add_array("test.array.nested", [[1, 2, 3], [4], [5, 6]])
    w.add_array("test.array.nested_strings", [["x", "y"], ["z"]])


def tensors(rng: np.random.Generator):
    """(name, type, bytes array, expected f32 [rows, cols])"""
    out = []

    def values(rows, cols):
        v = rng.standard_normal((rows, cols)).astype(np.float32)
        v[0, : min(cols, 32)] = 0.0       # an all-zero block: d = 0
        if rows > 1:
            v[1, : min(cols, 32)] = 0.75  # a constant block: max == min
        return v

    v = values(2, 40)
    out.append(("t.f32", Q.F32, v, v))
    v = values(3, 33).astype(np.float16)
    out.append(("t.f16", Q.F16, v, v.astype(np.float32)))
    for qtype, rows, cols in [(Q.BF16, 2, 17), (Q.Q8_0, 3, 64), (Q.Q4_0, 2, 96), (Q.Q4_1, 3, 64),
                              (Q.Q5_0, 2, 64), (Q.Q5_1, 2, 64)]:
        raw = gguf.quants.quantize(values(rows, cols), qtype)
        out.append((f"t.{qtype.name.lower()}", qtype, raw, gguf.quants.dequantize(raw, qtype)))
    for qtype, offsets in K_SCALE_OFFSETS.items():
        block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
        rows, blocks = 2, 1
        raw = rng.integers(0, 256, size=(rows * blocks, type_size), dtype=np.uint8)
        for o in offsets:
            scale = rng.uniform(0.001, 0.05, size=rows * blocks).astype(np.float16)
            raw[:, o:o + 2] = scale.view(np.uint8).reshape(-1, 2)
        raw = raw.reshape(rows, blocks * type_size)
        out.append((f"t.{qtype.name.lower()}", qtype, raw, gguf.quants.dequantize(raw, qtype)))
    return out


def write_small() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(13)
    w = gguf.GGUFWriter(OUT / "all_types.gguf", "testarch")
    metadata(w)
    for name, qtype, data, expected in tensors(rng):
        w.add_tensor(name, data, raw_dtype=qtype if data.dtype == np.uint8 else None)
        np.save(OUT / f"expected_{qtype.name}.npy", expected.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    w = gguf.GGUFWriter(OUT / "aligned64.gguf", "testarch")
    w.add_custom_alignment(64)
    w.add_tensor("a", np.arange(5, dtype=np.float32))
    w.add_tensor("b", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_smollm2(path: pathlib.Path) -> None:
    r = gguf.GGUFReader(path)
    by_name = {t.name: t for t in r.tensors}
    picks = [("token_embd.weight", [0, 1, 2, 49151]), ("blk.0.attn_q.weight", [0, 575]),
             ("blk.29.ffn_down.weight", [7]), ("blk.0.attn_norm.weight", [0]),
             ("output_norm.weight", [0])]
    out = OUT / "smollm2"
    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    for name, rows in picks:
        t = by_name[name]
        data = np.asarray(t.data)
        data = data.reshape(-1, data.shape[-1])  # [rows, row bytes or row elements]
        expected = gguf.quants.dequantize(data[rows], t.tensor_type).astype(np.float32)
        file = f"{name}.npy"
        np.save(out / file, expected)
        manifest.append({"tensor": name, "type": t.tensor_type.name, "rows": rows, "file": file})
    (out / "expected.json").write_text(json.dumps(manifest, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smollm2", type=pathlib.Path, help="SmolLM2-135M-Instruct.Q4_1.gguf")
    args = ap.parse_args()
    write_small()
    if args.smollm2:
        write_smollm2(args.smollm2)


if __name__ == "__main__":
    main()
