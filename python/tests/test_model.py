"""Model against PyTorch's outputs for the fixtures in tests/golden (tests/fixtures/make_golden.py)."""
import json

import numpy as np
import pytest

import vkformer


def load_case(repo, name):
    d = repo / "tests/golden" / name
    case = json.loads((d / "case.json").read_text())
    arrays = {k: np.load(d / v) for k, v in case["inputs"].items()}
    return d, case, arrays, np.load(d / case["expected"])


def rel_error(got, want):
    return np.abs(got - want).max() / np.abs(want).max()


def test_seq2seq_forward_equals_pytorch(repo):
    d, case, a, want = load_case(repo, "seq2seq_small")
    model = vkformer.Model(d)
    assert model.config["arch"] == "seq2seq"
    got = model(a["src_ids"], a["tgt_ids"], src_key_padding_mask=a["src_key_padding_mask"])
    assert got.dtype == np.float32 and got.shape == want.shape
    assert rel_error(got, want) < 1e-4


def test_seq2seq_generate_equals_pytorch(repo):
    d, case, _, _ = load_case(repo, "seq2seq_small")
    model = vkformer.Model(d)
    dec = case["decoding"]
    for r in dec["results"]:
        for key, beam, eos in (("greedy", 1, -1), ("greedy_eos", 1, dec["eos"]), ("beam", dec["beam"], -1),
                               ("beam_eos", dec["beam"], dec["eos"])):
            got = model.generate(r["src"], max_new_tokens=dec["steps"], bos=dec["bos"], eos=eos, beam=beam,
                                 length_penalty=dec["alpha"])
            assert got == r[key], (r["src"], key)


def test_encoder_with_a_padding_mask_equals_pytorch(repo):
    d, case, a, want = load_case(repo, "encoder_post_relu_b3_s7_padding")
    got = vkformer.Model(d).encode(a["src"], src_key_padding_mask=a["src_key_padding_mask"])
    assert rel_error(got, want) < 1e-4


def test_transformer_in_f16(repo):
    case = json.loads((repo / "tests/golden/transformer_post_relu_b3_s11_t7/case.json").read_text())
    want = np.load(repo / "tests/golden/transformer_post_relu_b3_s11_t7/expected.npy")
    # tgt_mask "causal" is generate_square_subsequent_mask: causal=True.
    d = repo / "tests/golden/transformer_post_relu_b3_s11_t7"
    masks = {k: np.load(d / v) for k, v in case["inputs"].items() if k.endswith("padding_mask")}
    got = vkformer.Model(d, dtype="f16").forward(np.load(d / "src.npy"), np.load(d / "tgt.npy"), causal=True, **masks)
    assert rel_error(got, want) < 2e-2


def test_model_errors(repo, tmp_path):
    d, _, a, _ = load_case(repo, "seq2seq_small")
    model = vkformer.Model(d)
    with pytest.raises(vkformer.InvalidArgumentError, match=r"src.*outside \[0, 40\)"):
        model.forward(a["src_ids"] + 1000, a["tgt_ids"])
    with pytest.raises(TypeError, match="masks"):
        model.forward(a["src_ids"], a["tgt_ids"], src_padding=a["src_key_padding_mask"])
    with pytest.raises(vkformer.FileError, match="config.json"):
        vkformer.Model(tmp_path)
