#!/usr/bin/env python3
"""Writes a PyTorch transformer module as a vkformer model directory: config.json and
model.safetensors, with the configuration read off the module itself.

As a library (tools/ on sys.path):

    import export_torch
    export_torch.export(module, "my_model")                  # config.json, model.safetensors
    export_torch.export(module, "my_model", example=True)    # also example inputs and PyTorch's output

On the command line, for a whole module saved with torch.save(module, path):

    python3 tools/export_torch.py module.pt my_model [--example]

Takes nn.Transformer, nn.TransformerEncoder, nn.TransformerDecoder, and a lone
nn.TransformerEncoderLayer or nn.TransformerDecoderLayer (written as a stack of one layer, its
names prefixed with "layers.0."). Refuses, with the reason, what vkformer cannot run the same way:
other activations, bias=False, separate key/value widths, layers that differ within a stack, a
final norm whose eps differs from the layers'. The weights keep their dtype (F32, F16, BF16; other
types become F32) and need no safetensors package.

batch_first=False modules are exported too (the weights are the same), but vkformer takes
[batch, seq, feature] inputs: transpose yours. With --example (example=True) the directory also
gets inputs of batch 2 and PyTorch's output for them (expected.npy), and the script prints the
`vkformer run` command and the comparison that check the export.
"""
import argparse
import copy
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

_SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


class ExportError(ValueError):
    """The module is not one vkformer runs with the same results."""


def _activation(layer):
    act = layer.activation
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
        return "gelu"
    raise ExportError(f"activation {act!r}: vkformer runs relu and exact (erf) gelu only")


def _attention(attn, what):
    if not attn._qkv_same_embed_dim:
        raise ExportError(f"{what}: kdim/vdim differ from embed_dim, vkformer needs in_proj_weight")
    if attn.in_proj_bias is None or attn.out_proj.bias is None:
        raise ExportError(f"{what}: bias=False, vkformer's layers have biases")
    if attn.bias_k is not None or attn.add_zero_attn:
        raise ExportError(f"{what}: add_bias_kv / add_zero_attn are not supported")
    return attn.embed_dim, attn.num_heads


def _norm_eps(norm, what):
    if not norm.elementwise_affine or getattr(norm, "bias", 0) is None:
        raise ExportError(f"{what}: a LayerNorm without weight and bias is not supported")
    return norm.eps


def _layer_config(layer, decoder):
    """The config a layer implies: d_model, nhead, dim_feedforward, activation, eps, norm_first."""
    d_model, nhead = _attention(layer.self_attn, "self_attn")
    if decoder:
        if _attention(layer.multihead_attn, "multihead_attn") != (d_model, nhead):
            raise ExportError("multihead_attn and self_attn differ in width or heads")
    if layer.linear1.bias is None or layer.linear2.bias is None:
        raise ExportError("linear1/linear2: bias=False, vkformer's layers have biases")
    norms = [layer.norm1, layer.norm2] + ([layer.norm3] if decoder else [])
    eps = {_norm_eps(n, f"norm{i + 1}") for i, n in enumerate(norms)}
    if len(eps) != 1:
        raise ExportError(f"the layer's LayerNorms have different eps {sorted(eps)}")
    return dict(d_model=d_model, nhead=nhead, dim_feedforward=layer.linear1.out_features,
                activation=_activation(layer), layer_norm_eps=eps.pop(),
                norm_first=bool(getattr(layer, "norm_first", False)),
                dropout=float(layer.dropout.p), batch_first=bool(layer.self_attn.batch_first))


def _stack_config(stack, decoder, what):
    """(layer config, number of layers, has a final norm) of nn.TransformerEncoder/Decoder."""
    configs = [_layer_config(layer, decoder) for layer in stack.layers]
    if not configs:
        raise ExportError(f"{what} has no layers")
    if any(c != configs[0] for c in configs):
        raise ExportError(f"{what}: its layers differ ({configs[0]} vs another); vkformer needs one config")
    config = configs[0]
    if stack.norm is not None and _norm_eps(stack.norm, f"{what}.norm") != config["layer_norm_eps"]:
        raise ExportError(f"{what}.norm has eps {stack.norm.eps}, its layers {config['layer_norm_eps']}: "
                          "vkformer uses one layer_norm_eps")
    return config, len(configs), stack.norm is not None


