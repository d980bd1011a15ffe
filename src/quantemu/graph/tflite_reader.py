"""Read a TFLite flatbuffer into plain, validated values (no IR yet).

The flatbuffer is parsed with the ``tflite`` package (the published schema's generated
accessors). :func:`read_tflite` checks the file identifier and turns every access error of a
malformed or truncated file into an :class:`~quantemu.errors.InvalidInputError`. What it
returns is independent of the schema classes: :class:`TfliteTensor` (shape, dtype, quantization
kept exactly, constant data) and :class:`TfliteOp` (operator name, tensor indices, decoded
builtin options, custom code and raw custom options).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError

#: TFLite ``TensorType`` -> NumPy dtype name (the types an int8 model can hold).
TENSOR_TYPES = {
    0: "float32",
    1: "float16",
    2: "int32",
    3: "uint8",
    4: "int64",
    6: "bool",
    7: "int16",
    9: "int8",
    10: "float64",
}

#: Builtin options each supported operator carries: (options class, {our key: accessor}).
OPTIONS: dict[str, tuple[str, dict[str, str]]] = {
    "CONV_2D": (
        "Conv2DOptions",
        {
            "padding": "Padding",
            "stride_w": "StrideW",
            "stride_h": "StrideH",
            "dilation_w": "DilationWFactor",
            "dilation_h": "DilationHFactor",
            "activation": "FusedActivationFunction",
        },
    ),
    "DEPTHWISE_CONV_2D": (
        "DepthwiseConv2DOptions",
        {
            "padding": "Padding",
            "stride_w": "StrideW",
            "stride_h": "StrideH",
            "dilation_w": "DilationWFactor",
            "dilation_h": "DilationHFactor",
            "depth_multiplier": "DepthMultiplier",
            "activation": "FusedActivationFunction",
        },
    ),
    "FULLY_CONNECTED": (
        "FullyConnectedOptions",
        {
            "activation": "FusedActivationFunction",
            "weights_format": "WeightsFormat",
            "keep_num_dims": "KeepNumDims",
        },
    ),
    "ADD": ("AddOptions", {"activation": "FusedActivationFunction"}),
    "SUB": ("SubOptions", {"activation": "FusedActivationFunction"}),
    "MUL": ("MulOptions", {"activation": "FusedActivationFunction"}),
    "MAX_POOL_2D": (
        "Pool2DOptions",
        {
            "padding": "Padding",
            "stride_w": "StrideW",
            "stride_h": "StrideH",
            "filter_w": "FilterWidth",
            "filter_h": "FilterHeight",
            "activation": "FusedActivationFunction",
        },
    ),
    "MEAN": ("ReducerOptions", {"keep_dims": "KeepDims"}),
    "CONCATENATION": (
        "ConcatenationOptions",
        {"axis": "Axis", "activation": "FusedActivationFunction"},
    ),
    "SOFTMAX": ("SoftmaxOptions", {"beta": "Beta"}),
    "LEAKY_RELU": ("LeakyReluOptions", {"alpha": "Alpha"}),
    "BATCH_MATMUL": ("BatchMatMulOptions", {"adj_x": "AdjX", "adj_y": "AdjY"}),
}
OPTIONS["AVERAGE_POOL_2D"] = OPTIONS["MAX_POOL_2D"]
RESIZE_FLAGS = {"align_corners": "AlignCorners", "half_pixel_centers": "HalfPixelCenters"}
OPTIONS["RESIZE_NEAREST_NEIGHBOR"] = ("ResizeNearestNeighborOptions", RESIZE_FLAGS)
OPTIONS["RESIZE_BILINEAR"] = ("ResizeBilinearOptions", RESIZE_FLAGS)


@dataclass(frozen=True)
class TfliteQuant:
    """A tensor's quantization exactly as stored: float32 scales, int64 zero points, axis."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int

    @property
    def per_channel(self) -> bool:
        """True when the file gives more than one scale (per-axis quantization)."""
        return self.scale.size > 1


