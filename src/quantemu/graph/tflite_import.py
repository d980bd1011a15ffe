"""Int8 TFLite models into the graph IR, every quantization parameter kept exactly.

``graph = load_tflite("model.int8.tflite")`` (a path or the bytes) reads subgraph 0 with
:mod:`quantemu.graph.tflite_reader` and builds an ordinary :class:`~quantemu.graph.ir.Graph`:

- **Quantization.** Every quantized tensor gets a :class:`~quantemu.graph.ir.QuantOverride`
  with the file's float32 scales and its zero points in the tensor's own integer dtype (int8
  activations and weights, int32 biases), per tensor or per axis, and ``values`` = the stored
  integers for constants. Initializers hold the dequantized floats ``(q - z) * s`` so that
  :meth:`Graph.run_float` runs the model's float meaning.
- **Layout.** The IR's operators have ONNX semantics (NCHW), TFLite's are NHWC. Graph inputs and
  outputs keep the file's layout (NHWC, batch first); the importer inserts a ``Transpose`` only
  where an operator needs the other layout (a convolution's input in NHWC, a RESHAPE's input in
  NCHW). Conv weights OHWI become OIHW, depthwise 1HWC becomes (C, 1, H, W) with ``group = C``.
- **Batch.** Dimension 0 of every activation is the batch: the model's 1 becomes the symbolic
  ``"batch"``, so any number of samples runs at once.
- **Operators.** :data:`BUILTINS` maps each supported TFLite operator to IR nodes (each node
  records the operator in ``attrs["tflite_op"]``); QUANTIZE becomes a ``Clip`` to its output's
  range (a requantization, as a QDQ pair is imported), DEQUANTIZE an ``Identity``. Custom
  operators (XMOS's ``XC_`` ops of a compiled model) become ``TfliteCustom`` nodes with their
  raw options and parameter tensors as initializers of their own dtypes.

Anything else is an :class:`~quantemu.errors.UnsupportedError` naming the operator and its
index; malformed files are :class:`~quantemu.errors.InvalidInputError`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from quantemu.errors import InvalidInputError, QuantemuError, UnsupportedError
from quantemu.graph.ir import Graph, Node, QuantOverride, TensorInfo
from quantemu.graph.tflite_ops import BUILTINS, convert_custom
from quantemu.graph.tflite_reader import TfliteModel, TfliteOp, TfliteTensor, read_tflite

NCHW_FROM_NHWC = (0, 3, 1, 2)
NHWC_FROM_NCHW = (0, 2, 3, 1)
BATCH = "batch"
#: ``graph.metadata`` key: the tensors the importer holds in NCHW (one name per line).
NCHW_KEY = "tflite_nchw_tensors"
INTEGER_TYPES = ("int8", "uint8", "int16", "int32")


def load_tflite(source: str | Path | bytes) -> Graph:
    """Read a TFLite model (path or bytes) into a :class:`Graph` (see the module docstring)."""
    model = read_tflite(source)
    builder = TfliteGraphBuilder(model)
    for op in model.operators:
        builder.convert(op)
    return builder.graph()


def nhwc_view(graph: Graph, name: str, codes):
    """``codes`` of IR tensor ``name`` in the TFLite file's own layout (NHWC for rank 4)."""
    held = set(graph.metadata.get(NCHW_KEY, "").split("\n"))
    return np.transpose(codes, NHWC_FROM_NCHW) if name in held else codes


