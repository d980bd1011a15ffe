"""Reading the XC_ custom ops of a model compiled by xcore-opt 1.4.2 (``*.xcore.tflite``).

:func:`xc_op_params` turns one operator of a parsed ``tflite.Model`` into a frozen dataclass:
the decoded custom options (a flexbuffer map whose string values are raw lib_nn C structs) and
parameter tensors. For XC_conv2d_v2 that is the output transform (kind, int16 mul/bias/shift,
``final_shr``), the kernel type, the window geometry, and the ORIGINAL weights recovered from
the reordered weight tensor (``MatMulBase::reorder_kernel_weights`` /
``MatMulDirectFn_DW::reorder_kernel_weights``), so the model can be simulated as compiled.
"""

from __future__ import annotations

import dataclasses
import enum
import struct

import numpy as np
from flatbuffers import flexbuffers

from quantemu.backends.xs3.xformer.output_transform import OtKind
from quantemu.errors import InvalidInputError, UnsupportedError

_EPV = 16  # int16 lanes of a VPU vector: output channels per group
_VREG = 32  # bytes of a VPU vector


class KernelType(enum.Enum):
    """Custom option ``k`` of XC_conv2d_v2 (``Conv2DType`` in ``IR/XCoreOps.td``)."""

    VALID_DIRECT = 0
    VALID_INDIRECT = 1
    PADDED_INDIRECT = 2
    DEPTHWISE_VALID_DIRECT = 3
    DEPTHWISE_PADDED_INDIRECT = 4

    @property
    def depthwise(self) -> bool:
        return self in {KernelType.DEPTHWISE_VALID_DIRECT, KernelType.DEPTHWISE_PADDED_INDIRECT}


@dataclasses.dataclass(frozen=True)
class XcConv2dV2:
    """One XC_conv2d_v2. ``weights``: OHWI ``(C_out, kh, kw, C_in)`` for a conv, ``(1, kh, kw,
    C)`` for a depthwise (channels as compiled, padding channels included). ``shift``: the
    VLSAT shift per channel (``initial_shr`` repeated for GROUP). ``padding`` is
    (top, left, bottom, right) with ``pad_value`` (only the Padded kernels pad)."""

    kernel_type: KernelType
    ot_kind: OtKind
    out_channels: int
    mul: np.ndarray
    bias: np.ndarray
    shift: np.ndarray
    initial_shr: int
    final_shr: int
    weights: np.ndarray
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int, int, int]
    pad_value: int
    input_tensor: int | str  # a tensor index of the file, or an IR name
    output_tensor: int | str
    input_shape: tuple[int, ...]

    def rows(self) -> np.ndarray:
        """The weights as the solver's ``(C_out, K)`` rows."""
        if self.kernel_type.depthwise:
            return np.ascontiguousarray(self.weights.reshape(-1, self.weights.shape[-1]).T)
        return self.weights.reshape(self.weights.shape[0], -1)


@dataclasses.dataclass(frozen=True)
class XcPad:
    """XC_pad on the tensor merged to ``rank <= 2`` byte rows: ``start`` fill bytes, then each
    of ``copies + 1`` input rows of ``size`` bytes separated by ``pad_size`` fill bytes, then
    ``end`` fill bytes. ``value`` is the fill byte (the input zero point; -128 before maxpool)."""

    start: int
    pad_size: int
    size: int
    copies: int
    end: int
    value: int
    input_tensor: int | str  # a tensor index of the file, or an IR name
    output_tensor: int | str

    def apply(self, x: np.ndarray) -> np.ndarray:
        """Pad the int8 tensor ``x`` (any shape, read as bytes); returns a flat int8 array."""
        flat = np.ascontiguousarray(x).view(np.int8).reshape(-1)
        rows = self.copies + 1
        if flat.size != rows * self.size:
            raise InvalidInputError(f"XC_pad expects {rows * self.size} bytes, got {flat.size}")
        step = self.size + self.pad_size
        total = self.start + rows * self.size + (rows - 1) * self.pad_size + self.end
        out = np.full(total, self.value, np.int8)
        idx = self.start + (np.arange(rows)[:, None] * step + np.arange(self.size)).reshape(-1)
        out[idx] = flat
        return out


@dataclasses.dataclass(frozen=True)
class XcGeneric:
    """Any other XC_ op: its name, decoded options and tensor indices (constants included in
    ``constants``: tensor index to array). XC_lookup's table is ``constants[inputs[1]]``."""

    name: str
    options: dict
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    constants: dict


