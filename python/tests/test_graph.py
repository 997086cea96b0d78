"""Graph and Executor: blocks built from numpy weights, against numpy."""
import math

import numpy as np
import pytest

import vkformer


def gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def test_graph_basics_example():
    # examples/graph_basics.cpp, whose output docs/api.md shows.
    g = vkformer.Graph()
    x = g.input("x", [2, 4])
    bias = g.input("bias", [4])
    g.output("y", g.gelu(g.add(x, bias)))
    ex = vkformer.Executor(g)
    xs = np.array([-2, -1, 0, 1, 2, 3, 4, 5], np.float32).reshape(2, 4)
    bs = np.array([0.5, 0.5, -0.5, -0.5], np.float32)
    y = ex.run({"x": xs, "bias": bs})["y"]
    np.testing.assert_allclose(y.reshape(-1), [-0.1002, -0.1543, -0.1543, 0.3457, 2.4845, 3.4992, 3.4992, 4.5000],
                               atol=1e-4)
    assert ex.input_names == ["bias", "x"] or sorted(ex.input_names) == ["bias", "x"]


def test_a_feed_forward_block_from_numpy_weights():
    rng = np.random.default_rng(0)
    w1, b1 = rng.standard_normal((64, 32), np.float32) * 0.1, rng.standard_normal(64).astype(np.float32)
    w2 = rng.standard_normal((32, 64), np.float32) * 0.1
    gamma, beta = np.ones(32, np.float32), np.zeros(32, np.float32)
    g = vkformer.Graph()
    x = g.input("x", [2, 5, 32])
    h = g.linear(x, g.constant("w1", w1), g.constant("b1", b1), activation="relu")
    y = g.add_layer_norm(x, g.linear(h, g.constant("w2", w2)), g.constant("gamma", gamma), g.constant("beta", beta))
    g.output("y", y)
    assert y.shape == [2, 5, 32] and y.dtype == "f32"
    xs = rng.standard_normal((2, 5, 32), np.float32)
    got = vkformer.Executor(g).run({"x": xs})["y"]
    s = xs + np.maximum(xs @ w1.T + b1, 0) @ w2.T
    want = (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + 1e-5)
    assert np.abs(got - want).max() < 1e-4


def rms_norm64(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w.astype(np.float64)


def test_gemma_norms_match_numpy():
    # rms_norm_add (a post-norm and its residual) and rms_norm_qk (q/k norms of a packed qkv:
    # 2 query heads, 1 key head, 1 value head left as it is), against float64 numpy.
    rng = np.random.default_rng(2)
    x, r = (rng.standard_normal((3, 64), np.float32) for _ in range(2))
    w, wq, wk = (rng.uniform(0.5, 1.5, 64).astype(np.float32) for _ in range(3))
    qkv = rng.standard_normal((1, 3, 4 * 64), np.float32)
    g = vkformer.Graph()
    tx, tr, tqkv = g.input("x", [3, 64]), g.input("r", [3, 64]), g.input("qkv", [1, 3, 256])
    g.output("y", g.rms_norm_add(tx, g.constant("w", w), tr, eps=1e-6))
    g.output("z", g.rms_norm_qk(tqkv, 2, 1, g.constant("wq", wq), g.constant("wk", wk), eps=1e-6))
    out = vkformer.Executor(g).run({"x": x, "r": r, "qkv": qkv})
    assert np.abs(out["y"] - (r + rms_norm64(x, w, 1e-6))).max() < 1e-5
    heads = qkv.reshape(1, 3, 4, 64)
    want = np.concatenate([rms_norm64(heads[:, :, :2], wq, 1e-6), rms_norm64(heads[:, :, 2:3], wk, 1e-6),
                           heads[:, :, 3:]], axis=2).reshape(1, 3, 256)
    assert np.abs(out["z"] - want).max() < 1e-5
    assert np.array_equal(out["z"].reshape(1, 3, 4, 64)[:, :, 3], heads[:, :, 3])


def test_attention_matches_numpy():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 2, 6, 8), np.float32) for _ in range(3))
    g = vkformer.Graph()
    t = [g.input(n, [1, 2, 6, 8]) for n in "qkv"]
    g.output("o", g.attention(*t, causal=True))
    got = vkformer.Executor(g).run(dict(zip("qkv", (q, k, v))))["o"]
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(8)
    s = np.where(np.triu(np.ones((6, 6), bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    assert np.abs(got - want).max() < 1e-5


def test_shape_errors_name_the_op_and_shapes():
    g = vkformer.Graph()
    a = g.input("a", [2, 3, 5])
    b = g.input("b", [4, 6])
    with pytest.raises(vkformer.ShapeMismatchError, match=r"matmul.*\[2,3,5\].*\[4,6\]"):
        g.matmul(a, b)
    with pytest.raises(ValueError, match="activation"):
        g.linear(a, g.input("w", [7, 5]), activation="tanh")


def test_run_errors_name_the_input():
    g = vkformer.Graph()
    g.output("y", g.relu(g.input("x", [2, 2])))
    ex = vkformer.Executor(g)
    with pytest.raises(vkformer.Error, match="x"):
        ex.run({"x": np.zeros((3, 2), np.float32)})
    with pytest.raises(vkformer.Error):
        ex.run({})
