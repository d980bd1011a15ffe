"""Hand-made LayerStats for the report tests."""

from __future__ import annotations

from quantemu.simulate import LayerStats


def layer(name: str, **changes) -> LayerStats:
    """A LayerStats with plausible values; ``changes`` override fields."""
    values = {
        "name": name,
        "op": "conv2d_deep",
        "output": f"{name}:0",
        "exact": True,
        "note": "",
        "encoding": "int8 scale=0.05 zp=-3",
        "elements": 1000,
        "sqnr_db": 30.0,
        "cosine": 0.999,
        "max_abs_lsb": 2,
        "fraction_off": 0.25,
        "lsb_histogram": (0,) * 6 + (10, 100, 780, 100, 10) + (0,) * 6,
        "counters": {"acc_saturation": 0, "output_saturation": 3},
    }
    values.update(changes)
    return LayerStats(**values)
