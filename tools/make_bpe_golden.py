#!/usr/bin/env python3
"""Writes tests/golden_bpe: a corpus of texts and, for each byte-level BPE vocabulary, the ids
llama.cpp's own tokenizer gives them. tests/bpe_tokenizer_test.cpp compares vkformer's
GgufTokenizer with these ids.

    tools/build_llama_cpp_peer.sh                      # llama.cpp, once
    tools/make_bpe_golden.py [--peer DIR] [--llama-tokenize PATH]

The ids come from llama.cpp's llama_tokenize, called as its llama-tokenize tool calls it
(add_special = the vocabulary's add_bos, special tokens parsed, then not), by
tools/llama_tokenize_corpus.cpp, which this script compiles against the peer build (libllama) so
that each vocabulary is loaded once. With --llama-tokenize, every text of the first vocabulary
is also run through the llama-tokenize tool itself (`--ids --no-escape`, one process per text)
and must give the same ids.

Files written:
  corpus.json   the texts, in order: {"category", "text"}, or {"category", "hex"} for texts
                that are not valid UTF-8 (their bytes in hex)
  <vocab>.json  {"vocab", "sha256", "peer", "add_special", "ids", "ids_no_parse_special"}:
                for each text, the ids with special tokens parsed (llama-tokenize's default) and
                without (--no-parse-special); add_special is whether BOS/EOS were added, which
                llama-tokenize does when the file asks for BOS.

Vocabularies: SmolLM2-135M-Instruct (scripts/fetch_smollm2.sh; pre-tokenizer smollm) and
llama.cpp's vocabulary-only files (scripts/fetch_llama_vocabs.sh) named in LLAMA_VOCABS:
byte-level BPE (gpt-2, llama-bpe = Llama 3, qwen2, falcon, ...), SentencePiece (llama-spm =
Llama 2 / Mistral, phi-3) and SentencePiece-style BPE (gemma-4). --only NAME... rewrites only
those (and corpus.json, the same texts). The random texts use a fixed seed, so a second run
writes the same files.
"""
import argparse
import hashlib
import json
import pathlib
import random
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "tests" / "golden_bpe"
PEER_SOURCES = "llama_cpp_python-0.3.36/vendor/llama.cpp"
PEER = "llama.cpp vendored by llama-cpp-python 0.3.36 (PyPI sdist): llama_tokenize as llama-tokenize calls it"
SEED = 20261124
RANDOM_TEXTS = 48
LLAMA_VOCABS = ["gpt-2", "llama-bpe", "qwen2", "falcon", "llama-spm", "phi-3", "gemma-4",
                "command-r", "deepseek-coder", "deepseek-llm", "mpt", "qwen35", "refact", "starcoder",
                "aquila", "gpt-neox", "baichuan"]

