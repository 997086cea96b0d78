"""Embedder against sentence-transformers' own embeddings (tests/golden_embeddings)."""
import json

import numpy as np
import pytest

import vkformer


def golden(repo):
    texts = json.loads((repo / "tests/golden_embeddings/texts.json").read_text(encoding="utf-8"))["texts"]
    return texts, np.load(repo / "tests/golden_embeddings/embeddings_f32.npy")


def test_encode_equals_sentence_transformers(repo, minilm):
    texts, expected = golden(repo)
    got = minilm.encode(texts)
    assert got.dtype == np.float32 and got.shape == expected.shape == (37, 384)
    # The C++ suite measures 3.2e-7 here; 1e-5 leaves room for another device's rounding.
    assert np.abs(got - expected).max() < 1e-5


def test_small_batches_and_progress_give_the_same_rows(repo, minilm, capsys):
    # The 34 texts of up to 64 tokens (the test above runs the 140- and 256-token ones too): seven
    # batches of 5, the last one short, each padded to its own bucket.
    texts, expected = golden(repo)
    tokens = json.loads((repo / "tests/golden_embeddings/texts.json").read_text(encoding="utf-8"))["tokens"]
    rows = [i for i, n in enumerate(tokens) if n <= 64]
    assert len(rows) == 34
    got = minilm.encode([texts[i] for i in rows], batch_size=5, show_progress_bar=True)
    assert np.abs(got - expected[rows]).max() < 1e-5
    err = capsys.readouterr().err
    assert "Batches" in err and "34/34" in err


def test_one_string_gives_one_vector(repo, minilm):
    texts, expected = golden(repo)
    v = minilm.encode(texts[0])
    assert v.shape == (384,)
    assert np.abs(v - expected[0]).max() < 1e-5


def test_normalize_embeddings(minilm):
    # all-MiniLM-L6-v2 ends in a Normalize module: unit rows either way.
    raw = minilm.encode(["A man is eating food."], normalize_embeddings=False)
    assert abs(np.linalg.norm(raw[0]) - 1) < 1e-5
    assert minilm.get_sentence_embedding_dimension() == 384 and minilm.pooling == "mean"


def test_f16_weights_stay_close(repo, minilm_dir):
    texts, expected = golden(repo)
    got = vkformer.Embedder(minilm_dir, dtype="f16").encode(texts[:8])
    cos = (got * expected[:8]).sum(1)
    assert cos.min() > 0.9999


def test_semantic_search_ranks_as_the_cli_readme(minilm):
    e = minilm.encode(["A man is eating food.", "A man is riding a horse.", "The stock market fell sharply.",
                       "Someone is having a meal."])
    scores = e[:3] @ e[3]
    assert list(np.argsort(-scores)) == [0, 1, 2]
    assert abs(scores[0] - 0.6888) < 1e-3


def test_errors_are_exceptions_with_the_library_message(tmp_path, minilm):
    with pytest.raises(vkformer.FileError) as e:
        vkformer.Embedder(tmp_path / "missing")
    assert "missing" in str(e.value) and e.value.code == "io"
    with pytest.raises(ValueError, match="dtype"):
        vkformer.Embedder(tmp_path, dtype="f64")
    assert minilm.encode([]).shape == (0, 384)
    with pytest.raises(ValueError, match="batch_size"):
        minilm.encode(["x"], batch_size=0)
    # A lone surrogate is not text: refused before the library sees it, naming where.
    with pytest.raises(ValueError, match=r"sentences\[1\] is not valid text at position 2"):
        minilm.encode(["fine", "ab\ud800"])
