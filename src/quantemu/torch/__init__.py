"""Quantization-aware training against a target's exact arithmetic (needs ``quantemu[torch]``).

``qat = quantemu.torch.prepare(model, backend, calib, **options)`` returns a
:class:`~quantemu.torch.qat.QatModel`, a ``torch.nn.Module`` whose forward pass is the
backend's exact integer program for the current weights and whose backward pass is the
straight-through estimator through a float twin of the graph (:mod:`quantemu.torch.qat`).
``import quantemu`` never imports torch; this package does.
"""

try:
    import torch  # noqa: F401 (an optional dependency: fail here with the remedy)
except ImportError as exc:  # pragma: no cover - the test extra installs torch
    raise ImportError(
        "quantemu.torch needs PyTorch: pip install 'quantemu[torch]' (torch==2.13.0, the CPU build)"
    ) from exc

from quantemu.torch.qat import QatModel, prepare

__all__ = ["QatModel", "prepare"]
