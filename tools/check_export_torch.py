#!/usr/bin/env python3
"""Checks tools/export_torch.py end to end: exports each kind of PyTorch module it takes, runs the
export with `vkformer run` and compares with PyTorch's own output (npy_compare), and checks that
what vkformer cannot run the same way is refused with a reason. Needs PyTorch; CMake registers it
as the ctest `export_torch` only where /usr/bin/python3 imports torch.

    python3 tools/check_export_torch.py VKFORMER NPY_COMPARE WORK_DIR [LAUNCHER...]
"""
import os
import shutil
import subprocess
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch  # noqa: E402


def modules():
    """(name, module): every kind export_torch takes, with the options that change the math."""
    torch.manual_seed(0)
    e, h, f = 32, 4, 48
    enc_layer = lambda **kw: nn.TransformerEncoderLayer(e, h, f, batch_first=True, **kw)
    dec_layer = lambda **kw: nn.TransformerDecoderLayer(e, h, f, batch_first=True, **kw)
    yield "encoder_layer_alone", enc_layer()
    yield "decoder_layer_alone", dec_layer(activation="gelu", norm_first=True)
    yield "encoder_stack_norm_gelu_prenorm", nn.TransformerEncoder(
        enc_layer(activation="gelu", norm_first=True, layer_norm_eps=1e-6), 2,
        norm=nn.LayerNorm(e, eps=1e-6))
    yield "decoder_stack", nn.TransformerDecoder(dec_layer(), 2)
    yield "transformer_seq_first", nn.Transformer(e, h, 1, 2, f)  # batch_first=False
    yield "transformer_f16_weights", nn.Transformer(e, h, 2, 1, f, batch_first=True).half()


def refused():
    """(module, fragment of the reason) that export_torch must refuse."""
    yield nn.TransformerEncoderLayer(16, 2, 32, activation=torch.tanh), "activation"
    yield nn.TransformerEncoderLayer(16, 2, 32, activation=nn.GELU(approximate="tanh")), "activation"
    attn = nn.TransformerEncoderLayer(16, 2, 32)
    attn.self_attn = nn.MultiheadAttention(16, 2, bias=False)
    yield attn, "bias=False"
    mixed = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32), 2)
    mixed.layers[1] = nn.TransformerEncoderLayer(16, 2, 64)
    yield mixed, "layers differ"
    yield nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32), 1, norm=nn.LayerNorm(16, eps=1e-3)), "eps"
    yield nn.Linear(4, 4), "expected nn.Transformer"


def main():
    vkformer, npy_compare, work = sys.argv[1:4]
    # Any further arguments: the emulator that runs the programs in a cross build (wine).
    launcher = sys.argv[4:]
    shutil.rmtree(work, ignore_errors=True)
    failures = 0
    for name, module in modules():
        d = os.path.join(work, name)
        config = export_torch.export(module, d, example=True)
        inputs = {"transformer": ["--input", "src.npy", "--target", "tgt.npy"],
                  "decoder": ["--input", "tgt.npy", "--memory", "memory.npy"],
                  "encoder": ["--input", "src.npy"]}[config["arch"]]
        args = [a if a.startswith("--") else os.path.join(d, a) for a in inputs]
        out = os.path.join(d, "out.npy")
        run = subprocess.run([*launcher, vkformer, "run", "--model", d, *args, "--output", out], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAIL {name}: vkformer run: {run.stderr.strip()}")
            failures += 1
            continue
        # f16 weights are exact in f32; the rest is fp32 against PyTorch's fp32.
        cmp = subprocess.run([*launcher, npy_compare, out, os.path.join(d, "expected.npy"), "2e-5"],
                             capture_output=True, text=True)
        print(("ok  " if cmp.returncode == 0 else "FAIL ") + f"{name} ({config['arch']}): "
              + (cmp.stdout + cmp.stderr).strip())
        failures += cmp.returncode != 0
    for module, reason in refused():
        try:
            export_torch.describe(module)
            print(f"FAIL {type(module).__name__}: exported, expected a refusal mentioning '{reason}'")
            failures += 1
        except export_torch.ExportError as e:
            ok = reason in str(e)
            print(("ok  " if ok else "FAIL ") + f"refused: {e}")
            failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
