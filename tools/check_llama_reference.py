#!/usr/bin/python3
"""Checks the golden data of tests/golden_llama against llama.cpp, an independent implementation:

    /usr/bin/python3 tools/check_llama_reference.py --llama-cpp /tmp/llama_cpp_logits [--model FILE]

(build the helper from tools/llama_cpp_logits.cpp, as its first lines say). It prints:
1. whether llama.cpp's tokenizer gives the golden ids (SmolLM2's prompts and long text, the tiny
   vocabulary's texts);
2. llama.cpp's logits for the golden ids on copies of the models with every weight dequantized to
   F32 (by the gguf package, so both sides use the same numbers) and K/V kept in f32: these
   measure the reference's conventions (RoPE pairs and base, grouped heads, norms, tied output),
   and must agree to rounding;
3. the same on the quantized files as they are, where llama.cpp quantizes activations to 8 bits
   for its quantized matmuls and keeps K/V in f16: for scale only.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import gguf

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden_llama"


def f32_copy(src, dst):
    """src with every tensor dequantized to F32; the metadata unchanged but the file type."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.file_type"):
            continue
        sub = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    for t in r.tensors:
        shape = [int(n) for n in reversed(t.shape.tolist())]
        w.add_tensor(t.name, gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


class LlamaCpp:
    def __init__(self, binary, scratch):
        self.binary, self.scratch = binary, pathlib.Path(scratch)

    def tokenize(self, model, texts):
        files = []
        for i, text in enumerate(texts):
            files.append(self.scratch / f"text{i}.txt")
            files[-1].write_bytes(text.encode())
        out = subprocess.run([self.binary, "tok", str(model)] + [str(f) for f in files],
                             check=True, capture_output=True, text=True).stdout
        return [[int(i) for i in line.split()] for line in out.splitlines()]

    def logits(self, model, ids, f32_cache):
        out = self.scratch / "logits.f32"
        flags = ["--f32-cache"] if f32_cache else []
        subprocess.run([self.binary, "logits", str(model), str(out)] + flags + [str(i) for i in ids], check=True)
        return np.fromfile(out, np.float32).reshape(len(ids), -1).astype(np.float64)


def rel_err(got, want):
    return np.abs(got - want).max(-1) / np.abs(want).max(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True, help="the binary built from tools/llama_cpp_logits.cpp")
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/vkformer/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    args = ap.parse_args()
    manifest = json.loads((GOLDEN / "manifest.json").read_text())
    tiny = json.loads((GOLDEN / "tiny" / "golden.json").read_text())
    ok = True
    with tempfile.TemporaryDirectory() as scratch:
        cpp = LlamaCpp(args.llama_cpp, scratch)
        cases = manifest["cases"]
        got = cpp.tokenize(args.model, [c["text"] for c in cases.values()])
        for (name, c), ids in zip(cases.items(), got):
            ok &= ids == c["ids"]
            print(f"ids  SmolLM2 {name}: {'equal' if ids == c['ids'] else 'DIFFERENT'} ({len(ids)} ids)")
        got = cpp.tokenize(GOLDEN / "tiny" / "tiny_llama_tied.gguf", [t["text"] for t in tiny["texts"]])
        same = sum(a == t["ids"] for a, t in zip(got, tiny["texts"]))
        ok &= same == len(tiny["texts"])
        print(f"ids  tiny texts: {same}/{len(tiny['texts'])} equal")

        models = {"SmolLM2": args.model}
        models.update({f"tiny {k}": GOLDEN / "tiny" / e["file"] for k, e in tiny["models"].items()})
        for label, path in models.items():
            f32 = pathlib.Path(scratch) / "f32.gguf"
            f32_copy(path, f32)
            for exact, model in ((True, f32), (False, path)):
                kind = "F32 weights, f32 K/V" if exact else "as stored (quantized)"
                if label == "SmolLM2":
                    rows = []
                    for name, c in cases.items():
                        l = cpp.logits(model, c["ids"], exact)
                        spec = manifest["files"][c["logits_file"]]
                        want = np.load(GOLDEN / c["logits_file"]).astype(np.float64)
                        rows.append(rel_err(l[spec["positions"]], want).max())
                        if "teacher_forced" in c:
                            top1 = int((l.argmax(-1) == np.array(c["teacher_forced"]["argmax"])).sum())
                            n = len(c["ids"])
                    worst = max(rows)
                    # f16 storage of the golden rows rounds by up to 2^-11 x max|logit|.
                    ok &= not exact or worst < 1e-3
                    print(f"logits SmolLM2, {kind}: max |diff| / max|logit| {worst:.2e}, teacher-forced top-1 {top1}/{n}")
                else:
                    kind_name = label.split()[1]
                    worst, agree, total = 0.0, 0, 0
                    for s in tiny["models"][kind_name]["sequences"].values():
                        l = cpp.logits(model, s["ids"], exact)
                        want = np.load(GOLDEN / "tiny" / s["logits_file"]).astype(np.float64)
                        worst = max(worst, rel_err(l, want).max())
                        agree += int((l.argmax(-1) == np.array(s["argmax"])).sum())
                        total += len(s["ids"])
                    ok &= not exact or worst < 1e-4
                    print(f"logits {label}, {kind}: max |diff| / max|logit| {worst:.2e}, top-1 {agree}/{total}")
    print("llama.cpp agrees with the golden data" if ok else "MISMATCH: see above")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
