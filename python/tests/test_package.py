"""The package as a user meets it: devices(), help(), the stubs and the error classes."""
import ast
import json
import os
import pathlib
import pydoc
import subprocess

import pytest

import vkformer
from vkformer import _core


def test_devices_lists_the_chosen_one():
    devs = vkformer.devices()
    assert len(devs) >= 1
    assert sum(d["chosen"] for d in devs) == 1
    assert all(d["type"] in ("discrete", "integrated", "virtual", "cpu", "other") for d in devs)
    assert not any(d["chosen"] for d in vkformer.devices("no-such-device"))


def test_devices_report_tuning_as_the_cli_does(cli, tmp_path, monkeypatch):
    # The CLI's `devices --json` and Python's devices() read the same tuning cache: untuned in an
    # empty cache folder, the static table under VKFORMER_TUNING=static.
    monkeypatch.setenv("VKFORMER_CACHE_DIR", str(tmp_path))
    for mode, status in ((None, "not tuned"), ("static", "static")):
        if mode is None:
            monkeypatch.delenv("VKFORMER_TUNING", raising=False)
        else:
            monkeypatch.setenv("VKFORMER_TUNING", mode)
        listed = json.loads(subprocess.run([cli, "devices", "--json"], capture_output=True, text=True,
                                           check=True, env=dict(os.environ)).stdout)["devices"]
        ours = vkformer.devices()
        assert [d["uuid"] for d in ours] == [d["uuid"] for d in listed]
        for mine, theirs in zip(ours, listed):
            if mine["uuid"]:  # a device without a UUID has no cache file
                assert mine["tuning"]["status"] == status
            for key in ("status", "path", "problem"):
                assert mine["tuning"][key] == theirs["tuning"][key], key
            if status == "not tuned" and mine["tuning"]["path"]:
                assert pathlib.Path(mine["tuning"]["path"]).parent == tmp_path / "tuning"


def test_a_device_that_matches_nothing_is_an_error(repo):
    with pytest.raises(vkformer.DeviceNotFoundError, match="no-such-device"):
        vkformer.Model(repo / "tests/golden/seq2seq_small", device="no-such-device")


def test_help_is_useful():
    text = pydoc.render_doc(vkformer.LLM, renderer=pydoc.plaintext)
    for word in ("generate", "stream", "chat", "tokenize", "max_tokens", "temperature", "n_ctx"):
        assert word in text
    assert "sentence-transformers" in pydoc.render_doc(vkformer.Embedder, renderer=pydoc.plaintext)


def test_the_stubs_cover_the_module():
    stub = pathlib.Path(vkformer.__file__).with_name("_core.pyi").read_text()
    names = {n.name for n in ast.parse(stub).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    public = {n for n in dir(_core) if not n.startswith("__")}
    assert public <= names, f"no stub for {sorted(public - names)}"
    for cls in ("Embedder", "LLM", "Model", "Graph", "Executor"):
        body = next(n for n in ast.parse(stub).body if isinstance(n, ast.ClassDef) and n.name == cls)
        stubbed = {f.name for f in body.body if isinstance(f, ast.FunctionDef)}
        actual = {n for n in dir(getattr(_core, cls)) if not n.startswith("_")}
        assert actual <= stubbed, f"{cls}: no stub for {sorted(actual - stubbed)}"


def test_error_classes():
    assert issubclass(vkformer.Error, RuntimeError)
    assert issubclass(vkformer.InvalidArgumentError, ValueError)
    assert issubclass(vkformer.FileError, OSError)
