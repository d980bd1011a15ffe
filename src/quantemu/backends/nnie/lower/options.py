"""Options of NNIE lowering: a frozen, validated :class:`Options` with enum variants."""

from __future__ import annotations

import enum
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from quantemu.errors import InvalidInputError
from quantemu.program.options import LoweringOptions


class ClipSelection(enum.Enum):
    """How activation clips are chosen from calibration.

    ``max_abs``: MQBench's NNIE observer, ``max(|min|, |max|)`` of the calibrated range, snapped
    to the gfpq table. (An MSE search, :func:`~quantemu.backends.nnie.quantize.select_clip_mse`,
    needs the calibration tensors themselves, which lowering does not receive.)
    """

    MAX_ABS = "max_abs"


class GroupedConv(enum.Enum):
    """Grouped (e.g. depthwise) Conv/ConvTranspose.

    ``float`` (default): MQBench's NNIE deploy flow exports no clip for grouped convolution, so
    it runs as a float fallback (float32 weights, float32 arithmetic, output log-quantized).
    ``log``: quantize it like a dense convolution (weights log-coded with their max-abs clip).
    """

    FLOAT = "float"
    LOG = "log"


class LayerInputs(enum.Enum):
    """Clips of a layer with several activation inputs (Add, Sub, Concat, MatMul).

    ``per_tensor`` (default): each input keeps its own tensor's clip, as MQBench simulates and
    exports (one clip per input in ``gfpq_param_dict``). ``shared``: all inputs are
    re-quantized to one clip, the largest of theirs (seed 003: "the inputs of the same layer
    share the same z_a").
    """

    PER_TENSOR = "per_tensor"
    SHARED = "shared"


class QuantOverrides(enum.Enum):
    """What to do with a QDQ model's linear scales (``graph.quant_overrides``).

    ``error`` (default): NNIE's logarithmic grid cannot represent them, so lowering refuses.
    ``range``: use each override's representable range as the tensor's NNIE clip.
    """

    ERROR = "error"
    RANGE = "range"


# The one value users ask for that lowering cannot offer; its error says why.
MSE_HINT = (
    "'mse' needs the calibration tensors themselves (select_clip_mse), which lowering does not "
    "receive: only the calibrated (min, max) ranges"
)


@dataclass(frozen=True)
class Options(LoweringOptions):
    """NNIE lowering options (every one changes results and appears in the report header).

    Built from a mapping by :meth:`from_mapping` (values or their text); constructed directly,
    each field also takes its enum's value, which ``__post_init__`` turns into the member.

    >>> Options.from_mapping({"grouped_conv": "log"}).grouped_conv
    <GroupedConv.LOG: 'log'>
    """

    backend: ClassVar[str] = "nnie"

    clip_selection: ClipSelection = ClipSelection.MAX_ABS
    grouped_conv: GroupedConv = GroupedConv.FLOAT
    layer_inputs: LayerInputs = LayerInputs.PER_TENSOR
    quant_overrides: QuantOverrides = QuantOverrides.ERROR

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for name in self.field_names():
            object.__setattr__(self, name, _member(name, hints[name], getattr(self, name)))

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any] | None = None) -> Options:
        """:meth:`LoweringOptions.from_mapping`, with the reason ``clip_selection='mse'`` is
        refused added to its error."""
        try:
            return super().from_mapping(options)
        except InvalidInputError as exc:
            if dict(options or {}).get("clip_selection") == "mse" and MSE_HINT not in str(exc):
                raise InvalidInputError(f"{exc}; {MSE_HINT}") from None
            raise


def _member(name: str, kind: type[enum.Enum], value: Any) -> enum.Enum:
    if isinstance(value, kind):
        return value
    for member in kind:
        if value == member.value:
            return member
    choices = ", ".join(repr(member.value) for member in kind)
    hint = f"; {MSE_HINT}" if name == "clip_selection" and value == "mse" else ""
    raise InvalidInputError(f"nnie option {name} = {value!r}; choose one of {choices}{hint}")