class TfliteGraphBuilder:
    """Accumulates IR nodes for one TFLite subgraph; ops use its helpers (see tflite_ops)."""

    def __init__(self, model: TfliteModel) -> None:
        self.model = model
        self.nodes: list[Node] = []
        self.initializers: dict[str, np.ndarray] = {}
        self.overrides: dict[str, QuantOverride] = {}
        self.layouts: dict[str, str] = {}  # IR name -> "nhwc" | "nchw" (rank-4 values only)
        self._names: dict[int, str] = {}  # TFLite tensor index -> IR name (native layout)
        self._converted: dict[tuple[str, str], str] = {}
        self._taken: set[str] = set()
        # Graph outputs keep the file's names: reserve them so that a Transpose back to NHWC
        # can write the name itself.
        self._final = {i: self.unique(model.tensors[i].name) for i in model.outputs}
        self.inputs = tuple(self._graph_input(model.tensors[i]) for i in model.inputs)

    # -- tensors ----------------------------------------------------------------------------

    def tensor(self, index: int) -> TfliteTensor:
        """The TFLite tensor ``index``."""
        return self.model.tensors[index]

    def unique(self, name: str) -> str:
        """``name``, or ``name_2``, ``name_3``... when it is taken."""
        candidate, n = name, 1
        while candidate in self._taken:
            n += 1
            candidate = f"{name}_{n}"
        self._taken.add(candidate)
        return candidate

    def _graph_input(self, t: TfliteTensor) -> TensorInfo:
        if t.dtype not in ("float32", *INTEGER_TYPES):
            raise UnsupportedError(f"graph input {t.name!r} has dtype {t.dtype}")
        name = self.unique(t.name)
        self._names[t.index] = name
        if t.quant is not None:
            self.overrides[name] = self.activation_override(t)
        if len(t.shape) == 4:
            self.layouts[name] = "nhwc"
        return TensorInfo(name, (BATCH, *t.shape[1:]) if t.shape else (), "float32")

    def activation_override(self, t: TfliteTensor) -> QuantOverride:
        """A per-tensor activation's quantization, zero point in the tensor's dtype."""
        q = t.quant
        if q is None or t.dtype not in INTEGER_TYPES:
            raise UnsupportedError(f"tensor {t.name!r} ({t.dtype}) is not quantized")
        if q.per_channel:
            raise UnsupportedError(
                f"activation {t.name!r} is quantized per axis ({q.scale.size} scales); quantemu "
                "takes per-tensor activation quantization"
            )
        return QuantOverride(
            scale=np.float32(q.scale[0]),
            zero_point=np.array(q.zero_point[0], dtype=t.dtype),
            source="tflite",
        )

    def value(self, index: int, layout: str | None = None) -> str:
        """The IR name of activation ``index``, in ``layout`` when it is rank 4 (a Transpose is
        inserted once and reused)."""
        if index < 0:
            return ""
        if index not in self._names:
            t = self.tensor(index)
            if t.data is None:
                raise InvalidInputError(
                    f"tensor {index} ({t.name!r}) is read before any operator writes it"
                )
            return self.constant(index)
        name = self._names[index]
        have = self.layouts.get(name)
        if layout is None or have is None or have == layout:
            return name
        key = (name, layout)
        if key not in self._converted:
            perm = NCHW_FROM_NHWC if layout == "nchw" else NHWC_FROM_NCHW
            out = self.unique(f"{name}/{layout}")
            self.nodes.append(
                Node(
                    self.unique(f"{name}/to_{layout}"), "Transpose", (name,), (out,), {"perm": perm}
                )
            )
            if name in self.overrides:
                self.overrides[out] = self.overrides[name]
            self.layouts[out] = layout
            self._converted[key] = out
        return self._converted[key]

    def is_activation(self, index: int) -> bool:
        """True when tensor ``index`` is a graph input or written by an earlier operator."""
        return index in self._names

    def layout_of(self, index: int) -> str | None:
        """The layout activation ``index`` has now (``None`` unless rank 4)."""
        return self.layouts.get(self._names.get(index, ""))

    def output(self, index: int, layout: str | None = None) -> str:
        """Declare TFLite tensor ``index`` as written by the node being built; its IR name."""
        t = self.tensor(index)
        if index in self._names:
            raise InvalidInputError(f"tensor {index} ({t.name!r}) is written twice")
        nchw_output = index in self._final and layout == "nchw" and len(t.shape) == 4
        if index in self._final and not nchw_output:
            name = self._final[index]
        else:
            name = self.unique(f"{t.name}/nchw" if nchw_output else t.name)
        self._names[index] = name
        if t.quant is not None and t.dtype in INTEGER_TYPES:
            self.overrides[name] = self.activation_override(t)
        if layout is not None and len(t.shape) == 4:
            self.layouts[name] = layout
        return name

    def constant(self, index: int, transform=None, axis_map=None) -> str:
        """A constant tensor as a float initializer with its exact integers in an override.

        ``transform`` rearranges the array (e.g. OHWI -> OIHW); ``axis_map`` gives the new
        position of the per-axis quantization axis.
        """
        t = self.tensor(index)
        if t.data is None:
            raise InvalidInputError(f"tensor {index} ({t.name!r}) is not a constant")
        values = transform(t.data) if transform else t.data
        name = self.unique(t.name)
        if t.quant is None or t.dtype not in INTEGER_TYPES:
            self.initializers[name] = np.asarray(values, np.float32)
            return name
        q = t.quant
        axis = q.axis if axis_map is None else axis_map.get(q.axis, q.axis)
        if q.per_channel:
            shape = [1] * values.ndim
            shape[axis] = -1
            scale = q.scale.astype(np.float32)
            zero = q.zero_point.astype(t.dtype)
            real = (values.astype(np.float64) - zero.reshape(shape)) * scale.reshape(shape)
        else:
            scale, zero, axis = np.float32(q.scale[0]), np.array(q.zero_point[0], t.dtype), None
            real = (values.astype(np.float64) - zero) * scale
        with np.errstate(over="ignore"):
            real = real.astype(np.float32)
        if not np.all(np.isfinite(real)):
            raise InvalidInputError(
                f"tensor {index} ({t.name!r}) dequantizes beyond float32 (scales up to "
                f"{np.max(q.scale)}); the file is corrupt, re-export the model"
            )
        self.initializers[name] = real
        self.overrides[name] = QuantOverride(scale, zero, axis, values, source="tflite")
        return name

    def raw_constant(self, index: int) -> str:
        """A parameter tensor of a compiled custom op, integers kept in ``values``.

        The float initializer holds the same integers (exact: they are int8 or int16), and the
        override is the identity quantization (scale 1, zero point 0) in the tensor's dtype. A
        tensor without data (an XC_ op's scratch buffer) is zeros. A float32 tensor (the exp
        table of XC_softmax) is its own initializer, without an override, as :meth:`constant`
        keeps an unquantized constant.
        """
        t = self.tensor(index)
        name = self.unique(t.name)
        data = t.data if t.data is not None else np.zeros(t.shape, t.dtype)
        if data.dtype == np.float32:
            self.initializers[name] = data.copy()
            return name
        if data.dtype.kind not in "iu" or data.dtype.itemsize > 2:
            raise UnsupportedError(f"parameter tensor {t.name!r} has dtype {data.dtype}")
        self.initializers[name] = data.astype(np.float32)
        zero = np.zeros((), data.dtype)
        self.overrides[name] = QuantOverride(np.float32(1.0), zero, None, data, source="tflite")
        return name

    def ints(self, index: int, what: str) -> tuple[int, ...]:
        """A constant integer tensor (shapes, axes, paddings) as a flat tuple."""
        t = self.tensor(index)
        if t.data is None or t.dtype not in ("int32", "int64"):
            raise UnsupportedError(f"{what} must be a constant int32 tensor, got {t.name!r}")
        return tuple(int(v) for v in t.data.reshape(-1))

    def add(self, op: TfliteOp, op_type: str, inputs, outputs, attrs=None, *, suffix="") -> Node:
        """Append one IR node for ``op`` (named after the operator and its index)."""
        base = f"{(op.custom_code or op.name).lower()}_{op.index}{suffix}"
        attrs = {**(attrs or {}), "tflite_op": op.custom_code or op.name}
        node = Node(self.unique(base), op_type, tuple(inputs), tuple(outputs), attrs)
        self.nodes.append(node)
        return node

    # -- driving ----------------------------------------------------------------------------

    def convert(self, op: TfliteOp) -> None:
        """Append the IR nodes of ``op``; errors name the operator and its position."""
        try:
            if op.name == "CUSTOM":
                convert_custom(self, op)
                return
            rule = BUILTINS.get(op.name)
            if rule is None:
                raise UnsupportedError(
                    f"{op.name} is not supported; supported TFLite operators: "
                    f"{', '.join(sorted(BUILTINS))} (and XMOS's compiled XC_ custom operators)"
                )
            rule(self, op)
        except QuantemuError as exc:
            raise type(exc)(f"{op}: {exc}") from None
        except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as exc:
            # A corrupt file can give an operator too few tensors or impossible shapes.
            raise InvalidInputError(
                f"{op}: the operator is malformed ({type(exc).__name__}: {exc}); re-export the "
                "model"
            ) from None

    def graph(self) -> Graph:
        """The finished graph; outputs are returned in NHWC, as the file has them."""
        for index, final in self._final.items():
            name = self._names.get(index)
            if name is None:
                raise InvalidInputError(f"graph output {final!r} is not written by any operator")
            if name != final:  # produced in NCHW: transpose back under the file's name
                self.nodes.append(
                    Node(
                        self.unique(f"{final}/to_nhwc"),
                        "Transpose",
                        (name,),
                        (final,),
                        {"perm": NHWC_FROM_NCHW},
                    )
                )
                if name in self.overrides:
                    self.overrides[final] = self.overrides[name]
        outputs = tuple(self._final.values())
        return Graph(
            name=self.model.name,
            inputs=self.inputs,
            outputs=outputs,
            nodes=tuple(self.nodes),
            initializers=self.initializers,
            quant_overrides=self.overrides,
            opset=13,
            metadata={
                "source_format": "tflite",
                "layout": "NHWC",
                NCHW_KEY: "\n".join(n for n, layout in self.layouts.items() if layout == "nchw"),
            },
        )
