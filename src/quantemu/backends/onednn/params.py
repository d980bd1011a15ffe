"""Frozen, validated parameters of the oneDNN int8 operators (DESIGN principle 5).

Every variant that changes a result is an enum field: the instruction set (:class:`Isa`), the
source data type, the kernel family that oneDNN picked (``impl``), the API. Strings are accepted
where an enum is expected and converted (``Isa("avx2")`` style), so the conformance attributes map
one to one. Construct from a mapping with :func:`from_mapping`, which rejects unknown keys.

The values follow the conformance page ``conformance/onednn.md`` (oneDNN 3.12.0).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import numbers
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np

from quantemu.errors import InvalidInputError

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


class DotProduct(enum.Enum):
    """How an ISA forms the u8·s8 dot product (page §1.1, §2)."""

    PAIR_SATURATING_S16 = "vpmaddubsw"  # VPMADDUBSW + VPMADDWD: adjacent pairs saturate to s16
    EXACT_VPDPBUSD = "vpdpbusd"  # VNNI: four products summed into s32 without rounding
    EXACT_AMX = "tdpbusd"  # AMX tiles: exact like VNNI (not covered by the vectors)


class Isa(enum.Enum):
    """The int8 code path, named like oneDNN's ``ONEDNN_MAX_CPU_ISA`` values (lower case)."""

    AVX2 = "avx2"
    AVX512_CORE = "avx512_core"
    AVX2_VNNI = "avx2_vnni"
    AVX512_CORE_VNNI = "avx512_core_vnni"
    AVX512_CORE_AMX = "avx512_core_amx"

    @property
    def dot_product(self) -> DotProduct:
        """The dot-product semantics of this ISA."""
        if self in (Isa.AVX2, Isa.AVX512_CORE):
            return DotProduct.PAIR_SATURATING_S16
        if self is Isa.AVX512_CORE_AMX:
            return DotProduct.EXACT_AMX
        return DotProduct.EXACT_VPDPBUSD

    @property
    def exact(self) -> bool:
        """True when u8·s8 dot products never saturate (VNNI, AMX)."""
        return self.dot_product is not DotProduct.PAIR_SATURATING_S16

    @property
    def avx512(self) -> bool:
        """True for the AVX-512 code paths (512-bit registers)."""
        return self.value.startswith("avx512")

    @property
    def env_value(self) -> str:
        """The ``ONEDNN_MAX_CPU_ISA`` value that caps oneDNN to this code path."""
        return self.value.upper()


class SrcType(enum.Enum):
    """Data type of the source (activation) operand."""

    U8 = "u8"
    S8 = "s8"


class DstType(enum.Enum):
    """Data type of a quantized destination."""

    S8 = "s8"
    U8 = "u8"

    @property
    def bounds(self) -> tuple[int, int]:
        """The saturation range of the type."""
        return (-128, 127) if self is DstType.S8 else (0, 255)


class MatmulApi(enum.Enum):
    """Entry point of a matmul (page §3)."""

    MATMUL = "matmul"  # the matmul primitive
    GEMM = "gemm"  # dnnl_gemm_s8s8s32 (torch._int_mm)


class ConvImpl(enum.Enum):
    """Convolution kernel family: it fixes the pairing order on non-VNNI ISAs (page §5.2)."""

    DIRECT = "direct"  # one segment per tap: channels paired inside a tap
    RELO_W = "relo_w"  # one segment per kernel row: for kw: for c
    RELO_WH = "relo_wh"  # one segment for the window, kw-major: for kw: for kh: for c
    GEMM = "gemm"  # gemm-based convolution, im2col order: for kh: for kw: for c
    REF = "ref"  # ref:any, exact


class QuantizedImpl(enum.Enum):
    """Kernel family of PyTorch's quantized linear/conv: it fixes the f32 order (page §6.2)."""

    JIT_UNI = "jit_uni"  # gemm:jit / jit_uni_int8: v = a * (S * W)
    JIT_AVX512 = "jit_avx512"  # jit_int8:avx512_core*: v = (a * S) * W
    BRGEMM = "brgemm"  # brg_matmul / brg_conv_fwd / brgconv_1x1 / brdgmm_dw: v = (a * S) * W
    REF = "ref"  # ref:any: v = (a * S) * W, then a true division by the output scale