HAND = {
    "english": [
        "Hello world", "Hello, world!", " Hello world", "hello", "HELLO", "Hello World",
        "The quick brown fox jumps over the lazy dog.",
        "What is the capital of France?",
        "Write a short poem about the sea.",
        "Transformers process sequences of tokens in parallel.",
        "I'd like a cup of tea, please.",
        "It was the best of times, it was the worst of times.",
        "e.g. i.e. etc. vs. Mr. Mrs. Dr.",
        "A-B-C, x/y, (parenthesized) [bracketed] {braced} <angled>",
        "Question? Answer! Ellipsis... Semicolon; colon: dash - em\u2014dash",
        "\"double quotes\" and 'single quotes' and `backticks`",
        "email@example.com https://example.org/path?q=1&r=2#frag",
        "@user #hashtag $100 50% ^caret ~tilde |pipe| \\backslash",
        "a", "I", "ok", ".", ",", "!", "?!?!", "...", "---", "___", "***",
    ],
    "contractions": [
        "don't", "Don't", "DON'T", "I'm", "I'M", "they're", "they'RE", "we've", "WE'VE",
        "she'll", "SHE'LL", "he'd", "it's", "IT'S", "'s 't 're 've 'm 'll 'd",
        "'", "''", "'''", "rock 'n' roll", "o'clock", "y'all", "ma'am",
        "can't won't shouldn't", "'tis", "'twas the night", "the '90s", "'S 'T 'Re 'vE 'M 'Ll 'D",
    ],
    "accents": [
        "caf\u00e9 na\u00efve r\u00e9sum\u00e9 fa\u00e7ade", "\u00c4pfel \u00d6l \u00dcbel \u00df",
        "Cr\u00e8me br\u00fbl\u00e9e", "Ti\u1ebfng Vi\u1ec7t c\u00f3 d\u1ea5u",
        "\u0141\u00f3d\u017a \u017b\u00f3\u0142w \u015bl\u0105ski", "\u00c5ngstr\u00f6m",
        "e\u0301 (e + combining acute)", "n\u0303 a\u030a o\u0308",
        "\u00ed\u00f1\u00fa\u00e1\u00e9\u00f3", "Espa\u00f1a se\u00f1or ni\u00f1o",
        "\u0160koda \u010cesk\u00e1 \u017dlu\u0165", "\u00c6sir \u00d8resund \u00e5",
        "Z\u00fcrich M\u00fcnchen K\u00f6ln", "Fran\u00e7ois \u00c9cole",
    ],
    "scripts": [
        "\u043d\u0435\u0449\u043e \u043d\u0430 \u0431\u044a\u043b\u0433\u0430\u0440\u0441\u043a\u0438",
        "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
        "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5",
        "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
        "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
        "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
        "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01",
        "\u1780\u17b6\u1793\u17cb\u178f\u17c2\u1796\u17b7\u179f\u17c1\u179f",
        "\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0",
        "\u0532\u0561\u0580\u0565\u0582 \u0561\u0577\u056d\u0561\u0580\u0570",
        "\u12a0\u121b\u122d\u129b", "\u0dc3\u0dd2\u0d82\u0dc4\u0dbd",
        "\u0ba4\u0bae\u0bbf\u0bb4\u0bcd", "\u0c24\u0c46\u0c32\u0c41\u0c17\u0c41",
    ],
    "cjk": [
        "\u4f60\u597d\uff0c\u4e16\u754c\uff01", "\u6211\u60f3\u5728apple\u5de5\u4f5c1314151\u5929\uff5e",
        "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c", "\u30ab\u30bf\u30ab\u30ca \u3072\u3089\u304c\u306a \u6f22\u5b57",
        "\u4eca\u65e5\u306f\u3044\u3044\u5929\u6c17\u3067\u3059\u306d\u3002",
        "\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4", "\ud55c\uad6d\uc5b4 \ud14c\uc2a4\ud2b8\uc785\ub2c8\ub2e4.",
        "\u5317\u4eac\u5e02\u6d77\u6dc0\u533a", "\u6f22\u5b57\u3068\u304b\u306a\u306e\u6df7\u5728\u6587",
        "\uff21\uff22\uff23\uff11\uff12\uff13\uff01", "\u3000\u5168\u89d2\u30b9\u30da\u30fc\u30b9\u3000",
        "\U00020000\U0002a700 (extension B, C)", "\u2ff0\u2ffc\u31ef (description characters)",
        "\U0002ebf0\U0002ee5d (CJK extension I)", "\u3042\u3044\u3046\u3048\u304a" * 5,
    ],
    "emoji": [
        "\U0001f642", "\U0001f680 (normal)", "\U0001f636\u200d\U0001f32b\ufe0f (ZWJ sequence)",
        "\u2705 \u274c \u2b50", "\U0001f44d\U0001f3fd thumbs up, medium skin",
        "\U0001f1eb\U0001f1f7 \U0001f1ef\U0001f1f5 flags", "1\ufe0f\u20e3 keycap",
        "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 family",
        "I \u2764\ufe0f llamas \U0001f999", "\U0001f600\U0001f601\U0001f602\U0001f923",
        "\u263a\u2639\u2620", "this is \U0001f999.cpp", "\U0001f3f3\ufe0f\u200d\U0001f308",
    ],
    "code": [
        "int main(int argc, char** argv) {\n    return 0;\n}\n",
        "def f(x):\n    return x ** 2  # square\n",
        "for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];",
        "{\"key\": [1, 2.5, -3e-4, true, null], \"nested\": {\"a\": \"b\"}}",
        "<div class=\"x\"><p>Hello</p></div>",
        "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;",
        "git commit -m \"fix: off-by-one\" && make -j2 test",
        "#include <vector>\nstd::vector<int> v{1, 2, 3};",
        "x = [i for i in range(10) if i % 2 == 0]",
        "const f = (a, b) => a ?? b;  // nullish",
        "if x != y:\n\tpass\nelif x == y:\n\traise ValueError('bad')",
        "$ echo $HOME | tr '/' '\\n'", "/^[a-z0-9_.+-]+@[a-z0-9-]+\\.[a-z.]+$/i",
        "fn main() { println!(\"{}\", 1 + 1); }", "    indented\n        more\n    back",
        "a->b::c<d>() || e && !f", "0x1F 0b1010 0o777 1_000_000 3.14f 1e10",
        "    Hello\n    Hello", "\n =", " (", "\t\tx = 1;\r\n",
    ],
    "numbers": [
        "3", "33", "333", "3333", "33333", "333333", "3333333", "33333333", "333333333",
        "1234567890123", "0", "007", "3.14159", "-42", "+7", "1,000,000", "1.000.000,50",
        "2024-01-31T12:34:56Z", "version 1.2.3-rc4", "x2 y3 z10", "12ab34cd", "a1b2c3",
        "\u00b2\u00b3\u00b9 superscripts", "\u00bd \u00bc \u00be fractions",
        "\u0663\u0664\u0665 Arabic-Indic", "\u0967\u0968\u0969 Devanagari digits",
        "\uff11\uff12\uff13\uff14 full width", "\u2160 \u2161 \u2162 roman numerals",
        "\u2460\u2461\u2462 circled", "phone +1 (555) 123-4567", "  42  ", "1 2 3 4 5 6 7 8 9 10",
    ],
    "whitespace": [
        "", " ", "  ", "   ", "    ", "         ", "\t", "\t\t", "\n", "\n\n", "\n\n\n",
        "\t\n", "\r\n", "\r\n\r\n", " \n ", "  \n  \n", "a  b", "a   b", "a \t b", "a\tb",
        "a\nb", "a\n\nb", "a \n b", " leading", "trailing ", "  both  ", "\u00a0nbsp\u00a0",
        "ideographic\u3000space", "line\u2028separator", "para\u2029separator",
        "thin\u2009space", "em\u2003space", "\u0085next line", "\x0b\x0c form feeds",
        "word\n\n\n\nword", "   Hello", "    Hello", "x \n\n y", "\n\tindent",
    ],
    "special": [
        "<|im_start|>user\nhi<|im_end|>",
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|><|im_end|>", "<|im_end|><|im_end|>", "<|im_start", "im_start|>",
        "<|im_start|", "<<|im_start|>>", "text<|endoftext|>more", "<|endoftext|>",
        " <|im_start|> spaced <|im_end|> ", "<repo_name>x<file_sep>y<filename>z",
        "<|begin_of_text|>Hello<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\nhi",
        "<|im_start|>\n", "< |im_start| >", "<|IM_START|>", "<|im_start|><|im_start|>x",
        "<jupyter_code>print(1)<jupyter_output>1<empty_output>",
    ],
    "controls": [
        "zero\u200bwidth", "zw\u200cnj zw\u200dj", "\ufeffBOM", "soft\u00adhyphen",
        "bell\x07 escape\x1b[0m", "nul\x00byte", "del\x7f", "\x1c\x1d\x1e\x1f separators",
        "rtl \u202ehidden\u202c", "private \ue000\uf8ff", "noncharacter \ufdd0 \uffff",
        "replacement \ufffd char", "tag \U000e0041",
    ],
    "long": [
        ("Large language models are trained on text. " * 12).strip(),
        "The year 1984 had 366 days; 2023 had 365. " * 6,
        "\u4e2d\u6587\u6587\u672c\u548cEnglish text\u6df7\u5408\u5728\u4e00\u8d77\u3002" * 8,
    ],
}

