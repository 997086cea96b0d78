#!/usr/bin/env python3
"""Puts `vkformer bench --json` results next to bench/torch_bench.py results taken on the same
GPU (ideally in one command), joined by benchmark id, and checks the GPU targets of the
performance issue. Prints Markdown for bench/RESULTS.md.

  python3 bench/compare.py vkformer.json torch.json [--device NAME_SUBSTRING]
"""
import argparse
import json

# (what, vkformer id, how to judge): "throughput" = torch time / vkformer time must reach the
# bound; "latency" = vkformer time / torch time must stay at or below it.
TARGETS = [
    ("f16 matmul 4096^3 >= 70% of torch.matmul", "matmul/square/f16/m=4096,n=4096,k=4096", "throughput", 0.70),
    ("fused attention >= 100% of SDPA, seq 2048, d_k 64, f16", "attention/fused/f16/batch=1,heads=8,seq=2048,d_k=64", "throughput", 1.0),
    ("fused attention >= 100% of SDPA, seq 2048, d_k 128, f16", "attention/fused/f16/batch=1,heads=16,seq=2048,d_k=128", "throughput", 1.0),
    ("fused attention >= 100% of SDPA, seq 2048, d_k 64, f32", "attention/fused/f32/batch=1,heads=8,seq=2048,d_k=64", "throughput", 1.0),
    ("fused attention >= 100% of SDPA, seq 2048, d_k 128, f32", "attention/fused/f32/batch=1,heads=16,seq=2048,d_k=128", "throughput", 1.0),
    ("BERT-base encoder layer b8 s512 f16 >= 100% of eager", "encoder_layer/bert-base/f16/batch=8,seq=512,d_model=768,heads=12,ff=3072", "throughput", 1.0),
    ("KV-cached decoder step, context 1024, <= 70% of eager latency (f16)", "decoder_step/d512.kv-cache/f16/batch=1,context=1024,src=128,d_model=512,layers=6", "latency", 0.70),
    ("KV-cached decoder step, context 1024, <= 70% of eager latency (f32)", "decoder_step/d512.kv-cache/f32/batch=1,context=1024,src=128,d_model=512,layers=6", "latency", 0.70),
]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("vkformer_json")
    p.add_argument("torch_json")
    p.add_argument("--device", default="", help="which device of the vkformer file (name substring)")
    a = p.parse_args()
    vk_file = json.load(open(a.vkformer_json))
    devices = [d for d in vk_file["devices"] if a.device.lower() in d["device"]["name"].lower()]
    if not devices:
        raise SystemExit(f"no device matching '{a.device}' in {a.vkformer_json}")
    dev = devices[0]
    vk = {r["id"]: r for r in dev["results"] if r.get("status") == "ok"}
    th_file = json.load(open(a.torch_json))
    th = {r["id"]: r for r in th_file["results"] if r.get("status") == "ok"}

    d = dev["device"]
    print(f"vkformer on {d['name']} ({d.get('driver_name', d.get('driver', ''))} {d.get('driver_info', '')}), "
          f"PyTorch {th_file['device']['torch']} (CUDA {th_file['device']['cuda']}) on {th_file['device']['name']}\n")
    print("| target | vkformer us | PyTorch us | ratio | holds |\n|---|---|---|---|---|")
    for what, bid, kind, bound in TARGETS:
        if bid not in vk or bid not in th:
            print(f"| {what} | {'-' if bid not in vk else round(vk[bid]['median_us'], 1)} | "
                  f"{'-' if bid not in th else round(th[bid]['median_us'], 1)} | - | not measured |")
            continue
        v, t = vk[bid]["median_us"], th[bid]["median_us"]
        ratio = t / v if kind == "throughput" else v / t
        holds = ratio >= bound if kind == "throughput" else ratio <= bound
        label = f"{ratio * 100:.0f}% of PyTorch" + (" throughput" if kind == "throughput" else " latency")
        print(f"| {what} | {v:.1f} | {t:.1f} | {label} | {'yes' if holds else 'no'} |")

    print("\n| benchmark | vkformer us | PyTorch us | vkformer speed vs PyTorch |\n|---|---|---|---|")
    for bid in sorted(set(vk) & set(th)):
        v, t = vk[bid]["median_us"], th[bid]["median_us"]
        print(f"| `{bid}` | {v:.1f} | {t:.1f} | {t / v:.2f}x |")


if __name__ == "__main__":
    main()
