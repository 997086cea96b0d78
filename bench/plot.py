#!/usr/bin/env python3
"""Charts from `vkformer bench --json` files: one or more files, each with one or more devices.

    python3 bench/plot.py lavapipe.json h100.json -o bench/charts

Writes PNGs (those that have data) into the output folder:
    roofline.png         every result on its device's roofline (FMA peak, copy bandwidth)
    matmul_square.png    matmul GFLOP/s against size, per device and dtype, with the FMA peak
    matmul_shapes.png    the transformer projection shapes, per device and dtype
    attention.png        fused against unfused attention, GFLOP/s against sequence length
    peak_fraction.png    % of peak per benchmark family (median over its sizes), per device
    blocks.png           latency of the block benchmarks (encoder layer, transformer, decoder step)
Needs matplotlib (Debian: apt-get install python3-matplotlib; or pip install matplotlib).
"""
import argparse
import json
import os
import statistics
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # pragma: no cover - depends on the machine
    sys.exit("plot.py needs matplotlib: apt-get install python3-matplotlib (or pip install matplotlib)")


def load(paths):
    """[(label, device entry)] over all files. A label is the device name, with the driver
    version where two devices share a name, and the file name where that is not enough."""
    runs = []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for entry in doc.get("devices", []):
            dev = entry.get("device", {})
            driver = str(dev.get("driver_version") or dev.get("driver") or "")
            runs.append([dev.get("name", "device"), entry, driver, os.path.basename(path)])
    for extra in (2, 3):
        names = [r[0] for r in runs]
        for r in runs:
            if names.count(r[0]) > 1 and r[extra]:
                r[0] += f" ({r[extra]})" if extra == 2 else f" [{r[extra]}]"
    return [(r[0], r[1]) for r in runs]


def ok(results, **match):
    out = []
    for r in results:
        if r.get("status", "ok") != "ok" or r.get("median_us") is None:
            continue
        if all(r.get(k) == v for k, v in match.items()):
            out.append(r)
    return out


def peak(entry, key):
    return (entry.get("peak") or {}).get(key) or 0


written = []  # the charts save() wrote


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print("wrote", path)
    written.append(name)


def colors():
    return plt.rcParams["axes.prop_cycle"].by_key()["color"]


def roofline(runs, out):
    if not any(peak(e, "fma_gflops") and peak(e, "copy_gbps") for _, e in runs):
        return
    fig, ax = plt.subplots(figsize=(9, 6))
    markers = {"matmul": "o", "attention": "^", "softmax": "s", "layer_norm": "D",
               "encoder_layer": "P", "transformer": "X", "decoder_step": "*"}
    for (label, e), color in zip(runs, colors() * 4):
        f, b = peak(e, "fma_gflops"), peak(e, "copy_gbps")
        if not (f and b):
            continue
        xs = [2 ** (i / 4) for i in range(-24, 61)]
        ax.plot(xs, [min(f, x * b) for x in xs], color=color, lw=1.5, label=label + " roofline")
        for name, marker in markers.items():
            rs = [r for r in ok(e["results"], name=name) if r.get("bytes") and r.get("gflops")]
            if rs:
                ax.scatter([r["flops"] / r["bytes"] for r in rs], [r["gflops"] for r in rs],
                           color=color, marker=marker, s=28, alpha=0.8)
    for name, marker in markers.items():
        ax.scatter([], [], color="gray", marker=marker, label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of least traffic)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("Roofline: measured FMA peak and copy bandwidth, every result")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    save(fig, out, "roofline.png")


def matmul_square(runs, out):
    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = False
    for (label, e), color in zip(runs, colors() * 4):
        for dtype, style in (("f32", "-"), ("f16", "--")):
            rs = sorted(ok(e["results"], name="matmul", variant="square", dtype=dtype),
                        key=lambda r: r["shape"]["m"])
            if rs:
                ax.plot([r["shape"]["m"] for r in rs], [r["gflops"] for r in rs], style, marker="o",
                        color=color, label=f"{label} {dtype}")
                drawn = True
        if peak(e, "fma_gflops"):
            ax.axhline(peak(e, "fma_gflops"), color=color, ls=":", lw=1,
                       label=f"{label} FMA peak")
    if not drawn:
        plt.close(fig)
        return
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("m = n = k")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("Square matmul")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, out, "matmul_square.png")


