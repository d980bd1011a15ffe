"""Constraints lint for networks targeting NNIE (seed 003's "attention" list).

The seed (MQBench's NNIE page) lists three model constraints: pooling must use ``ceil_mode``,
depthwise convolution should be avoided, and upsampling is 2x nearest-neighbour only. The rules
run over :class:`NodeView`, a minimal backend-neutral view of one node (:func:`lint_nnie`);
:func:`lint_graph` adapts the nodes of a :class:`~quantemu.graph.Graph` to it (the backend
registers it as its lint: ``quantemu inspect --lint nnie``; ``lower()`` records its findings in
the lowered model). Operator and attribute names are ONNX's.

Rules (``Finding.rule``):

- ``pool_ceil_mode``: ``MaxPool``/``AveragePool``/``LpPool`` with ``ceil_mode`` 0 (ONNX's
  default). NNIE computes pooled sizes with ceil, so the deployed network would have different
  shapes: an error when the input shape shows floor and ceil differ (or when the shape is
  unknown), a warning when they happen to agree for this input shape.
- ``depthwise_conv``: ``Conv`` with ``group == C_in > 1`` and ``C_out`` a multiple of ``C_in``
  (``group == C_in == C_out`` is the plain depthwise case): a warning (the seed says *avoid*).
  When neither the weight nor the input shape is known, a grouped conv is reported as possibly
  depthwise. Other grouped convolutions get an ``info`` note: MQBench's NNIE deploy flow leaves
  grouped convolution unquantized (``notes/toolchains.md``).
- ``upsample``: ``Resize``/``Upsample`` must be mode ``nearest`` with scales exactly
  ``(1, 1, 2, 2)`` (NCHW; from the ``scales`` constant, or from ``sizes`` and the input shape):
  anything else is an error, and so is a scale that cannot be determined. A 2x nearest ``Resize``
  whose coordinate/rounding modes do not replicate each pixel 2x2 gets a warning.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from quantemu.graph.ir import Graph, Node

Shape = tuple[int, ...]


class Severity(enum.Enum):
    """How bad a finding is: ``error`` changes results or fails to deploy; ``warning`` is
    against the vendor's advice; ``info`` is worth knowing."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class NodeView:
    """The part of a graph node the NNIE lint reads.

    - ``name``: the node's name (findings point at it); ``op_type``: the ONNX operator name.
    - ``attrs``: ONNX attributes by name (ints, floats, strings, or sequences of them).
    - ``input_shapes``: the static shape of each input in ONNX input order (``None`` where
      unknown); the data input is NCHW.
    - ``weight_shape``: for ``Conv``, the weight shape ``(C_out, C_in/group, kH, kW)``, if known.
    - ``constants``: values of constant inputs the adapter resolved, by ONNX input name (for
      ``Resize``: ``scales``/``sizes``; for ``Upsample`` from opset 9: ``scales``).
    """

    name: str
    op_type: str
    attrs: Mapping[str, Any] = field(default_factory=dict)
    input_shapes: Sequence[Shape | None] = ()
    weight_shape: Shape | None = None
    constants: Mapping[str, Sequence[float]] = field(default_factory=dict)

    def input_shape(self, i: int = 0) -> Shape | None:
        """The static shape of input ``i``, or ``None`` when unknown."""
        if i < len(self.input_shapes) and self.input_shapes[i] is not None:
            return tuple(int(d) for d in self.input_shapes[i])
        return None


@dataclass(frozen=True)
class Finding:
    """One lint result: which node, which rule, how bad, what is wrong and what to do."""

    node: str
    rule: str
    severity: Severity
    message: str
    advice: str


_POOLS = ("MaxPool", "AveragePool", "LpPool")
_UPSAMPLES = ("Resize", "Upsample")


def lint_nnie(nodes: Iterable[NodeView]) -> list[Finding]:
    """Every finding of every rule on ``nodes``, in node order.

    >>> lint_nnie([NodeView("pool1", "MaxPool", {"kernel_shape": (2, 2), "ceil_mode": 1})])
    []
    >>> [f.rule for f in lint_nnie([NodeView("up", "Resize", {"mode": "linear"})])]
    ['upsample']
    """
    findings: list[Finding] = []
    for node in nodes:
        if node.op_type in _POOLS:
            findings += _check_pool(node)
        elif node.op_type == "Conv":
            findings += _check_conv(node)
        elif node.op_type in _UPSAMPLES:
            findings += _check_upsample(node)
    return findings


