#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses (fuzz/corpus/<reader>/): a few small valid files
of each format and a few broken ones. Run from anywhere; it rewrites only the files it names.
The committed corpus is what this script writes; keep it a few KB."""
import io
import json
import os
import struct

import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(reader, name, data):
    os.makedirs(os.path.join(HERE, reader), exist_ok=True)
    with open(os.path.join(HERE, reader, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None, pad=True, trailing=b""):
    """tensors: [(name, dtype, shape, raw bytes)], laid out one after another."""
    header, blobs, offset = {}, [], 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs) + trailing


def st_header(text, data=b""):
    return struct.pack("<Q", len(text)) + text.encode() + data


def npy(array, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, array)
    else:
        np.lib.format.write_array(buf, array, version=version)
    return buf.getvalue()


def main():
    f32 = np.arange(6, dtype="<f4").reshape(2, 3)
    # ---- safetensors: valid
    put("safetensors", "f32_2x3", safetensors([("w", "F32", [2, 3], f32.tobytes())]))
    put("safetensors", "mixed_dtypes", safetensors([
        ("a", "F16", [2], np.array([1.5, -2], "<f2").tobytes()),
        ("b", "BF16", [1, 2], b"\x80\x3f\x00\xc0"),
        ("c", "I64", [2], np.array([7, -1], "<i8").tobytes()),
        ("d", "BOOL", [3], b"\x01\x00\x01"),
        ("e", "U8", [], b"\x05"),
        ("f", "F64", [1], np.array([0.25], "<f8").tobytes()),
        ("g", "F8_E4M3", [2], b"\x38\x40"),
    ], metadata={"format": "pt"}))
    put("safetensors", "empty_header", safetensors([]))
    put("safetensors", "zero_size", safetensors([("z", "F32", [0, 4], b""),
                                                  ("s", "I32", [1], b"\x01\x00\x00\x00")]))
    put("safetensors", "rank4_i16", safetensors([("t", "I16", [1, 1, 2, 1], b"\xff\x7f\x00\x80")]))
    # ---- safetensors: broken
    put("safetensors", "bad_trailing_bytes",
        safetensors([("w", "F32", [1], b"\0\0\x80\x3f")], trailing=b"\0\0\0\0"))
    put("safetensors", "bad_gap", st_header(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
        '"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}', b"\1\2\3"))
    put("safetensors", "bad_overlap", st_header(
        '{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
        '"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}', b"\1\2\3"))
    put("safetensors", "bad_truncated", safetensors([("w", "F32", [2, 3], f32.tobytes())])[:-5])
    put("safetensors", "bad_header_length", struct.pack("<Q", 1 << 40) + b"{}")
    put("safetensors", "bad_escapes", st_header('{"\\ud800x":{}, "__metadata__":{"k":"\\u00e9"}}'))
    put("safetensors", "bad_nesting", st_header(
        '{"w":{"dtype":"F32","shape":[],"data_offsets":[0,4],"x":[[[{"a":[1e5,-0.5,true]}]]]}}',
        b"\0\0\0\0"))

    # ---- npy: valid
    put("npy", "f4_2x3", npy(f32))
    put("npy", "f2_scalar", npy(np.array(1.5, "<f2")))
    put("npy", "i8_v2", npy(np.array([1, -2, 3], "<i8"), version=(2, 0)))
    put("npy", "b1_fortran_1d", npy(np.asfortranarray(np.array([True, False]))))
    put("npy", "u1_empty", npy(np.zeros((0, 3), "u1")))
    put("npy", "u4_v3", npy(np.array([[4294967295]], "<u4"), version=(3, 0)))
    # ---- npy: broken
    put("npy", "bad_truncated", npy(f32)[:-3])
    put("npy", "bad_big_endian", npy(np.array([1.0], ">f8")))
    put("npy", "bad_header", b"\x93NUMPY\x01\x00\x20\x00{'descr': '<f4', 'shape': (1,), \n")
    put("npy", "bad_trailing", npy(np.array([1], "<i4")) + b"\0")

    # ---- config.json: valid (as in tests/golden), then broken
    put("config", "seq2seq", json.dumps({
        "arch": "seq2seq", "num_encoder_layers": 2, "num_decoder_layers": 2, "src_vocab": 40,
        "tgt_vocab": 48, "max_len": 128, "d_model": 32, "nhead": 4, "dim_feedforward": 64,
        "activation": "relu", "layer_norm_eps": 1e-05, "norm_first": False, "final_norm": True},
        indent=2))
    put("config", "encoder_torch_args", json.dumps({
        "arch": "encoder", "d_model": 16, "nhead": 2, "dim_feedforward": 32,
        "num_encoder_layers": 1, "activation": "gelu", "layer_norm_eps": 1e-6,
        "norm_first": True, "final_norm": True, "dropout": 0.1, "batch_first": True,
        "bias": True, "device": None, "dtype": "float32", "enable_nested_tensor": False,
        "mask_check": True}))
    put("config", "decoder", '{"arch":"decoder","d_model":8,"nhead":8,"dim_feedforward":1,'
                             '"num_decoder_layers":3}')
    put("config", "transformer", '{"arch":"transformer","d_model":512,"nhead":8,'
                                 '"dim_feedforward":2048,"num_encoder_layers":6,'
                                 '"num_decoder_layers":6}')
    put("config", "bad_duplicate_key", '{"arch":"encoder","d_model":8,"d_model":16}')
    put("config", "bad_types", '{"arch":1,"d_model":8.5,"nhead":"2","layer_norm_eps":1e400}')
    put("config", "bad_nesting", '{"arch":"encoder","x":[[[[{"a":{"b":[null]}}]]]]}')
    put("config", "bad_truncated", '{"arch":"encoder","d_model":')


if __name__ == "__main__":
    main()
