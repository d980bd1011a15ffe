"""How report values read as text: SQNR, accuracies, fractions, layer kinds, counters.

Shared by the terminal tables and the HTML report so that both say the same thing.

>>> sqnr_text(float("inf")), sqnr_text(-float("inf")), sqnr_text(41.234)
('inf', '-inf', '41.2')
>>> accuracy_text(None), accuracy_text(0.99166), delta_text(0.99166, 0.98333)
('-', '99.17%', '-0.83 pp')
>>> percent_text(0.0), percent_text(0.000004), percent_text(0.2937)
('0', '<0.01%', '29.37%')
>>> counters_text({"acc_saturation": 0, "output_saturation": 12})
'output_saturation=12'
"""

from __future__ import annotations

import math
from collections.abc import Mapping

#: Marker of each layer kind (see :func:`layer_kind`).
KINDS = {
    "exact": "the target's bit-exact integer arithmetic",
    "float": "float fallback (the target's toolchain would run it in float too)",
    "approx": "integer, but not bit-exact (see the note)",
}


def layer_kind(stats) -> str:
    """``"exact"``, ``"float"`` (a float fallback) or ``"approx"`` for a LayerStats."""
    if stats.exact:
        return "exact"
    if stats.op.startswith("float") or "fallback" in stats.note.lower():
        return "float"
    return "approx"


def sqnr_text(value: float) -> str:
    """SQNR in dB with one decimal; ``inf`` when the layer matches the float model exactly."""
    if math.isnan(value):
        return "-"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.1f}"


def accuracy_text(value: float | None) -> str:
    """A top-1 accuracy as a percentage, ``-`` without labels."""
    return "-" if value is None or math.isnan(value) else f"{100 * value:.2f}%"


def delta_text(float_accuracy: float | None, backend_accuracy: float | None) -> str:
    """Backend minus float accuracy in percentage points."""
    if float_accuracy is None or backend_accuracy is None:
        return "-"
    return f"{100 * (backend_accuracy - float_accuracy):+.2f} pp"


def percent_text(fraction: float) -> str:
    """A fraction as a percentage; tiny non-zero fractions stay visible."""
    if math.isnan(fraction):
        return "-"
    if fraction == 0:
        return "0"
    if fraction < 1e-4:
        return "<0.01%"
    return f"{100 * fraction:.2f}%"


def counters_text(counters: Mapping[str, int], *, zeros: bool = False, sep: str = " ") -> str:
    """``name=count`` for every (non-zero, unless ``zeros``) counter, in name order."""
    items = sorted((k, int(v)) for k, v in counters.items() if zeros or v)
    return sep.join(f"{k}={v:,}" for k, v in items)


def variant_text(header: Mapping[str, str]) -> str:
    """The header entries that select a variant of the target (ISA, model variant), joined."""
    keys = ("isa", "variant", "model")
    return ", ".join(str(header[k]) for k in keys if header.get(k))