def describe(module):
    """(config dict for config.json, state_dict with vkformer's names) of a supported module."""
    state = module.state_dict()
    if isinstance(module, nn.Transformer):
        enc, n_enc, enc_norm = _stack_config(module.encoder, False, "encoder")
        dec, n_dec, dec_norm = _stack_config(module.decoder, True, "decoder")
        if enc != dec:
            raise ExportError(f"encoder and decoder layers differ ({enc} vs {dec})")
        if not (enc_norm and dec_norm):
            raise ExportError("nn.Transformer without encoder.norm or decoder.norm")
        config = dict(arch="transformer", **enc, num_encoder_layers=n_enc, num_decoder_layers=n_dec)
    elif isinstance(module, (nn.TransformerEncoder, nn.TransformerDecoder)):
        decoder = isinstance(module, nn.TransformerDecoder)
        layers, n, final_norm = _stack_config(module, decoder, "decoder" if decoder else "encoder")
        config = dict(arch="decoder" if decoder else "encoder", **layers, final_norm=final_norm)
        config["num_decoder_layers" if decoder else "num_encoder_layers"] = n
    elif isinstance(module, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
        decoder = isinstance(module, nn.TransformerDecoderLayer)
        config = dict(arch="decoder" if decoder else "encoder", **_layer_config(module, decoder),
                      final_norm=False)
        config["num_decoder_layers" if decoder else "num_encoder_layers"] = 1
        state = {"layers.0." + name: t for name, t in state.items()}
    else:
        raise ExportError(f"{type(module).__name__}: expected nn.Transformer, nn.TransformerEncoder, "
                          "nn.TransformerDecoder or one of their layers")
    return config, state


def write_safetensors(path, state, metadata=None):
    """The safetensors layout: u64 little-endian header size, JSON header (tensors in the order
    given, then metadata if any), raw little-endian data."""
    header, blobs, offset = {}, [], 0
    for name, t in state.items():
        t = t.detach().cpu().contiguous()
        if t.dtype not in _SAFETENSORS_DTYPES:
            t = t.to(torch.float32)
        # 16-bit types go through int16, which numpy has (it has no bfloat16).
        raw = (t.view(torch.int16) if t.element_size() == 2 else t).numpy().tobytes()
        header[name] = {"dtype": _SAFETENSORS_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def _write_example(module, config, directory):
    """Inputs of batch 2 ([batch, seq, feature]) and PyTorch's output for them, as .npy files.
    Returns the `vkformer run` arguments that read them."""
    g = torch.Generator().manual_seed(0)
    e, batch_first = config["d_model"], config["batch_first"]
    src = torch.randn(2, 9, e, generator=g)
    tgt = torch.randn(2, 6, e, generator=g)
    as_module = (lambda x: x) if batch_first else (lambda x: x.transpose(0, 1))
    module = copy.deepcopy(module).float().eval()  # the caller's module stays as it was
    with torch.no_grad():
        if config["arch"] == "transformer":
            out = module(as_module(src), as_module(tgt))
            files, args = {"src": src, "tgt": tgt}, ["--input", "src.npy", "--target", "tgt.npy"]
        elif config["arch"] == "decoder":
            out = module(as_module(tgt), as_module(src))
            files, args = {"tgt": tgt, "memory": src}, ["--input", "tgt.npy", "--memory", "memory.npy"]
        else:
            out = module(as_module(src))
            files, args = {"src": src}, ["--input", "src.npy"]
    for name, t in dict(files, expected=as_module(out)).items():
        np.save(os.path.join(directory, name + ".npy"), t.numpy().astype(np.float32))
    return args


def export(module, directory, example=False):
    """Writes directory/config.json and directory/model.safetensors; with example=True also
    example inputs and expected.npy. Returns the config written."""
    config, state = describe(module)
    if not config.get("batch_first", True):
        print(f"export_torch: {type(module).__name__} has batch_first=False; vkformer takes "
              "[batch, seq, feature] inputs: transpose yours (the weights are the same)", file=sys.stderr)
    os.makedirs(directory, exist_ok=True)
    written = dict(config, batch_first=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(written, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(directory, "model.safetensors"), state)
    if example:
        args = _write_example(module, config, directory)
        d = directory
        run = " ".join(["vkformer run --model", d] + [a if a.startswith("--") else os.path.join(d, a) for a in args]
                       + ["--output", os.path.join(d, "out.npy")])
        print(f"check with:\n  {run}\n  npy_compare {os.path.join(d, 'out.npy')} "
              f"{os.path.join(d, 'expected.npy')} 1e-4")
    return written


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("module", help="a whole module saved with torch.save(module, path)")
    p.add_argument("directory", help="the model directory to write")
    p.add_argument("--example", action="store_true",
                   help="also write example inputs and PyTorch's output for them (expected.npy)")
    a = p.parse_args(argv)
    try:
        module = torch.load(a.module, weights_only=False)
    except TypeError:  # PyTorch before 1.13 has no weights_only
        module = torch.load(a.module)
    if not isinstance(module, nn.Module):
        sys.exit(f"export_torch: {a.module} holds a {type(module).__name__}, not a module: save the "
                 "module itself (torch.save(module, path)), not its state_dict")
    try:
        config = export(module, a.directory, a.example)
    except ExportError as e:
        sys.exit(f"export_torch: {a.module}: {e}")
    print(f"wrote {a.directory}: {config['arch']}, d_model {config['d_model']}, {config['nhead']} heads")


if __name__ == "__main__":
    main()