def matmul_shapes(runs, out):
    rows = []  # (shape label, [(run label, dtype, gflops)])
    for label, e in runs:
        for r in ok(e["results"], name="matmul"):
            if r["variant"] == "square":
                continue
            s = r["shape"]
            key = f'{r["variant"]}\n{s["m"]}x{s["n"]}x{s["k"]}'
            rows.append((key, f"{label} {r['dtype']}", r["gflops"]))
    if not rows:
        return
    keys = list(dict.fromkeys(k for k, _, _ in rows))
    series = list(dict.fromkeys(s for _, s, _ in rows))
    values = {(k, s): v for k, s, v in rows}
    fig, ax = plt.subplots(figsize=(max(8, len(keys) * 0.9), 5))
    width = 0.8 / len(series)
    for i, s in enumerate(series):
        xs = [j + i * width for j, k in enumerate(keys) if (k, s) in values]
        ys = [values[(k, s)] for k in keys if (k, s) in values]
        ax.bar(xs, ys, width, label=s)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(keys))])
    ax.set_xticklabels(keys, fontsize=7, rotation=30, ha="right")
    ax.set_ylabel("GFLOP/s")
    ax.set_yscale("log")
    ax.set_title("matmul at transformer shapes (m = tokens; nn.Linear layout with bias)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, out, "matmul_shapes.png")


def attention(runs, out):
    configs = []
    for _, e in runs:
        for r in ok(e["results"], name="attention"):
            s = r["shape"]
            c = (s["batch"], s["heads"], s["d_k"])
            if c not in configs:
                configs.append(c)
    if not configs:
        return
    fig, axes = plt.subplots(1, len(configs), figsize=(5 * len(configs), 4.5), squeeze=False)
    for ax, (b, h, d) in zip(axes[0], configs):
        for (label, e), color in zip(runs, colors() * 4):
            for variant, style in (("fused", "-"), ("unfused", "--"), ("fused.causal", "-."),
                                   ("unfused.causal", ":")):
                for dtype, marker in (("f32", "o"), ("f16", "s")):
                    rs = [r for r in ok(e["results"], name="attention", variant=variant, dtype=dtype)
                          if (r["shape"]["batch"], r["shape"]["heads"], r["shape"]["d_k"]) == (b, h, d)]
                    rs.sort(key=lambda r: r["shape"]["seq"])
                    if rs:
                        ax.plot([r["shape"]["seq"] for r in rs], [r["gflops"] for r in rs], style,
                                marker=marker, color=color, ms=4,
                                label=f"{label} {variant} {dtype}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"attention: batch {b}, {h} heads, d_k {d}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    save(fig, out, "attention.png")


def peak_fraction(runs, out):
    fams = {}
    for label, e in runs:
        for r in ok(e["results"]):
            if r.get("peak_fraction") is None:
                continue
            key = f'{r["name"]} {r["variant"]} {r["dtype"]} ({"fma" if r.get("bound") == "compute" else "bw"})'
            fams.setdefault(key, {}).setdefault(label, []).append(r["peak_fraction"] * 100)
    if not fams:
        return
    keys = list(fams)
    labels = [l for l, _ in runs]
    fig, ax = plt.subplots(figsize=(9, max(4, len(keys) * 0.28 * max(1, len(labels)))))
    height = 0.8 / len(labels)
    for i, label in enumerate(labels):
        ys = [j + i * height for j, k in enumerate(keys) if label in fams[k]]
        xs = [statistics.median(fams[k][label]) for k in keys if label in fams[k]]
        ax.barh(ys, xs, height, label=label)
    ax.set_yticks([j + 0.4 - height / 2 for j in range(len(keys))])
    ax.set_yticklabels(keys, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("% of measured peak (median over sizes): FMA GFLOP/s or copy GB/s")
    ax.set_title("Fraction of peak")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, out, "peak_fraction.png")


def blocks(runs, out):
    rows = []
    for label, e in runs:
        for name in ("encoder_layer", "transformer", "decoder_step"):
            for r in ok(e["results"], name=name):
                s = r["shape"]
                if name == "decoder_step":
                    key = f'decoder step B{s["batch"]} ctx {s["context"]}'
                elif name == "encoder_layer":
                    key = f'BERT-base layer B{s["batch"]} S{s["seq"]}'
                else:
                    key = f'transformer 6+6 B{s["batch"]} S{s["src"]}'
                rows.append((f"{key} {r['dtype']}", label, r["median_us"] / 1000))
    if not rows:
        return
    keys = list(dict.fromkeys(k for k, _, _ in rows))
    labels = list(dict.fromkeys(l for _, l, _ in rows))
    values = {(k, l): v for k, l, v in rows}
    fig, ax = plt.subplots(figsize=(9, max(4, len(keys) * 0.35 * len(labels))))
    height = 0.8 / len(labels)
    for i, label in enumerate(labels):
        ys = [j + i * height for j, k in enumerate(keys) if (k, label) in values]
        xs = [values[(k, label)] for k in keys if (k, label) in values]
        ax.barh(ys, xs, height, label=label)
    ax.set_yticks([j + 0.4 - height / 2 for j in range(len(keys))])
    ax.set_yticklabels(keys, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("median GPU time per run (ms)")
    ax.set_title("Transformer blocks")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, out, "blocks.png")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("json", nargs="+", help="files written by vkformer bench --json")
    p.add_argument("-o", "--out", default="bench-charts", help="output folder (default bench-charts)")
    a = p.parse_args(argv)
    runs = load(a.json)
    if not runs:
        sys.exit("no devices in " + ", ".join(a.json))
    os.makedirs(a.out, exist_ok=True)
    for chart in (roofline, matmul_square, matmul_shapes, attention, peak_fraction, blocks):
        chart(runs, a.out)
    if not written:
        sys.exit("plot.py: wrote no chart: no result in " + ", ".join(a.json) + " is one a chart draws "
                 "(roofline.png and peak_fraction.png also need the peaks, which --no-peak runs lack)")


if __name__ == "__main__":
    main()
