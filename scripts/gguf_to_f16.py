#!/usr/bin/env python3
"""Write an F16 copy of a quantized GGUF language model (issue 38's draft row: an F16 target for
the Q4_1 draft, "written by our tools").

  gguf_to_f16.py SRC.gguf OUT.gguf

Every quantized or F16/BF16 tensor of two or more dimensions is dequantized with the `gguf`
package (gguf.quants.dequantize) and written as F16; F32 tensors (the norms) stay F32. Every
metadata key (the tokenizer included) is copied, general.file_type set to 1 (mostly F16). The
weights are the quantized file's values, rounded to F16: the same network as the source, so a
draft of the source's quantization agrees with it on nearly every token.

Needs numpy and the `gguf` package (pip install gguf); no model file is committed.
"""
import argparse
import sys

try:
    import numpy as np
    import gguf
    from gguf import quants
except ImportError as e:
    sys.exit(f"gguf_to_f16.py: needs numpy and the gguf package ({e}); pip install gguf")


def copy_metadata(reader, writer):
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # the writer writes the header and the architecture itself
        if name == "general.file_type":
            writer.add_uint32(name, int(gguf.LlamaFileType.MOSTLY_F16))
            continue
        vtype = field.types[0]
        sub_type = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), vtype, sub_type=sub_type)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("out")
    args = ap.parse_args()
    try:
        reader = gguf.GGUFReader(args.src)
    except Exception as e:  # not a GGUF file: say so, no traceback
        sys.exit(f"gguf_to_f16.py: {args.src}: not a readable GGUF file ({e})")
    arch_field = reader.fields.get("general.architecture")
    if arch_field is None:
        sys.exit(f"gguf_to_f16.py: {args.src}: no general.architecture key")
    arch = arch_field.contents()
    writer = gguf.GGUFWriter(args.out, arch)
    copy_metadata(reader, writer)
    F32 = gguf.GGMLQuantizationType.F32
    for t in reader.tensors:
        # t.shape is ggml's order (fastest first); numpy wants the reverse
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        if t.tensor_type == F32:
            data = np.asarray(t.data, dtype=np.float32).reshape(shape)
        else:
            data = quants.dequantize(t.data, t.tensor_type).reshape(shape)
            data = data.astype(np.float16 if len(shape) >= 2 else np.float32)
        writer.add_tensor(t.name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(args.out)


if __name__ == "__main__":
    main()