@dataclass(frozen=True)
class TfliteTensor:
    """One tensor of subgraph 0: ``data`` is the constant buffer (``None`` for activations)."""

    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    quant: TfliteQuant | None
    data: np.ndarray | None = field(default=None, repr=False)


@dataclass(frozen=True)
class TfliteOp:
    """One operator: ``name`` is the builtin name (``CUSTOM`` ops carry ``custom_code``)."""

    index: int
    name: str
    inputs: tuple[int, ...]  # -1 marks an omitted optional input
    outputs: tuple[int, ...]
    options: dict[str, Any]
    custom_code: str = ""
    custom_options: bytes = b""

    def __str__(self) -> str:
        return f"operator {self.index} ({self.custom_code or self.name})"


@dataclass(frozen=True)
class TfliteModel:
    """Subgraph 0 of a TFLite file, in plain values."""

    name: str
    tensors: tuple[TfliteTensor, ...]
    operators: tuple[TfliteOp, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    description: str = ""


def read_tflite(source: str | Path | bytes) -> TfliteModel:
    """Parse a ``.tflite`` file (path or bytes); :class:`InvalidInputError` if it is not one."""
    name, buf = _bytes(source)
    try:
        import tflite  # noqa: PLC0415 (imported on first use; the package is a dependency)
    except ImportError:  # pragma: no cover - a core dependency
        raise UnsupportedError(
            "reading TFLite models needs the 'tflite' package: pip install tflite"
        ) from None
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise InvalidInputError(
            f"{name}: not a TFLite flatbuffer (the file identifier at bytes 4..8 is "
            f"{bytes(buf[4:8])!r}, expected b'TFL3'); pass an int8 .tflite model"
        )
    try:
        return _read(tflite, buf, name)
    except (IndexError, struct.error, ValueError, TypeError, AttributeError, OverflowError) as exc:
        raise InvalidInputError(
            f"{name}: the TFLite flatbuffer is malformed or truncated ({type(exc).__name__}: "
            f"{exc}); re-export the model"
        ) from None


def _bytes(source: str | Path | bytes) -> tuple[str, bytes]:
    if isinstance(source, bytes | bytearray | memoryview):
        return "model", bytes(source)
    path = Path(source)
    try:
        return path.name, path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read TFLite model {path}: {exc.strerror or exc}") from None


def _read(tflite: Any, buf: bytes, name: str) -> TfliteModel:
    model = tflite.Model.GetRootAsModel(buf, 0)
    if model.SubgraphsLength() < 1:
        raise InvalidInputError(f"{name}: the model has no subgraph")
    graph = model.Subgraphs(0)
    tensors = tuple(_tensor(model, graph.Tensors(i), i, buf) for i in range(graph.TensorsLength()))
    codes = [_opcode(tflite, model.OperatorCodes(i)) for i in range(model.OperatorCodesLength())]
    ops = tuple(
        _operator(tflite, graph.Operators(i), i, codes, len(tensors))
        for i in range(graph.OperatorsLength())
    )
    inputs = tuple(int(i) for i in _ints(graph.InputsAsNumpy()))
    outputs = tuple(int(i) for i in _ints(graph.OutputsAsNumpy()))
    for index in inputs + outputs:
        if not 0 <= index < len(tensors):
            raise InvalidInputError(f"{name}: graph input/output tensor {index} does not exist")
    description = (model.Description() or b"").decode("utf-8", "replace")
    graph_name = (graph.Name() or b"").decode("utf-8", "replace") or Path(name).stem
    return TfliteModel(graph_name, tensors, ops, inputs, outputs, description)


def _ints(value: Any) -> np.ndarray:
    # The generated accessors return 0 instead of an empty array for an absent vector.
    return value if isinstance(value, np.ndarray) else np.zeros(0, np.int32)


def _tensor(model: Any, t: Any, index: int, buf: bytes) -> TfliteTensor:
    code = t.Type()
    if code not in TENSOR_TYPES:
        raise UnsupportedError(f"tensor {index}: TFLite tensor type {code} is not supported")
    dtype = TENSOR_TYPES[code]
    shape = tuple(int(d) for d in _ints(t.ShapeAsNumpy()))
    name = (t.Name() or b"").decode("utf-8", "replace") or f"tensor_{index}"
    return TfliteTensor(
        index,
        name,
        shape,
        dtype,
        _quant(t.Quantization(), index),
        _data(model, t, dtype, shape, buf),
    )


def _quant(q: Any, index: int) -> TfliteQuant | None:
    if q is None or q.ScaleLength() == 0:
        return None
    scale = np.asarray(q.ScaleAsNumpy(), np.float32).copy()
    if not np.all(np.isfinite(scale)) or np.any(scale < 0):
        raise InvalidInputError(
            f"tensor {index}: quantization scales {scale[:8].tolist()} must be finite and >= 0; "
            "the file is corrupt, re-export the model"
        )
    zero = np.asarray(_ints(q.ZeroPointAsNumpy()), np.int64).copy()
    if zero.size == 0:
        zero = np.zeros(scale.shape, np.int64)
    if zero.size != scale.size:
        raise InvalidInputError(f"{scale.size} scales but {zero.size} zero points")
    return TfliteQuant(scale, zero, int(q.QuantizedDimension()))


def _data(model: Any, t: Any, dtype: str, shape: tuple[int, ...], buf: bytes) -> np.ndarray | None:
    index = t.Buffer()
    if index == 0 or index >= model.BuffersLength():
        return None
    b = model.Buffers(index)
    raw = b.DataAsNumpy()
    offset, size = (b.Offset(), b.Size()) if hasattr(b, "Offset") else (0, 0)
    if isinstance(raw, np.ndarray) and raw.size:
        data = raw.tobytes()
    elif offset > 1 and size:
        if offset + size > len(buf):
            raise InvalidInputError(f"buffer {index} lies beyond the end of the file (truncated)")
        data = buf[offset : offset + size]
    else:
        return None
    count = int(np.prod(shape, dtype=np.int64))
    item = np.dtype(dtype).itemsize
    if len(data) != count * item:
        raise InvalidInputError(
            f"buffer {index} holds {len(data)} bytes, but its tensor {shape} {dtype} needs "
            f"{count * item}"
        )
    array = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype)
    return array.reshape(shape)