class PoolImpl(enum.Enum):
    """Average-pooling kernel family (page §7)."""

    JIT = "jit"  # jit_int: multiply by the f32 reciprocal of the count
    REF = "ref"  # ref:any: true division by the count


E = TypeVar("E", bound=enum.Enum)


def as_enum(cls: type[E], value: Any, where: str) -> E:
    """``value`` as a member of ``cls`` (a member or its string value), else InvalidInputError."""
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in cls)
        raise InvalidInputError(f"{where} = {value!r} is not one of {choices}") from None


def as_int(value: Any, where: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    """``value`` as a Python int in ``[lo, hi]`` (bools are rejected), else InvalidInputError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidInputError(f"{where} = {value!r} must be an integer")
    if not lo <= int(value) <= hi:
        raise InvalidInputError(f"{where} = {value} is outside [{lo}, {hi}]")
    return int(value)


def as_int_tuple(value: Any, n: int, where: str, lo: int, hi: int = 2**20) -> tuple[int, ...]:
    """A length-``n`` sequence of ints in ``[lo, hi]`` as a tuple."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != n:
        raise InvalidInputError(f"{where} = {value!r} must be a list of {n} integers")
    return tuple(as_int(v, f"{where}[{i}]", lo, hi) for i, v in enumerate(value))


def as_binary32(value: Any, where: str) -> float:
    """A finite, positive scale that is exactly a binary32 value, as a Python float.

    The page pins the f32 arithmetic down for binary32 scales only ("scales that are not binary32
    values" are not covered), so any other value is refused rather than silently rounded.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidInputError(f"{where} = {value!r} must be a number")
    v = float(value)
    if not math.isfinite(v) or v <= 0.0:
        raise InvalidInputError(f"{where} = {v!r} must be a finite positive scale")
    f = np.float32(v)
    if float(f) != v or not np.isfinite(f) or f == 0:
        raise InvalidInputError(
            f"{where} = {v!r} is not a binary32 value (nearest: {float(f)!r}); oneDNN keeps "
            "scales in f32: round it first with numpy.float32"
        )
    return v


def _set(obj: object, name: str, value: Any) -> None:
    # Frozen dataclasses normalise their own fields in __post_init__ through object.__setattr__.
    object.__setattr__(obj, name, value)


def _check_type(value: Any, cls: type, where: str) -> None:
    if not isinstance(value, cls):
        raise InvalidInputError(f"{where} must be a {cls.__name__}, got {type(value).__name__}")


def check_fields(obj: object, op: str, **kinds: type) -> None:
    """Each field ``name=cls`` of the frozen dataclass ``obj``: an enum field becomes its member
    (given the member or its value, :func:`as_enum`), any other must be a ``cls``; errors name
    ``"{op} {name}"``."""
    for name, cls in kinds.items():
        value, where = getattr(obj, name), f"{op} {name}"
        if issubclass(cls, enum.Enum):
            _set(obj, name, as_enum(cls, value, where))
        else:
            _check_type(value, cls, where)


def describe_operand(x: object) -> str:
    """What an operand is, for error messages: an array's dtype and shape, else its type name."""
    if isinstance(x, np.ndarray):
        return f"{x.dtype.name} array of shape {x.shape}"
    return type(x).__name__


def check_operand(
    x: object, what: str, dtypes, ndim: int, layout: str = "", *, note: str = "", remedy: str = ""
) -> None:
    """Refuse ``x`` unless it is an ``ndim``-D array of one of ``dtypes`` (one or a tuple), with
    ``InvalidInputError``: ``{what} must be a {ndim}-D [{layout} ]{dtype} array{note}, got
    {dtype and shape, or type}{remedy}``."""
    dtypes = tuple(np.dtype(d) for d in (dtypes if isinstance(dtypes, tuple) else (dtypes,)))
    if not isinstance(x, np.ndarray) or x.dtype not in dtypes or x.ndim != ndim:
        kind = " ".join(filter(None, (f"{ndim}-D", layout, "/".join(d.name for d in dtypes))))
        raise InvalidInputError(
            f"{what} must be a {kind} array{note}, got {describe_operand(x)}{remedy}"
        )


@dataclasses.dataclass(frozen=True)
class MatmulParams:
    """``matmul`` (page §3): raw s32 accumulators of A(M,K) · B(K,N)."""

    isa: Isa
    src_dt: SrcType
    api: MatmulApi = MatmulApi.MATMUL
    src_zero_point: int = 0

    def __post_init__(self) -> None:
        check_fields(self, "matmul", isa=Isa, src_dt=SrcType, api=MatmulApi)
        _set(self, "src_zero_point", as_int(self.src_zero_point, "matmul src_zero_point"))


@dataclasses.dataclass(frozen=True)
class ConvGeometry:
    """Strides, pads ``[top, left, bottom, right]``, dilations (1 = dense) and groups (§4)."""

    strides: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilations: tuple[int, int] = (1, 1)
    groups: int = 1

    def __post_init__(self) -> None:
        _set(self, "strides", as_int_tuple(self.strides, 2, "strides", 1))
        _set(self, "pads", as_int_tuple(self.pads, 4, "pads", 0))
        _set(self, "dilations", as_int_tuple(self.dilations, 2, "dilations", 1))
        _set(self, "groups", as_int(self.groups, "groups", 1, 2**20))

    def output_size(self, h: int, w: int, kh: int, kw: int) -> tuple[int, int]:
        """``(OH, OW)`` of §4; InvalidInputError when the window does not fit."""
        top, left, bottom, right = self.pads
        eh = (kh - 1) * self.dilations[0] + 1
        ew = (kw - 1) * self.dilations[1] + 1
        if h + top + bottom < eh or w + left + right < ew:
            raise InvalidInputError(
                f"window {eh}x{ew} (kernel {kh}x{kw}, dilations {self.dilations}) does not fit "
                f"the padded input {h + top + bottom}x{w + left + right} (input {h}x{w}, pads "
                f"{self.pads}); use a smaller kernel or more padding"
            )
        oh = (h + top + bottom - eh) // self.strides[0] + 1
        ow = (w + left + right - ew) // self.strides[1] + 1
        return oh, ow


@dataclasses.dataclass(frozen=True)
class Conv2dParams:
    """``conv2d`` (page §5): raw s32 accumulators of an int8 convolution."""

    isa: Isa
    src_dt: SrcType
    impl: ConvImpl
    geometry: ConvGeometry = ConvGeometry()
    src_zero_point: int = 0

    def __post_init__(self) -> None:
        check_fields(self, "conv2d", isa=Isa, src_dt=SrcType, impl=ConvImpl, geometry=ConvGeometry)
        _set(self, "src_zero_point", as_int(self.src_zero_point, "conv2d src_zero_point"))


@dataclasses.dataclass(frozen=True)
class Requantization:
    """PyTorch's u8 -> u8 quantization parameters of a quantized linear/conv (page §6).

    Scales are binary32 values; ``w_scales`` holds one scale (per tensor) or one per output
    channel. Weights are symmetric (zero point 0).
    """

    x_scale: float
    x_zero_point: int
    w_scales: tuple[float, ...]
    y_scale: float
    y_zero_point: int

    def __post_init__(self) -> None:
        _set(self, "x_scale", as_binary32(self.x_scale, "x_scale"))
        _set(self, "y_scale", as_binary32(self.y_scale, "y_scale"))
        _set(self, "x_zero_point", as_int(self.x_zero_point, "x_zero_point", 0, 255))
        _set(self, "y_zero_point", as_int(self.y_zero_point, "y_zero_point", 0, 255))
        scales = self.w_scales
        if isinstance(scales, numbers.Real):
            scales = (scales,)
        if isinstance(scales, (str, bytes)) or not hasattr(scales, "__len__") or not scales:
            raise InvalidInputError(f"w_scales = {scales!r} must be a non-empty list of scales")
        _set(self, "w_scales", _binary32_tuple(scales))


def _binary32_tuple(scales) -> tuple[float, ...]:
    """``scales`` as a tuple of binary32 values; one vectorised check when all are floats."""
    if all(type(s) is float for s in scales):
        v = np.array(scales, dtype=np.float64)
        f = v.astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            ok = np.isfinite(v) & (v > 0) & (f.astype(np.float64) == v) & (f != 0)
        if ok.all():
            return tuple(scales)
    return tuple(as_binary32(s, f"w_scales[{i}]") for i, s in enumerate(scales))


@dataclasses.dataclass(frozen=True)
class QuantizedLinearParams:
    """``quantized_linear`` (page §6): PyTorch ``quantized::linear`` on the onednn engine."""

    isa: Isa
    impl: QuantizedImpl
    quant: Requantization

    def __post_init__(self) -> None:
        check_fields(self, "quantized_linear", isa=Isa, impl=QuantizedImpl, quant=Requantization)
        if self.impl in (QuantizedImpl.JIT_AVX512, QuantizedImpl.REF):
            raise InvalidInputError(
                f"quantized_linear impl = {self.impl.value!r}: PyTorch's linear runs gemm:jit "
                "('jit_uni') or brg_matmul ('brgemm') only"
            )


@dataclasses.dataclass(frozen=True)
class QuantizedConv2dParams:
    """``quantized_conv2d`` (page §6): PyTorch ``quantized::conv2d`` on the onednn engine."""

    isa: Isa
    impl: QuantizedImpl
    quant: Requantization
    geometry: ConvGeometry = ConvGeometry()

    def __post_init__(self) -> None:
        check_fields(
            self,
            "quantized_conv2d",
            isa=Isa,
            impl=QuantizedImpl,
            quant=Requantization,
            geometry=ConvGeometry,
        )


class _PoolWindow:
    """What both pooling parameter sets hold besides their own fields: ``isa``, ``kernel``,
    ``strides`` and ``pads`` (checked by :meth:`_check_window`), and the window's geometry."""

    isa: Isa
    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]

    def _check_window(self, op: str) -> None:
        check_fields(self, op, isa=Isa)
        _set(self, "kernel", as_int_tuple(self.kernel, 2, f"{op} kernel", 1))
        _set(self, "strides", as_int_tuple(self.strides, 2, f"{op} strides", 1))
        _set(self, "pads", as_int_tuple(self.pads, 4, f"{op} pads", 0))

    @property
    def geometry(self) -> ConvGeometry:
        """The window geometry as a dense, ungrouped convolution geometry."""
        return ConvGeometry(self.strides, self.pads)


