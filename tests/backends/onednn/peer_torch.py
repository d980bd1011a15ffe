"""The real peer: run PyTorch's bundled oneDNN on the cases of an .npz file, write its outputs.

Usage (in a subprocess, with ``ONEDNN_MAX_CPU_ISA`` and ``ONEDNN_VERBOSE=1`` set by the caller):
``python peer_torch.py CASES.npz OUT.npz``. Before each case it prints ``CASE <name>`` so that the
caller can attribute oneDNN's verbose ``exec`` lines (the implementation that ran) to the case.

Case kinds, keyed by the prefix of their name in the .npz (``<name>/<array>``):

- ``int_mm``: ``torch._int_mm(A, B)`` (``dnnl_gemm_s8s8s32``) -> ``C``;
- ``qlinear_acc``: ``onednn::qlinear_pointwise`` with unit scales and f32 output -> ``y`` (the s32
  accumulator, exact in f32);
- ``qlinear``: ``quantized::linear`` u8 -> u8 with the case's scales;
- ``qconv_acc``: ``onednn::qconv_pointwise`` with unit scales and f32 output -> ``y``;
- ``qconv``: ``quantized::conv2d`` u8 -> u8.

This file imports torch only inside ``main`` so that test collection never needs it.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def _run_case(torch, kind: str, c: dict, meta: dict) -> np.ndarray:
    t = torch.from_numpy
    if kind == "int_mm":
        return torch._int_mm(t(c["A"]), t(c["B"])).numpy()
    if kind == "qlinear_acc":
        n = c["w"].shape[0]
        packed = torch.ops.onednn.qlinear_prepack(t(c["w"]), list(c["x"].shape))
        y = torch.ops.onednn.qlinear_pointwise(
            t(c["x"]),
            1.0,
            int(meta["x_zero_point"]),
            packed,
            torch.ones(n),
            torch.zeros(n, dtype=torch.long),
            None,
            1.0,
            0,
            torch.float32,
            "none",
            [],
            "",
        )
        return y.numpy()
    if kind == "qconv_acc":
        o = c["w"].shape[0]
        x = t(c["x"]).contiguous(memory_format=torch.channels_last)
        geo = [meta["stride"], meta["padding"], meta["dilation"], meta["groups"]]
        packed = torch.ops.onednn.qconv_prepack(
            t(c["w"]), torch.ones(o), 1.0, int(meta["x_zero_point"]), *geo, list(x.shape)
        )
        y = torch.ops.onednn.qconv_pointwise(
            x,
            1.0,
            int(meta["x_zero_point"]),
            packed,
            torch.ones(o),
            torch.zeros(o, dtype=torch.long),
            None,
            *geo,
            1.0,
            0,
            torch.float32,
            "none",
            [],
            None,
        )
        return y.contiguous().numpy()
    return _run_quantized(torch, kind, c, meta)


def _run_quantized(torch, kind: str, c: dict, meta: dict) -> np.ndarray:
    t = torch.from_numpy
    x = torch._make_per_tensor_quantized_tensor(
        t(c["x"]), float(meta["x_scale"]), int(meta["x_zero_point"])
    )
    scales = torch.tensor(meta["w_scales"], dtype=torch.float64)
    w = torch._make_per_channel_quantized_tensor(
        t(c["w"]), scales, torch.zeros(len(meta["w_scales"]), dtype=torch.long), 0
    )
    bias = t(c["bias"]) if "bias" in c else None
    y_scale, y_zp = float(meta["y_scale"]), int(meta["y_zero_point"])
    if kind == "qlinear":
        packed = torch.ops.quantized.linear_prepack(w, bias)
        return torch.ops.quantized.linear(x, packed, y_scale, y_zp).int_repr().numpy()
    geo = [meta["stride"], meta["padding"], meta["dilation"], meta["groups"]]
    packed = torch.ops.quantized.conv2d_prepack(w, bias, *geo)
    x = x.contiguous(memory_format=torch.channels_last)
    y = torch.ops.quantized.conv2d(x, packed, y_scale, y_zp)
    return y.int_repr().contiguous().numpy()


def main(src: str, dst: str) -> None:
    """Run every case of ``src`` and save the outputs to ``dst``."""
    import torch

    torch.backends.quantized.engine = "onednn"
    data = np.load(src)
    meta = json.loads(str(data["__meta__"]))
    outputs = {}
    for name, case_meta in meta.items():
        arrays = {
            key.split("/", 1)[1]: data[key] for key in data.files if key.startswith(name + "/")
        }
        print(f"CASE {name}", flush=True)
        outputs[name] = _run_case(torch, name.split(":")[0], arrays, case_meta)
        print("END", flush=True)
    np.savez(dst, **outputs)
    print(f"TORCH {torch.__version__}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
