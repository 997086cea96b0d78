#!/usr/bin/env python3
"""Renders chat templates the way Hugging Face's apply_chat_template does (jinja2's
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, raise_exception, the tokens'
strings as bos_token / eos_token) for the conversations tests/chat_template_test.cpp replays, and
writes tests/golden_chat/renderings.json. CI needs neither jinja2 nor this script.

Templates: every models/templates/*.jinja of the llama.cpp that scripts/fetch_llama_vocabs.sh
fetches, the named templates of its tests/test-chat-template.cpp (their text is kept in the
golden file, with the BOS/EOS strings that test gives them) and the tokenizer.chat_template of
its vocabulary files (read from the GGUF by the test, BOS/EOS from the vocabulary).

    tools/make_chat_golden.py [--sdist PATH.tar.gz]

Needs jinja2 (Debian: python3-jinja2). A second run writes the same file.
"""
import argparse
import hashlib
import json
import pathlib
import re
import subprocess
import sys
import tarfile

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "golden_chat" / "renderings.json"
MEMBER = "llama_cpp_python-0.3.36/vendor/llama.cpp/tests/test-chat-template.cpp"

# (messages, add_generation_prompt); tests/chat_template_test.cpp has the same list.
CONVERSATIONS = [
    ([{"role": "user", "content": "Hi"}], True),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], True),
    ([{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
      {"role": "user", "content": "And 3+3?\nThanks"}], True),
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}], False),
    ([{"role": "system", "content": "You are a helpful assistant"},
      {"role": "user", "content": "Hello"}, {"role": "assistant", "content": " Hi there "},
      {"role": "user", "content": "Who are you"}], True),
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def environment():
    # transformers' _compile_jinja_template (utils/chat_template_utils.py).
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: json.dumps(
        x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: "26 Jul 2024"  # fixed: goldens must not change
    return env


def render(source, bos, eos):
    try:
        template = environment().from_string(source)
    except Exception as e:  # noqa: BLE001 - any template jinja2 cannot compile
        return {"error": f"compile: {e}"}
    out = []
    for messages, add_generation_prompt in CONVERSATIONS:
        try:
            out.append({"text": template.render(messages=messages, tools=None, documents=None,
                                                add_generation_prompt=add_generation_prompt,
                                                bos_token=bos, eos_token=eos)})
        except Exception as e:  # noqa: BLE001 - raise_exception and template bugs alike
            out.append({"error": str(e)})
    return {"renderings": out}


def c_string(literal):
    # A C++ string literal's value (the escapes test-chat-template.cpp uses).
    return re.sub(r'\\(.)', lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m.group(1), m.group(1)),
                  literal)


def llama_cpp_test_templates(sdist):
    with tarfile.open(sdist) as t:
        text = t.extractfile(MEMBER).read().decode()
    lit = r'"((?:[^"\\]|\\.)*)"'
    out = []
    for chunk in text.split("/* .name= */ ")[1:]:
        name = re.match(lit, chunk)
        source = re.search(r"/\* \.template_str= \*/ " + lit, chunk)
        if not name or not source:
            continue
        bos = re.search(r"/\* \.bos_token= \*/ " + lit, chunk)
        eos = re.search(r"/\* \.eos_token= \*/ " + lit, chunk)
        out.append((c_string(name.group(1)), c_string(source.group(1)),
                    c_string(bos.group(1)) if bos else "", c_string(eos.group(1)) if eos else ""))
    return out


def gguf_strings(path):
    # tokenizer.chat_template and the BOS/EOS token strings, with a small GGUF reader.
    import struct
    f = open(path, "rb")
    rd = lambda fmt: struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))
    rs = lambda: f.read(rd("Q")[0]).decode("utf-8")
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return rs()
        if t == 9:
            at, n = rd("I")[0], rd("Q")[0]
            return [value(at) for _ in range(n)]
        return rd(scalar[t])[0]
    f.read(4)
    rd("I")
    _, n_kv = rd("QQ")
    kv = {}
    for _ in range(n_kv):
        k = rs()
        kv[k] = value(rd("I")[0])
    tokens = kv["tokenizer.ggml.tokens"]
    tok = lambda key: tokens[kv[key]] if key in kv else ""
    return kv.get("tokenizer.chat_template"), tok("tokenizer.ggml.bos_token_id"), tok("tokenizer.ggml.eos_token_id")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdist", type=pathlib.Path,
                    help="the llama-cpp-python 0.3.36 sdist (default: pip download into a temporary folder)")
    args = ap.parse_args()
    vocabs = pathlib.Path(subprocess.run([str(ROOT / "scripts" / "fetch_llama_vocabs.sh")], check=True,
                                         capture_output=True, text=True).stdout.strip().splitlines()[-1])
    sdist = args.sdist
    if sdist is None:
        sys.exit("--sdist PATH: the llama_cpp_python-0.3.36.tar.gz (pip download llama-cpp-python==0.3.36 "
                 "--no-binary :all: --no-deps)")
    entries = []
    for path in sorted((vocabs / "templates").glob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        # The models/templates files name no tokens: the usual ones of their families.
        bos, eos = "<s>", "</s>"
        entry = {"source": f"templates/{path.name}", "bos_token": bos, "eos_token": eos,
                 "sha256": hashlib.sha256(source.encode()).hexdigest()}
        entry.update(render(source, bos, eos))
        entries.append(entry)
    for name, source, bos, eos in llama_cpp_test_templates(sdist):
        entry = {"source": f"test-chat-template:{name}", "template": source, "bos_token": bos, "eos_token": eos}
        entry.update(render(source, bos, eos))
        entries.append(entry)
    for path in sorted(vocabs.glob("ggml-vocab-*.gguf")):
        source, bos, eos = gguf_strings(path)
        if source is None:
            continue
        entry = {"source": f"gguf:{path.name}", "bos_token": bos, "eos_token": eos,
                 "sha256": hashlib.sha256(source.encode()).hexdigest()}
        entry.update(render(source, bos, eos))
        entries.append(entry)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"renderer": f"jinja2 {jinja2.__version__}, as transformers' apply_chat_template",
                   "conversations": [{"messages": m, "add_generation_prompt": g} for m, g in CONVERSATIONS],
                   "templates": entries}, f, ensure_ascii=False, indent=1)
    print(f"{OUT}: {len(entries)} templates")


if __name__ == "__main__":
    main()