def _pooled_sizes(node: NodeView, shape: Shape) -> tuple[list[int], list[int]] | None:
    """Output spatial sizes with floor and with ceil, or ``None`` if the attributes are partial."""
    kernel = node.attrs.get("kernel_shape")
    if kernel is None or len(shape) != 2 + len(kernel):
        return None
    n = len(kernel)
    strides = node.attrs.get("strides", (1,) * n)
    dilations = node.attrs.get("dilations", (1,) * n)
    pads = node.attrs.get("pads", (0,) * (2 * n))
    floor, ceil = [], []
    for i in range(n):  # a loop over the (two) spatial axes
        span = shape[2 + i] + pads[i] + pads[n + i] - ((kernel[i] - 1) * dilations[i] + 1)
        floor.append(span // strides[i] + 1)
        ceil.append(-(-span // strides[i]) + 1)
    return floor, ceil


def _check_pool(node: NodeView) -> list[Finding]:
    if int(node.attrs.get("ceil_mode", 0)) == 1:
        return []
    advice = "set ceil_mode=1 (PyTorch: ceil_mode=True) and retrain or re-export"
    shape = node.input_shape(0)
    sizes = _pooled_sizes(node, shape) if shape is not None else None
    if sizes is not None and sizes[0] == sizes[1]:
        return [
            Finding(
                node.name,
                "pool_ceil_mode",
                Severity.WARNING,
                f"{node.op_type} uses ceil_mode=0; NNIE pools with ceil_mode=1. For input shape "
                f"{shape} both give spatial size {sizes[0]}, so results agree here",
                advice + " so that other input sizes keep agreeing",
            )
        ]
    detail = (
        f"for input shape {shape}: floor gives {sizes[0]}, NNIE's ceil gives {sizes[1]}"
        if sizes is not None
        else "the output size may differ (input shape or kernel unknown)"
    )
    return [
        Finding(
            node.name,
            "pool_ceil_mode",
            Severity.ERROR,
            f"{node.op_type} uses ceil_mode=0 but NNIE pools with ceil_mode=1: {detail}",
            advice,
        )
    ]


def _conv_channels(node: NodeView, group: int) -> tuple[int | None, int | None]:
    """``(C_in, C_out)`` from the weight shape, else ``C_in`` from the input shape."""
    if node.weight_shape is not None and len(node.weight_shape) >= 2:
        return int(node.weight_shape[1]) * group, int(node.weight_shape[0])
    shape = node.input_shape(0)
    return (int(shape[1]) if shape is not None and len(shape) >= 2 else None), None


def _check_conv(node: NodeView) -> list[Finding]:
    group = int(node.attrs.get("group", 1))
    if group == 1:
        return []
    c_in, c_out = _conv_channels(node, group)
    advice = "replace it by a dense convolution, or a dense 1x1 + 3x3 pair (seed 003: avoid it)"
    if c_in is None:
        message = f"Conv with group={group} and unknown channel counts: possibly depthwise"
        return [Finding(node.name, "depthwise_conv", Severity.WARNING, message, advice)]
    if group == c_in and (c_out is None or c_out % c_in == 0):
        shape = f"C_in={c_in}" + (f", C_out={c_out}" if c_out is not None else "")
        message = f"depthwise Conv (group={group}, {shape}): NNIE advises against depthwise"
        return [Finding(node.name, "depthwise_conv", Severity.WARNING, message, advice)]
    return [
        Finding(
            node.name,
            "grouped_conv",
            Severity.INFO,
            f"grouped Conv (group={group}, C_in={c_in}): MQBench's NNIE deploy flow does not "
            "quantize grouped convolutions",
            "check how the NNIE mapper quantizes this layer, or use a dense convolution",
        )
    ]


def _upsample_scales(node: NodeView) -> tuple[float, ...] | None:
    for scales in (node.constants.get("scales"), node.attrs.get("scales")):
        if scales is not None and len(scales):  # ONNX Resize passes an empty scales with sizes
            return tuple(float(s) for s in scales)
    sizes, shape = node.constants.get("sizes"), node.input_shape(0)
    if sizes is not None and shape is not None and len(sizes) == len(shape) and all(shape):
        return tuple(float(o) / float(i) for o, i in zip(sizes, shape, strict=True))
    return None


def _text(value: Any) -> str:
    """An ONNX string attribute (ONNX stores them as bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


# Resize modes that copy each input pixel to a 2x2 block at scale 2 (worked out from the ONNX
# coordinate transforms: asymmetric maps output x to x/2, half_pixel to x/2 - 1/4).
_REPLICATING = {
    "asymmetric": ("floor", "round_prefer_floor"),
    "half_pixel": ("round_prefer_floor", "round_prefer_ceil"),
    "pytorch_half_pixel": ("round_prefer_floor", "round_prefer_ceil"),
}


def _check_upsample(node: NodeView) -> list[Finding]:
    advice = "use nn.Upsample(scale_factor=2, mode='nearest'), chained for 4x, 8x..."
    mode = _text(node.attrs.get("mode", "nearest"))
    scales = _upsample_scales(node)
    problems = []
    if mode != "nearest":
        problems.append(f"mode {mode!r}")
    if scales is None:
        problems.append("scales that cannot be determined (no constant scales/sizes)")
    elif scales[:2] != (1.0, 1.0) or scales[2:] != (2.0, 2.0):
        problems.append(f"scales {scales}")
    if problems:
        message = (
            f"{node.op_type} with {' and '.join(problems)}: NNIE supports only 2x "
            "nearest-neighbour upsampling (scales (1, 1, 2, 2))"
        )
        return [Finding(node.name, "upsample", Severity.ERROR, message, advice)]
    if node.op_type != "Resize":
        return []
    transform = _text(node.attrs.get("coordinate_transformation_mode", "half_pixel"))
    rounding = _text(node.attrs.get("nearest_mode", "round_prefer_floor"))
    if rounding in _REPLICATING.get(transform, ()):
        return []
    message = (
        f"Resize 2x nearest with coordinate_transformation_mode={transform!r} and "
        f"nearest_mode={rounding!r} does not copy each pixel to a 2x2 block as NNIE does"
    )
    return [Finding(node.name, "upsample", Severity.WARNING, message, advice)]


# -- the graph IR adapter ---------------------------------------------------------------------


def _static_shape(shape) -> tuple[int, ...] | None:
    """A shape with the (symbolic) batch bound to 1; ``None`` if another dimension is unknown.

    The rules read channels and spatial sizes only, which a symbolic batch does not affect.
    """
    dims = list(shape)
    if dims and not isinstance(dims[0], int):
        dims[0] = 1
    if not all(isinstance(d, int) for d in dims):
        return None
    return tuple(dims)


def node_view(graph: Graph, node: Node) -> NodeView:
    """The :class:`NodeView` of ``node``: attributes, static input shapes, Conv weight shape, and
    Resize's ``scales``/``sizes`` (normalized into attributes by the importer)."""
    shapes = tuple(
        _static_shape(graph.tensors[name].shape) if name in graph.tensors else None
        for name in node.inputs
    )
    weight_shape = None
    if node.op_type == "Conv" and len(node.inputs) > 1 and node.inputs[1] in graph.tensors:
        weight_shape = _static_shape(graph.tensors[node.inputs[1]].shape)
    constants = {
        key: tuple(node.attrs[key])
        for key in ("scales", "sizes")
        if node.op_type == "Resize" and key in node.attrs
    }
    return NodeView(node.name, node.op_type, dict(node.attrs), shapes, weight_shape, constants)


def lint_graph(graph: Graph) -> list[Finding]:
    """Every NNIE model-constraint finding (seed 003's list) on ``graph``'s nodes, in order.

    >>> from quantemu.data import demo_model_path
    >>> from quantemu.graph import load_onnx, optimize
    >>> [(f.node, f.rule, f.severity.value) for f in lint_graph(optimize(load_onnx(
    ...     demo_model_path())))]  # doctest: +NORMALIZE_WHITESPACE
    [('/depthwise/Conv', 'depthwise_conv', 'warning'),
     ('/pool/MaxPool', 'pool_ceil_mode', 'warning'),
     ('/avgpool/AveragePool', 'pool_ceil_mode', 'warning')]
    """
    return lint_nnie(node_view(graph, node) for node in graph.nodes)


def summarize(findings: list[Finding]) -> str:
    """``"3 findings (0 error, 3 warning, 0 info)"``: a one-line count for report headers.

    >>> summarize([])
    '0 findings'
    """
    if not findings:
        return "0 findings"
    counts = Counter(f.severity for f in findings)
    parts = ", ".join(f"{counts[s]} {s.value}" for s in Severity)
    return f"{len(findings)} findings ({parts})"
