"""The real peer of the whole-model check: ``lower_models`` as PyTorch quantized modules.

Usage (in a subprocess, ``ONEDNN_MAX_CPU_ISA`` and ``ONEDNN_VERBOSE=1`` set by the caller):
``python peer_model.py SPEC.npz OUT.npz``. Engine ``onednn``, one thread. Before each layer it
prints ``CASE <layer>`` (and ``END`` after) so that oneDNN's ``exec`` lines can be attributed;
``OUT.npz`` holds the u8 codes (``int_repr``) of ``y1`` ... ``y10`` in NCHW order.

The qparams and weight codes are passed on the command line's spec file; this file imports
torch only inside ``main`` so that test collection never needs it.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def _modules(torch, spec: dict, meta: dict) -> dict:
    from torch.ao.nn.intrinsic.quantized import ConvReLU2d, LinearReLU
    from torch.ao.nn.quantized import Conv2d, Linear

    def weight(name):
        scales = torch.from_numpy(spec[f"{name}/scales"].astype(np.float64))
        zeros = torch.zeros(len(scales), dtype=torch.long)
        return torch._make_per_channel_quantized_tensor(
            torch.from_numpy(spec[f"{name}/w"]), scales, zeros, 0
        )

    built = {
        "conv1": ConvReLU2d(3, 20, 3, padding=1),
        "conv2": Conv2d(20, 20, 3, padding=1),
        "dw": Conv2d(20, 20, 3, padding=1, groups=20),
        "fc1": LinearReLU(20, 12),
        "fc2": Linear(12, 10),
    }
    outputs = {"conv1": "y1", "conv2": "y2", "dw": "y5", "fc1": "y9", "fc2": "y10"}
    for name, module in built.items():
        module.set_weight_bias(weight(name), torch.from_numpy(spec[f"{name}/b"]))
        module.scale, module.zero_point = meta[outputs[name]]
    return built


def run(torch, spec: dict, meta: dict) -> dict[str, np.ndarray]:
    """Every tensor of the model, as u8 codes."""
    m = _modules(torch, spec, meta)
    fn = torch.nn.functional
    s0, z0 = meta["x"]
    y = {"x": torch.quantize_per_tensor(torch.from_numpy(spec["x"]), s0, z0, torch.quint8)}
    steps = [
        ("conv1", "y1", lambda: m["conv1"](y["x"])),
        ("conv2", "y2", lambda: m["conv2"](y["y1"])),
        ("add", "y3", lambda: torch.ops.quantized.add_relu(y["y2"], y["y1"], *meta["y3"])),
        ("pool", "y4", lambda: fn.max_pool2d(y["y3"], 2)),
        ("dw", "y5", lambda: m["dw"](y["y4"])),
        ("avg", "y6", lambda: fn.avg_pool2d(y["y5"], 2)),
        ("gap", "y7", lambda: fn.adaptive_avg_pool2d(y["y6"], 1)),
        ("flatten", "y8", lambda: torch.flatten(y["y7"], 1)),
        ("fc1", "y9", lambda: m["fc1"](y["y8"])),
        ("fc2", "y10", lambda: m["fc2"](y["y9"])),
    ]
    for layer, name, step in steps:
        print(f"CASE {layer}", flush=True)
        y[name] = step()
        print("END", flush=True)
    return {k: v.int_repr().contiguous().numpy() for k, v in y.items() if k != "x"}


def main(src: str, dst: str) -> None:
    """Run the model of ``src`` and save its tensors to ``dst``."""
    import torch

    torch.backends.quantized.engine = "onednn"
    torch.set_num_threads(1)
    data = np.load(src)
    meta = {k: tuple(v) for k, v in json.loads(str(data["__meta__"])).items()}
    spec = {k: data[k] for k in data.files if k != "__meta__"}
    np.savez(dst, **run(torch, spec, meta))
    print(f"TORCH {torch.__version__}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