# Byte strings that are not valid UTF-8 (llama.cpp reads each bad byte as U+FFFD). Sequences
# decoding past U+10FFFF (F4 90.., F5..F7 leads) are left out: llama.cpp throws on them.
INVALID = [
    b"\x80", b"abc\x80def", b"\xc3", b"caf\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xff\xfe",
    b"\xc0\x80 overlong NUL", b"\xe0\x80\xaf overlong slash", b"\xed\xa0\x80 surrogate",
    b"\xf8\x88\x80\x80\x80", b"ok \xbf\xbf ok", b"\xc3\x28", b"\xe2\x28\xa1",
    b"<|im_start|>\xff<|im_end|>", b"mixed \xe4\xbd\xa0\xe5 end",
]


def random_texts(rng):
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " " * 8 + "\t\n\r",
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "\u00e9\u00f1\u00fc\u00df\u00e5\u00f8\u0107\u0161",
        "\u4f60\u597d\u4e16\u754c\u3042\u30a2\uac00\ud7a3", "\u0430\u0431\u0432\u03b1\u03b2\u05d0\u0627",
        "\U0001f600\U0001f680\u2764\ufe0f\u200d", "\u00a0\u3000\u2009\u2028",
        "\u00b2\u00bd\u0663\uff11\u2160", "\u0301\u0308\u093f\u0e31", "'sStTmMdDrReEvVlL",
    ]
    texts = []
    for _ in range(RANDOM_TEXTS):
        n = rng.randint(1, 40)
        texts.append("".join(rng.choice(rng.choice(pools)) for _ in range(n)))
    return texts


def corpus():
    items = [{"category": c, "text": t} for c, ts in HAND.items() for t in ts]
    items += [{"category": "random", "text": t} for t in random_texts(random.Random(SEED))]
    items += [{"category": "invalid_utf8", "hex": b.hex()} for b in INVALID]
    return items


