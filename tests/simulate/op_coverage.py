"""What the op-coverage tests share: a model runs on a backend, or the refusal names an op."""

from __future__ import annotations

import numpy as np

import quantemu
from quantemu.backends.registry import known_backends
from quantemu.errors import InvalidInputError, UnsupportedError

#: Every backend with its default options, and xs3's older toolchain.
TARGETS = [(name, {}) for name in known_backends()] + [("xs3", {"toolchain": "tflite2xcore"})]
TARGET_IDS = [b + "-".join(["", *o.values()]) for b, o in TARGETS]


def assert_runs_or_names_an_operator(model, sample, backend, options, *, must_run: bool):
    """Compile and run ``model`` (samples of shape ``sample``); a refusal must name one of the
    model's op types, and is an error itself when ``must_run``."""
    calib = np.random.default_rng(1).normal(size=(16, *sample)).astype(np.float32)
    x = np.random.default_rng(2).normal(size=(2, *sample)).astype(np.float32)
    op_types = {node.op_type for node in model.graph.node}
    try:
        program = quantemu.compile(model, backend, calib=calib, **options)
        result = program.run(x)
    except (UnsupportedError, InvalidInputError) as exc:
        if must_run:
            raise
        named = [op for op in op_types if op in str(exc)]
        assert named, f"{backend}: the error names none of {sorted(op_types)}: {exc}"
        return None
    assert result is not None
    return result