def decode_options(raw: bytes) -> dict:
    """A flexbuffer map of custom options; string values stay ``bytes`` (packed C structs)."""

    def dec(ref):
        if ref.IsMap:
            mp = ref.AsMap
            return {k.AsKey: dec(v) for k, v in zip(mp.Keys, mp.Values, strict=True)}
        if ref.IsString:
            return bytes(ref.AsStringBytes)
        if ref.IsBlob:
            return bytes(ref.AsBlob)
        if ref.IsVector or ref.IsTypedVector:
            vec = ref.AsVector if ref.IsVector else ref.AsTypedVector
            return [dec(vec[i]) for i in range(len(vec))]
        if ref.IsBool:
            return ref.AsBool
        if ref.IsInt:
            return ref.AsInt
        if ref.IsFloat:
            return ref.AsFloat
        return ref.Value

    if not raw:
        return {}
    try:
        return dec(flexbuffers.GetRoot(bytes(raw)))
    except (IndexError, ValueError, TypeError, KeyError, AssertionError, struct.error) as exc:
        raise InvalidInputError(
            f"custom options ({len(raw)} bytes) are not a valid flexbuffer ({type(exc).__name__}: "
            f"{exc}); the compiled model is corrupt: compile it again with xcore-opt"
        ) from None


def _ints(blob: bytes, fmt: str) -> tuple:
    need = struct.calcsize("<" + fmt)
    if len(blob) < need:
        raise UnsupportedError(f"option struct has {len(blob)} bytes, expected >= {need}")
    return struct.unpack_from("<" + fmt, blob)


def _tensor_data(model, sg, t: int) -> np.ndarray | None:
    if t < 0:
        return None
    tensor = sg.Tensors(t)
    buf = model.Buffers(tensor.Buffer())
    if buf is None or buf.DataLength() == 0:
        if buf is not None and buf.Offset():
            raise UnsupportedError(f"tensor {t} keeps its data outside the flatbuffer (offset)")
        return None
    dtype = {0: np.float32, 1: np.float16, 2: np.int32, 7: np.int16, 9: np.int8, 3: np.uint8}
    if tensor.Type() not in dtype:
        raise UnsupportedError(f"tensor {t} has TFLite type {tensor.Type()}, not decoded here")
    return buf.DataAsNumpy().view(dtype[tensor.Type()]).copy()


def _shape(sg, t: int) -> tuple[int, ...]:
    return tuple(int(v) for v in sg.Tensors(t).ShapeAsNumpy())


def unpack_ot(data: np.ndarray, c_out: int, channelwise: bool):
    """``(shift, mul, bias)`` from the serialised int16 tensor: per 16-channel group of ``n``
    channels, ``[n shift]`` (channelwise only), ``[n mul]``, ``[n bias]``, back to back."""
    blocks = 3 if channelwise else 2
    g = np.arange(c_out) // _EPV
    n = np.minimum(c_out - g * _EPV, _EPV)
    base = g * _EPV * blocks + np.arange(c_out) % _EPV
    if data.size < int((base + n * (blocks - 1)).max(initial=0)) + 1:
        raise UnsupportedError(f"OT tensor of {data.size} int16 too short for {c_out} channels")
    parts = [data[base + n * i].astype(np.int16) for i in range(blocks)]
    return (parts[0], parts[1], parts[2]) if channelwise else (None, parts[0], parts[1])


def _ungroup(block: np.ndarray, n: int, k: int) -> np.ndarray:
    """Rows of one output-channel group from its reordered bytes (32-byte chunks, channels
    reversed within the group); ``block`` may hold several groups of ``n`` on axis 0."""
    full = k // _VREG
    tail = k - full * _VREG
    g = block.shape[0]
    head = block[:, : full * n * _VREG].reshape(g, full, n, _VREG).transpose(0, 2, 1, 3)
    rest = block[:, full * n * _VREG : full * n * _VREG + tail * n].reshape(g, n, tail)
    rows = np.concatenate([head.reshape(g, n, full * _VREG), rest], axis=2)
    return rows[:, ::-1, :].reshape(-1, k)


def recover_conv_weights(data: np.ndarray, c_out: int, k: int) -> np.ndarray:
    """Inverse of ``MatMulBase::reorder_kernel_weights`` (int8): ``(c_out, k)`` rows."""
    n_full, rem = divmod(c_out, _EPV)
    need = c_out * k
    if data.size < need:
        raise UnsupportedError(f"weight tensor has {data.size} bytes, need {need}")
    parts = []
    if n_full:
        parts.append(_ungroup(data[: n_full * _EPV * k].reshape(n_full, -1), _EPV, k))
    if rem:
        parts.append(_ungroup(data[n_full * _EPV * k : need].reshape(1, -1), rem, k))
    return np.concatenate(parts, axis=0)