def text_bytes(item):
    return bytes.fromhex(item["hex"]) if "hex" in item else item["text"].encode("utf-8")


def fetch(script):
    out = subprocess.run([str(ROOT / "scripts" / script)], check=True, capture_output=True,
                         text=True).stdout
    return pathlib.Path(out.strip().splitlines()[-1])


def build_driver(peer, out_dir):
    """Compiles tools/llama_tokenize_corpus.cpp against the peer's libllama."""
    src = peer / PEER_SOURCES
    for build in ("llama.cpp-build-vulkan", "llama.cpp-build-cpu"):
        lib_dir = peer / build / "bin"
        if (lib_dir / "libllama.so").exists():
            break
    else:
        sys.exit(f"no libllama.so under {peer}/llama.cpp-build-*/bin: run tools/build_llama_cpp_peer.sh")
    exe = out_dir / "llama_tokenize_corpus"
    subprocess.run(["g++", "-std=c++17", "-O1", f"-I{src}/include", f"-I{src}/ggml/include",
                    str(ROOT / "tools" / "llama_tokenize_corpus.cpp"), f"-L{lib_dir}", "-lllama",
                    "-lggml", "-lggml-base", f"-Wl,-rpath,{lib_dir}", "-o", str(exe)], check=True)
    return exe


def tokenize_all(driver, vocab, items, tmpdir):
    texts = pathlib.Path(tmpdir) / "texts.hex"
    texts.write_text("".join(text_bytes(it).hex() + "\n" for it in items))
    out = subprocess.run([str(driver), str(vocab), str(texts)], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    assert out[0].startswith("add_special ") and len(out) == len(items) + 1, out[:3]
    ids = lambda s: [int(x) for x in s.split()]
    return (out[0].endswith("1"), [ids(l.split("|")[0]) for l in out[1:]],
            [ids(l.split("|")[1]) for l in out[1:]])


def llama_tokenize_tool(tool, vocab, data, parse_special, tmpdir, index):
    path = pathlib.Path(tmpdir) / f"tool.{index}.{int(parse_special)}.txt"
    path.write_bytes(data)
    cmd = [tool, "-m", str(vocab), "-f", str(path), "--ids", "--no-escape", "--log-disable"]
    if not parse_special:
        cmd.append("--no-parse-special")
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.decode(errors='replace')}")
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer", type=pathlib.Path, default=pathlib.Path("/work/peers"),
                    help="where tools/build_llama_cpp_peer.sh built llama.cpp")
    ap.add_argument("--llama-tokenize", help="also check the first vocabulary with this tool")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", help="vocabularies to (re)write; default all")
    args = ap.parse_args()

    items = corpus()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with open(OUT_DIR / "corpus.json", "w", encoding="utf-8") as f:
        json.dump(items, f, ensure_ascii=False, indent=1)
        f.write("\n")

    vocabs = {}
    if not args.only or "smollm2" in args.only:
        vocabs["smollm2"] = fetch("fetch_smollm2.sh")
    vocab_dir = fetch("fetch_llama_vocabs.sh")
    for name in LLAMA_VOCABS:
        if not args.only or name in args.only:
            vocabs[name] = vocab_dir / f"ggml-vocab-{name}.gguf"

    with tempfile.TemporaryDirectory() as tmpdir:
        driver = build_driver(args.peer, pathlib.Path(tmpdir))
        for n, (name, path) in enumerate(vocabs.items()):
            add_special, with_special, without = tokenize_all(driver, path, items, tmpdir)
            if args.llama_tokenize and n == 0:
                with ThreadPoolExecutor(args.jobs) as pool:
                    for parse_special, want in ((True, with_special), (False, without)):
                        got = list(pool.map(lambda i: llama_tokenize_tool(
                            args.llama_tokenize, path, text_bytes(items[i]), parse_special, tmpdir, i),
                            range(len(items))))
                        bad = [i for i in range(len(items)) if got[i] != want[i]]
                        if bad:
                            sys.exit(f"{name}: llama-tokenize differs from llama_tokenize for texts {bad}")
                print(f"{name}: llama-tokenize gives the same ids for all {len(items)} texts")
            golden = {
                "vocab": path.name,
                "sha256": sha256(path),
                "peer": PEER,
                "add_special": add_special,
                "ids": with_special,
                "ids_no_parse_special": without,
            }
            with open(OUT_DIR / f"{name}.json", "w") as f:
                json.dump(golden, f, separators=(",", ":"))
                f.write("\n")
            print(f"{name}: {len(items)} texts, {sum(map(len, with_special))} ids")


if __name__ == "__main__":
    main()
