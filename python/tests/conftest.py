"""Fixtures of the vkformer Python tests: the repository's golden data, the real models (fetched
once into the cache by scripts/fetch_*.sh, as the C++ tests do) and the vkformer tool.

ctest's `python` test runs this suite with the package built into build/python (PYTHONPATH)
and VKFORMER_CLI naming the tool. A model that cannot be fetched fails its tests: nothing here
is skipped.
"""
from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(os.environ.get("VKFORMER_REPO", pathlib.Path(__file__).resolve().parents[2]))


def fetch(script: str, env_override: str) -> str:
    if os.environ.get(env_override):
        return os.environ[env_override]
    r = subprocess.run([str(REPO / "scripts" / script)], capture_output=True, text=True)
    assert r.returncode == 0, f"scripts/{script} failed ({r.returncode}):\n{r.stderr}"
    return r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def repo() -> pathlib.Path:
    return REPO


@pytest.fixture(scope="session")
def minilm_dir() -> str:
    return fetch("fetch_minilm.sh", "VKFORMER_MINILM_DIR")


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    return fetch("fetch_smollm2.sh", "VKFORMER_SMOLLM2_GGUF")


@pytest.fixture(scope="session")
def tiny_llama() -> str:
    return str(REPO / "tests" / "golden_llama" / "tiny" / "tiny_llama_untied.gguf")


@pytest.fixture(scope="session")
def cli() -> str:
    path = os.environ.get("VKFORMER_CLI")
    assert path, "VKFORMER_CLI is not set: run this suite through ctest (test 'python'), which names the tool"
    return path


@pytest.fixture(scope="session")
def smollm2(smollm2_path):
    import vkformer
    return vkformer.LLM(smollm2_path, n_ctx=512)


@pytest.fixture(scope="session")
def minilm(minilm_dir):
    import vkformer
    return vkformer.Embedder(minilm_dir)
