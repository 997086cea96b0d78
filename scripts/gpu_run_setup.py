#!/usr/bin/env python3
"""The Vulkan environment of a GPU run (scripts/gpu_run.sh's set-up step), chosen from what the
bundle's .gl packages left in a prefix, never from what the machine has installed:

  gpu_run_setup.py --prefix DIR --dry-run 0|1 --env VK.ENV --json SETUP.json

- the loader: the prefix's libvulkan.so.1, found through LD_LIBRARY_PATH; a probe loads it by
  name as vkformer does and reads the path it came from (a loader from the system fails set-up);
- the driver: VK_DRIVER_FILES (and VK_ICD_FILENAMES, for older loaders) names NVIDIA's manifest
  on the GPU machine, lavapipe's in a dry run;
- the validation layer: the newest carried VkLayer_khronos_validation that loads on this machine
  (VK_LAYER_PATH names its folder alone). A newer layer can need a newer C library than the
  machine has (Debian 13's 1.4.309 needs glibc 2.38: the GPU machine's Ubuntu 24.04 has 2.39,
  Debian 12 here 2.36); each one passed over is recorded with the loader's error.

VK.ENV is sourced by gpu_run.sh; SETUP.json is the step's record. Exit 1 when there is no loader,
layer or driver to use (the record says which).
"""
import argparse
import glob
import json
import os
import shlex
import subprocess
import sys

LIBDIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
LAYER_JSON = "usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json"
NVIDIA_ICDS = ("/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json", "/usr/share/vulkan/icd.d/nvidia_icd.json",
               "/etc/vulkan/icd.d/nvidia_icd.json")
NVIDIA_EGL = "/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json"

# Loads a library by name or path in a fresh process and prints where it came from.
PROBE = r"""
import ctypes, sys
ctypes.CDLL(sys.argv[1])
base = sys.argv[1].rsplit("/", 1)[-1]
for line in open("/proc/self/maps"):
    path = line.split()[-1]
    if path.rsplit("/", 1)[-1].startswith(base):
        print(path)
        break
"""


def libdirs(root):
    return [os.path.join(root, d) for d in LIBDIRS if os.path.isdir(os.path.join(root, d))]


def probe(lib, ld_path):
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(ld_path))
    r = subprocess.run([sys.executable, "-c", PROBE, lib], env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        err = [l for l in r.stderr.strip().splitlines() if l.strip()]
        return None, err[-1] if err else f"exit {r.returncode}"
    return r.stdout.strip(), None


def version_key(v):
    return tuple(int(x) if x.isdigit() else 0 for x in str(v).split("."))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prefix", required=True)
    p.add_argument("--dry-run", type=int, default=0)
    p.add_argument("--env", required=True)
    p.add_argument("--json", required=True)
    a = p.parse_args()
    prefix = os.path.abspath(a.prefix)
    rec = {"prefix": prefix, "dry_run": bool(a.dry_run), "problems": []}

    # The GL/X11 libraries NVIDIA's driver needs, the loader, and the bundle's own libraries.
    ld_path = libdirs(os.path.join(prefix, "gl")) + [os.path.join(prefix, "bin", "lib")]

    loader, err = probe("libvulkan.so.1", ld_path)
    rec["loader"] = {"path": loader, "error": err}
    if not loader:
        rec["problems"].append(f"no Vulkan loader loads: {err}")
    elif not os.path.realpath(loader).startswith(prefix + os.sep):
        rec["problems"].append(f"the loader came from {loader}, not from the prefix {prefix}")

    # Every carried layer, newest first; the first that loads is used.
    layers = []
    for manifest in glob.glob(os.path.join(prefix, "*", LAYER_JSON)):
        root = manifest[: -len(LAYER_JSON)].rstrip("/")
        try:
            doc = json.load(open(manifest))["layer"]
        except (OSError, ValueError, KeyError) as e:
            rec["problems"].append(f"{manifest}: {e}")
            continue
        lib = doc.get("library_path", "")
        dirs = libdirs(root)
        path = lib if os.path.isabs(lib) else next(
            (os.path.join(d, lib) for d in dirs if os.path.exists(os.path.join(d, lib))), None)
        layers.append({"version": doc.get("api_version"), "implementation": doc.get("implementation_version"),
                       "manifest": manifest, "library": path, "libdirs": dirs})
    layers.sort(key=lambda l: version_key(l["version"]), reverse=True)
    rec["layers_rejected"] = []
    chosen = None
    for layer in layers:
        if not layer["library"]:
            layer["error"] = "its library is not in the package"
        else:
            _, layer["error"] = probe(layer["library"], layer["libdirs"] + ld_path)
        if layer["error"]:
            rec["layers_rejected"].append(layer)
        elif chosen is None:
            chosen = layer
    rec["layer"] = chosen
    if chosen:
        ld_path = chosen["libdirs"] + ld_path
    else:
        rec["problems"].append("no carried validation layer loads here" if layers else "no validation layer carried")

    if a.dry_run:
        drivers = sorted(glob.glob("/usr/share/vulkan/icd.d/lvp_icd.*.json"))
    else:
        drivers = [f for f in NVIDIA_ICDS if os.path.exists(f)]
    rec["driver"] = drivers[0] if drivers else None
    if not drivers:
        rec["problems"].append("no driver manifest: " + ("lavapipe's (mesa-vulkan-drivers)" if a.dry_run
                                                        else "none of " + ", ".join(NVIDIA_ICDS)))

    if os.environ.get("LD_LIBRARY_PATH"):
        ld_path.append(os.environ["LD_LIBRARY_PATH"])
    env = {"LD_LIBRARY_PATH": ":".join(dict.fromkeys(ld_path))}  # in order, each folder once
    if chosen:
        env["VK_LAYER_PATH"] = os.path.dirname(chosen["manifest"])
    if rec["driver"]:
        env["VK_DRIVER_FILES"] = env["VK_ICD_FILENAMES"] = rec["driver"]
    if not a.dry_run and os.path.exists(NVIDIA_EGL):
        env["__EGL_VENDOR_LIBRARY_FILENAMES"] = NVIDIA_EGL
    rec["environment"] = env
    with open(a.env, "w") as fh:
        for k, v in env.items():
            fh.write(f"export {k}={shlex.quote(v)}\n")
    with open(a.json, "w") as fh:
        json.dump(rec, fh, indent=1)
    print(json.dumps({k: rec[k] for k in ("loader", "driver", "problems")}, indent=1))
    print("validation layer:", chosen["version"] if chosen else None, "; passed over:",
          [(l["version"], l["error"]) for l in rec["layers_rejected"]])
    return 1 if rec["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
