"""HiSilicon NNIE: 8-bit per-tensor logarithmic quantization (seed 003, ``nnie.md``).

Importing this package registers the conformance operators ``log_quantize`` and
``log_dequantize``. See ``README.md`` in this directory for the semantics and divergences.
"""

from quantemu.backends.nnie import conformance as _conformance  # noqa: F401  (registers ops)
from quantemu.backends.nnie.cliptable import (
    DEFAULT_K_MAX,
    DEFAULT_K_MIN,
    ClipTable,
    SnapResult,
    clip_table,
    read_clip_table,
    snap_clip,
    write_clip_table,
)
from quantemu.backends.nnie.lint import Finding, NodeView, Severity, lint_graph, lint_nnie
from quantemu.backends.nnie.lower import Options as LowerOptions
from quantemu.backends.nnie.lower import header as lower_header
from quantemu.backends.nnie.lower import lower
from quantemu.backends.nnie.lower.ceil_pooling import ceil_pooling
from quantemu.backends.nnie.ops import log_dequantize, log_quantize
from quantemu.backends.nnie.params import LogQuantParams, clip_exponent
from quantemu.backends.nnie.quantize import (
    ClipChoice,
    LogObserver,
    select_clip_max_abs,
    select_clip_mse,
)
from quantemu.backends.registry import BackendSpec

#: The backend's registration (:mod:`quantemu.backends.catalog` registers it).
BACKEND = BackendSpec(
    name="nnie",
    target="HiSilicon NNIE, 8-bit logarithmic codes",
    scheme="MQBench's NNIE flow: 8-bit log codes, one clip per tensor snapped to the gfpq table",
    options=LowerOptions,
    lower=lower,
    header=lower_header,
    lint=lint_graph,
    prepare=lambda graph, options: ceil_pooling(graph),
)

__all__ = [
    "BACKEND",
    "DEFAULT_K_MAX",
    "DEFAULT_K_MIN",
    "ClipChoice",
    "ClipTable",
    "Finding",
    "LogObserver",
    "LogQuantParams",
    "NodeView",
    "Severity",
    "SnapResult",
    "clip_exponent",
    "clip_table",
    "lint_graph",
    "lint_nnie",
    "log_dequantize",
    "log_quantize",
    "read_clip_table",
    "select_clip_max_abs",
    "select_clip_mse",
    "snap_clip",
    "write_clip_table",
]