def recover_depthwise_weights(data: np.ndarray, c: int, taps: int) -> np.ndarray:
    """Inverse of ``MatMulDirectFn_DW::reorder_kernel_weights``: ``(taps, c)`` (HW x C)."""
    groups = -(-c // _EPV)
    if data.size < groups * taps * _EPV:
        raise UnsupportedError(f"depthwise weight tensor has {data.size} bytes, too few")
    blk = data[: groups * taps * _EPV].reshape(groups, taps, _EPV).transpose(1, 0, 2)
    return blk.reshape(taps, groups * _EPV)[:, :c]


def _valid_window(kt: KernelType, mp: bytes, agg: bytes):
    """``(kh, kw, k_bytes, h_step, v_step)`` of an unpadded kernel; the steps are what the
    structs store for one dilated tap to the right and down (see ``_geometry``)."""
    if kt is KernelType.VALID_INDIRECT:
        f = _ints(mp, "8i")
        kh, kw = f[2] + 1, f[3] + 1
        return kh, kw, _ints(agg, "2i")[1], f[6] + (f[4] + 1) * _VREG, f[7]
    if kt is KernelType.VALID_DIRECT:
        f = _ints(agg, "6i")
        kh, kw = f[1] + 1, f[2] + 1
        k_bytes = f[0] // _EPV
        return kh, kw, k_bytes, f[4] + k_bytes // (kh * kw), f[5]
    f = _ints(agg, "5i")  # depthwise valid direct
    return f[1] + 1, f[2] + 1, (f[1] + 1) * (f[2] + 1), f[3], f[4]


def _geometry(kt: KernelType, mp: bytes, agg: bytes, x_shape, y_shape):
    """``(x_shape, kh, kw, stride, dilation, padding, pad_value, k_bytes)`` from the memcpy
    (``mp``) and aggregate (``a``) structs. ``x_shape`` is the NHWC input as the kernel sees
    it: an FC's input, aliased through XC_no_op reshapes, is viewed as ``(1, 1, 1, C_in)``."""
    if kt in {KernelType.PADDED_INDIRECT, KernelType.DEPTHWISE_PADDED_INDIRECT}:
        f = _ints(mp, "16i")
        kh, kw, dil = f[0], f[2], (f[7], f[5])
        stride, top, left, pv = (f[14], f[15]), f[13], f[12], f[9]
        bottom = (y_shape[1] - 1) * stride[0] + (kh - 1) * dil[0] + 1 - x_shape[1] - top
        right = (y_shape[2] - 1) * stride[1] + (kw - 1) * dil[1] + 1 - x_shape[2] - left
        pads = (top, left, max(bottom, 0), max(right, 0))
        k_bytes = kh * kw * (x_shape[3] if kt is KernelType.PADDED_INDIRECT else 1)
        return x_shape, kh, kw, stride, dil, pads, ((pv & 0xFF) ^ 0x80) - 0x80, k_bytes
    kh, kw, k_bytes, h_step, v_step = _valid_window(kt, mp, agg)
    c_in = x_shape[3] if kt.depthwise else k_bytes // (kh * kw)
    if x_shape[3] != c_in:
        if int(np.prod(x_shape)) != c_in or kh * kw != 1:
            raise UnsupportedError(f"conv input {x_shape} does not match C_in={c_in}")
        x_shape = (1, 1, 1, c_in)
    bph, bpp = _ints(mp, "2i")
    w_in = x_shape[2]
    stride = (max(bph // (w_in * c_in), 1), max(bpp // c_in, 1))
    dw = max(h_step // c_in, 1)
    dh = max((v_step + kw * c_in * dw) // (c_in * w_in), 1)
    return x_shape, kh, kw, stride, (dh, dw), (0, 0, 0, 0), 0, k_bytes


def conv2d_v2_params(opts: dict, x_shape, y_shape, weights, ot_data, *, tensors=(-1, -1)):
    """:class:`XcConv2dV2` from decoded options, the input/output shapes (NHWC, the batch
    dimension ignored), the raw int8 weight tensor and the int16 OT tensor as stored.

    ``tensors`` are the input and output tensor ids to record (indices or IR names).
    """
    try:
        kt = KernelType(int(opts["k"]))
        kind = OtKind(int(opts["t"]))
        mp, agg, ot = opts["mp"], opts["a"], opts["o"]
    except (KeyError, ValueError) as exc:
        raise UnsupportedError(f"XC_conv2d_v2 options {sorted(opts)} not decodable: {exc}") from exc
    x_shape, y_shape = (1, *x_shape[1:]), (1, *y_shape[1:])
    cw = kind is OtKind.CHANNELWISE
    c_out, *shifts = _ints(ot, "ih" if cw else "ihh")
    final_shr = shifts[-1]
    shift, mul, bias = unpack_ot(np.asarray(ot_data).view(np.int16).reshape(-1), c_out, cw)
    initial = int(shift[0]) if cw else shifts[0]
    if not cw:
        shift = np.full(c_out, initial, np.int16)
    x_shape, kh, kw, stride, dil, pads, pv, k_bytes = _geometry(kt, mp, agg, x_shape, y_shape)
    raw = np.asarray(weights).view(np.int8).reshape(-1)
    if kt.depthwise:
        w = recover_depthwise_weights(raw, c_out, kh * kw).reshape(1, kh, kw, c_out)
    else:
        w = recover_conv_weights(raw, c_out, k_bytes).reshape(c_out, kh, kw, -1)
    return XcConv2dV2(
        kt, kind, c_out, mul, bias, shift, initial, final_shr, w,
        (kh, kw), stride, dil, pads, pv, tensors[0], tensors[1], x_shape,
    )  # fmt: skip


def pool_window(opts: dict, x_shape, y_shape):
    """``(kernel, stride)`` of an XC_maxpool2d: its ``mp``/``a`` structs are a depthwise valid
    direct kernel's (``DerefInputFn``, ``MatMulDirectFn_DW``)."""
    try:
        mp, agg = opts["mp"], opts["a"]
    except KeyError as exc:
        raise UnsupportedError(f"XC_maxpool2d options {sorted(opts)} lack {exc}") from exc
    x_shape, y_shape = (1, *x_shape[1:]), (1, *y_shape[1:])
    _, kh, kw, stride, dil, *_ = _geometry(
        KernelType.DEPTHWISE_VALID_DIRECT, mp, agg, x_shape, y_shape
    )
    if dil != (1, 1):
        raise UnsupportedError(f"XC_maxpool2d with window steps {dil} (dilation) is not decoded")
    return (kh, kw), stride


def pad_params(opts: dict, tensors=(-1, -1)) -> XcPad:
    """:class:`XcPad` from XC_pad's decoded options (byte counts; ``z``'s low byte fills)."""
    fill = ((int(opts.get("z", 0)) & 0xFF) ^ 0x80) - 0x80  # the low byte, signed
    vals = [int(opts.get(k, 0)) for k in ("s", "p", "l", "n", "e")]
    return XcPad(*vals, fill, tensors[0], tensors[1])


def _conv2d_v2(model, sg, op, opts: dict) -> XcConv2dV2:
    ins = [op.Inputs(j) for j in range(op.InputsLength())]
    x_shape, y_shape = _shape(sg, ins[0]), _shape(sg, op.Outputs(0))
    weights, ot_data = _tensor_data(model, sg, ins[1]), _tensor_data(model, sg, ins[2])
    return conv2d_v2_params(
        opts, x_shape, y_shape, weights, ot_data, tensors=(ins[0], op.Outputs(0))
    )


def xc_op_params(model, op_index: int, subgraph: int = 0):
    """The parameters of operator ``op_index`` of a parsed ``tflite.Model`` compiled by
    xcore-opt: :class:`XcConv2dV2`, :class:`XcPad`, or :class:`XcGeneric` for other XC_ ops.

    Raises UnsupportedError for builtin (non-custom) operators and undecodable options.
    """
    sg = model.Subgraphs(subgraph)
    if not 0 <= op_index < sg.OperatorsLength():
        raise InvalidInputError(f"op_index {op_index} outside [0, {sg.OperatorsLength()})")
    op = sg.Operators(op_index)
    code = model.OperatorCodes(op.OpcodeIndex())
    name = (code.CustomCode() or b"").decode()
    if not name.startswith("XC_"):
        raise UnsupportedError(f"op {op_index} is not an XC_ custom op (builtin or {name!r})")
    raw = op.CustomOptionsAsNumpy().tobytes() if op.CustomOptionsLength() else b""
    opts = decode_options(raw)
    if name == "XC_conv2d_v2":
        return _conv2d_v2(model, sg, op, opts)
    ins = tuple(op.Inputs(j) for j in range(op.InputsLength()))
    outs = tuple(op.Outputs(j) for j in range(op.OutputsLength()))
    if name == "XC_pad":
        return pad_params(opts, (ins[0], outs[0]))
    consts = {t: d for t in ins if (d := _tensor_data(model, sg, t)) is not None}
    return XcGeneric(name, opts, ins, outs, consts)
