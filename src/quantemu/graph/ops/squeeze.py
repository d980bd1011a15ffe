"""Squeeze and Unsqueeze: pure data movements (backends run these kernels on their codes).

Normalized attributes: ``axes`` (sorted, non-negative, explicit): for Squeeze the input axes of
size 1 to remove (resolved at import when the model gives none), for Unsqueeze the positions of
the new axes of size 1 in the output.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.graph.ir import Attrs, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import data, fail, known, register


def _infer_squeeze(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    axes = node.attrs["axes"]
    bad = [a for a in axes if a >= x.rank or (known(x.shape[a]) and x.shape[a] != 1)]
    if bad:
        raise fail(node, f"cannot squeeze axes {list(bad)} of shape {x.shape} (not of size 1)")
    return [tuple(d for i, d in enumerate(x.shape) if i not in axes)]


def _run_squeeze(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x, axes = inputs[0], tuple(attrs["axes"])
    if any(x.shape[a] != 1 for a in axes):
        raise InvalidInputError(f"Squeeze: axes {axes} of a {x.shape} tensor are not all of size 1")
    return [x.reshape([d for i, d in enumerate(x.shape) if i not in axes])]


def _infer_unsqueeze(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    axes = node.attrs["axes"]
    rank = x.rank + len(axes)
    if any(a >= rank for a in axes):
        raise fail(node, f"axes {axes} are out of range for an output of rank {rank}")
    dims = iter(x.shape)
    return [tuple(1 if i in axes else next(dims) for i in range(rank))]


def _run_unsqueeze(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    return [np.expand_dims(inputs[0], tuple(attrs["axes"]))]


register("Squeeze", _infer_squeeze, _run_squeeze)
register("Unsqueeze", _infer_unsqueeze, _run_unsqueeze)