def _opcode(tflite: Any, code: Any) -> tuple[str, str]:
    builtin = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
    custom = (code.CustomCode() or b"").decode("utf-8", "replace")
    if builtin == 32:
        return "CUSTOM", custom
    try:
        return tflite.opcode2name(builtin), ""
    except ValueError:
        return f"BUILTIN_{builtin}", ""


def _operator(tflite: Any, op: Any, index: int, codes: list, n_tensors: int) -> TfliteOp:
    if not 0 <= op.OpcodeIndex() < len(codes):
        raise InvalidInputError(f"operator {index}: opcode index {op.OpcodeIndex()} is invalid")
    name, custom = codes[op.OpcodeIndex()]
    inputs = tuple(int(i) for i in _ints(op.InputsAsNumpy()))
    outputs = tuple(int(i) for i in _ints(op.OutputsAsNumpy()))
    for i in inputs + outputs:
        if not -1 <= i < n_tensors:
            raise InvalidInputError(
                f"operator {index} ({name}) reads tensor {i}, which does not exist"
            )
    raw = op.CustomOptionsAsNumpy()
    return TfliteOp(
        index,
        name,
        inputs,
        outputs,
        _options(tflite, op, name),
        custom,
        raw.tobytes() if isinstance(raw, np.ndarray) else b"",
    )


def _options(tflite: Any, op: Any, name: str) -> dict[str, Any]:
    if name not in OPTIONS:
        return {}
    cls_name, fields = OPTIONS[name]
    table = op.BuiltinOptions()
    if table is None:
        return {}
    options = getattr(tflite, cls_name)()
    options.Init(table.Bytes, table.Pos)
    values = {key: getattr(options, accessor)() for key, accessor in fields.items()}
    if name == "RESHAPE":  # pragma: no cover - RESHAPE takes its shape from its second input
        values["new_shape"] = tuple(int(d) for d in _ints(options.NewShapeAsNumpy()))
    return values
