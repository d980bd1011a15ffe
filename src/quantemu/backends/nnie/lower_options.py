"""Options of NNIE lowering: a frozen, validated :class:`Options` with enum variants."""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
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


_ENUMS: dict[str, type[enum.Enum]] = {
    "clip_selection": ClipSelection,
    "grouped_conv": GroupedConv,
    "layer_inputs": LayerInputs,
    "quant_overrides": QuantOverrides,
}


@dataclass(frozen=True)
class Options(LoweringOptions):
    """NNIE lowering options (every one changes results and appears in the report header).

    >>> Options.from_mapping({"grouped_conv": "log"}).grouped_conv
    <GroupedConv.LOG: 'log'>
    """

    backend: ClassVar[str] = "nnie"

    clip_selection: ClipSelection = ClipSelection.MAX_ABS
    grouped_conv: GroupedConv = GroupedConv.FLOAT
    layer_inputs: LayerInputs = LayerInputs.PER_TENSOR
    quant_overrides: QuantOverrides = QuantOverrides.ERROR

    def __post_init__(self) -> None:
        for item in fields(self):
            object.__setattr__(self, item.name, _parse(item.name, getattr(self, item.name)))

    def header(self) -> dict[str, str]:
        """Each option and its value, for the report header."""
        return {item.name: getattr(self, item.name).value for item in fields(self)}


def describe_choices() -> str:
    """``clip_selection (max_abs), grouped_conv (float, log), ...``: every option's choices."""
    return ", ".join(
        f"{name} ({', '.join(member.value for member in kind)})" for name, kind in _ENUMS.items()
    )


def _parse(name: str, value: Any) -> enum.Enum:
    kind = _ENUMS[name]
    if isinstance(value, kind):
        return value
    for member in kind:
        if value == member.value:
            return member
    choices = ", ".join(member.value for member in kind)
    extra = ""
    if name == "clip_selection" and value == "mse":
        extra = (
            "; 'mse' needs the calibration tensors themselves (select_clip_mse), which "
            "lowering does not receive: only the calibrated (min, max) ranges"
        )
    raise InvalidInputError(f"nnie: option {name}={value!r} is not one of {choices}{extra}")