@dataclasses.dataclass(frozen=True)
class AvgPool2dParams(_PoolWindow):
    """``avg_pool2d`` (page §7). ``isa`` has no effect on the value."""

    isa: Isa
    kernel: tuple[int, int]
    exclude_padding: bool
    impl: PoolImpl
    strides: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)

    def __post_init__(self) -> None:
        self._check_window("avg_pool2d")
        check_fields(self, "avg_pool2d", impl=PoolImpl)
        if not isinstance(self.exclude_padding, (bool, np.bool_)):
            raise InvalidInputError(
                f"avg_pool2d exclude_padding = {self.exclude_padding!r} must be true or false"
            )
        _set(self, "exclude_padding", bool(self.exclude_padding))


@dataclasses.dataclass(frozen=True)
class MaxPool2dParams(_PoolWindow):
    """``max_pool2d`` (page §7). ``isa`` has no effect on the value."""

    isa: Isa
    kernel: tuple[int, int]
    strides: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)

    def __post_init__(self) -> None:
        self._check_window("max_pool2d")


@dataclasses.dataclass(frozen=True)
class ReorderParams:
    """``reorder`` (page §8): f32 -> s8/u8 with runtime scales; 1.0 means no scale attached."""

    isa: Isa
    dst_dt: DstType
    src_scale: float = 1.0
    dst_scale: float = 1.0

    def __post_init__(self) -> None:
        check_fields(self, "reorder", isa=Isa, dst_dt=DstType)
        _set(self, "src_scale", as_binary32(self.src_scale, "reorder src_scale"))
        _set(self, "dst_scale", as_binary32(self.dst_scale, "reorder dst_scale"))


P = TypeVar("P")


def from_mapping(cls: type[P], values: Mapping[str, Any], where: str) -> P:
    """``cls(**values)`` after checking that every key is a field of ``cls``."""
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - fields)
    if unknown:
        raise InvalidInputError(
            f"{where}: unknown parameter(s) {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(sorted(fields))}"
        )
    required = {
        f.name
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    missing = sorted(required - set(values))
    if missing:
        raise InvalidInputError(f"{where}: missing parameter(s) {', '.join(map(repr, missing))}")
    return cls(**values)
