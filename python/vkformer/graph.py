"""The op-level API: build a Graph of ops from numpy weights, compile it once with an Executor
for a device, then run it on numpy inputs as often as you like.

    g = vkformer.Graph()
    x = g.input("x", [2, 4])
    w = g.constant("w", np.ones((3, 4), np.float32))
    g.output("y", g.linear(x, w, activation="gelu"))
    ex = vkformer.Executor(g)
    ex.run({"x": np.zeros((2, 4), np.float32)})["y"]   # (2, 3) float32

Shapes are checked as ops are added (a mismatch raises ShapeMismatchError naming the op and
both shapes). The ops, their options and their numerics are those of include/vkformer/graph.hpp.
"""
from __future__ import annotations

from typing import Mapping, Optional, Union

import numpy as np

from . import _core
from ._devices import selector

Tensor = _core.Tensor
Graph = _core.Graph


class Executor:
    """A Graph compiled for a device: memory planned, pipelines made and one command buffer
    recorded, replayed by every ``run``. ``profile=True`` records a GPU time per op
    (``profile()``)."""

    def __init__(self, graph: Graph, device: Optional[Union[int, str]] = None, profile: bool = False):
        self._executor = _core.Executor(graph, selector(device), profile)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Runs the graph on these inputs (every ``Graph.input`` by name) and returns every output."""
        return self._executor.run({k: np.ascontiguousarray(v) for k, v in inputs.items()})

    @property
    def input_names(self) -> list[str]:
        return self._executor.input_names

    @property
    def output_names(self) -> list[str]:
        return self._executor.output_names

    def profile(self) -> list[tuple[str, float]]:
        """(op label, GPU microseconds) of the last run; needs ``profile=True``."""
        return self._executor.profile()

    def stats(self) -> dict[str, int]:
        """Dispatches, barriers, runs and the bytes of activations and constants."""
        return self._executor.stats()
