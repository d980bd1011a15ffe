"""The gfpq clip table: the clip values NNIE's mapper accepts, snapping, and the table file.

HiSilicon's mapper accepts only clip values listed in its ``gfpq_param_table_8bit.txt``; the
MQBench documentation describes them as the ``c`` for which ``16*log2 c`` is an integer, i.e.
``c_k = 2^(k/16)`` (``nnie.md`` §7). The real file is not public, so its range of ``k`` and its
layout are unknown. quantemu therefore:

- generates the table itself, ``c_k`` = the float64 nearest to ``2^(k/16)`` (exact integer
  construction, :func:`.grid.float64_pow2_16th`), by default over ``DEFAULT_K_MIN..DEFAULT_K_MAX``:
  the ``k`` for which all 255 nonzero levels are finite *normal* float32 values (the smallest level
  ``2^((k-127)/16) >= 2^-126`` needs ``k >= -1889``; the largest ``2^(k/16) < 2^128`` needs
  ``k <= 2047``). Outside it, levels are subnormal, zero or infinite, which no real layer wants;
- snaps a clip ``c`` with the page's rule, ``k = round_half_even(16*log2 c)`` in float64 (the same
  ``k`` that quantization uses, so snapping never changes the codes), ``snap(c) = c_k``;
- writes and reads a text file of its own layout (:func:`write_clip_table`), said to be
  quantemu's own in the file's header.
"""

from __future__ import annotations

import functools
import math
import numbers
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantemu.backends.nnie import grid
from quantemu.backends.nnie.params import LEVELS, check_clip, clip_exponent
from quantemu.errors import InvalidInputError

DEFAULT_K_MIN = -126 * 16 + (LEVELS - 1)  # -1889: smallest level 2^((k-127)/16) = 2^-126
DEFAULT_K_MAX = 128 * 16 - 1  # 2047: largest level 2^(2047/16) < FLT_MAX
FILE_NAME = "gfpq_param_table_8bit.txt"


@dataclass(frozen=True)
class ClipTable:
    """Consecutive table entries: ``clips[i]`` is the clip value for ``k = k_min + i``."""

    k_min: int
    clips: tuple[float, ...]

    @property
    def k_max(self) -> int:
        """The largest ``k`` in the table."""
        return self.k_min + len(self.clips) - 1

    def __len__(self) -> int:
        return len(self.clips)

    def __contains__(self, k: object) -> bool:
        return isinstance(k, numbers.Integral) and self.k_min <= int(k) <= self.k_max

    def ks(self) -> np.ndarray:
        """The table's ``k`` values (int64)."""
        return np.arange(self.k_min, self.k_max + 1, dtype=np.int64)

    def values(self) -> np.ndarray:
        """The table's clip values (float64)."""
        return np.array(self.clips, dtype=np.float64)

    def clip(self, k: int) -> float:
        """The entry for ``k``; a ``k`` outside the table is an :class:`InvalidInputError`."""
        if k not in self:
            raise InvalidInputError(
                f"k={k} is outside the clip table [{self.k_min}, {self.k_max}]: NNIE's mapper "
                "accepts only table values; choose a clip inside the table's range"
            )
        return self.clips[int(k) - self.k_min]


def clip_table(k_min: int = DEFAULT_K_MIN, k_max: int = DEFAULT_K_MAX) -> ClipTable:
    """Generate the table ``c_k`` = float64 nearest to ``2^(k/16)`` for ``k_min <= k <= k_max``.

    >>> t = clip_table(-1, 16)
    >>> t.clip(0), t.clip(16), t.clip(15), len(t)
    (1.0, 2.0, 1.9152065613971474, 18)
    """
    for name, k in (("k_min", k_min), ("k_max", k_max)):
        if isinstance(k, bool) or not isinstance(k, numbers.Integral):
            raise InvalidInputError(f"{name} must be an integer, got {k!r}")
        if not grid.F64_POW2_16TH_MIN <= k <= grid.F64_POW2_16TH_MAX:
            raise InvalidInputError(
                f"{name}={k} is outside [{grid.F64_POW2_16TH_MIN}, {grid.F64_POW2_16TH_MAX}], "
                "where 2^(k/16) is a normal float64"
            )
    if k_min > k_max:
        raise InvalidInputError(f"k_min={k_min} > k_max={k_max}: the table would be empty")
    ks = np.arange(int(k_min), int(k_max) + 1, dtype=np.int64)
    return ClipTable(int(k_min), tuple(grid.float64_pow2_16th(ks).tolist()))


@functools.lru_cache(maxsize=1)
def default_clip_table() -> ClipTable:
    """``clip_table(DEFAULT_K_MIN, DEFAULT_K_MAX)``, generated once."""
    return clip_table()


@dataclass(frozen=True)
class SnapResult:
    """A clip value snapped to the table, and what snapping moved.

    ``abs_error = snapped - clip`` and ``rel_error = abs_error / clip`` (float64); ``steps =
    k - 16*log2(clip)`` is the move in steps of the 16-per-octave grid, in ``[-1/2, 1/2]``
    (positive: the snapped clip is above ``clip``). The largest level is ``snapped``, not ``clip``.
    """

    clip: float
    k: int
    snapped: float
    abs_error: float
    rel_error: float
    steps: float


def snap_clip(clip: float, table: ClipTable | None = None) -> SnapResult:
    """Snap ``clip`` to the table (``nnie.md`` §7): ``k = round_half_even(16*log2 clip)``.

    Snapping does not change quantization (``clip`` and the snapped value give the same ``k``);
    it is what must be exported to NNIE's mapper.

    >>> s = snap_clip(3.7)
    >>> s.k, round(s.snapped, 6), round(s.rel_error, 6), round(s.steps, 6)
    (30, 3.668016, -0.008644, -0.200404)
    """
    table = default_clip_table() if table is None else table
    value = check_clip(clip)
    k = clip_exponent(value)
    snapped = table.clip(k)
    error = snapped - value
    steps = float(k - 16.0 * np.log2(value))  # the same float64 log2 as clip_exponent
    return SnapResult(value, k, snapped, error, error / value, steps)


def write_clip_table(path: str | Path, table: ClipTable | None = None) -> Path:
    """Write ``table`` (default: :func:`clip_table`) as a text file and return its path.

    quantemu's layout, since HiSilicon's is not public: ``#`` comment lines (a header saying
    so), then one entry per line, ``k`` and ``c_k`` separated by one space, ``c_k`` printed as the
    shortest decimal that reads back as the same float64 (``repr``), ``k`` consecutive ascending.
    """
    table = default_clip_table() if table is None else table
    lines = [
        f"# {FILE_NAME}-style clip table written by quantemu (HiSilicon NNIE, 8-bit).",
        "# HiSilicon's own file is not public; this layout is quantemu's: '#' comments, then",
        "# one entry per line, 'k c_k' with c_k = 2^(k/16) (float64, shortest round-trip",
        "# decimal), k consecutive and ascending. 16*log2(c_k) rounds to k.",
        f"# k_min={table.k_min} k_max={table.k_max} entries={len(table)}",
    ]
    lines += [f"{k} {c!r}" for k, c in zip(table.ks().tolist(), table.clips, strict=True)]
    out = Path(path)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


_ENTRY = re.compile(r"^(-?\d+)\s+(\S+)$")


def read_clip_table(path: str | Path) -> ClipTable:
    """Read a table file in :func:`write_clip_table`'s layout, validating every line.

    Each entry must be ``k value`` with an integer ``k``, a finite positive float ``value`` with
    ``round_half_even(16*log2 value) == k`` (values printed with fewer digits than ours are
    accepted as long as they snap to their ``k``), and ``k`` consecutive and ascending. Errors are
    :class:`InvalidInputError` naming the file, the line number and the line.
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read clip table {source}: {exc}") from exc
    k_min, clips = None, []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        k, value = _parse_entry(line, f"{source}:{number}: {raw.strip()!r}")
        expected = k if k_min is None else k_min + len(clips)
        if k != expected:
            raise InvalidInputError(
                f"{source}:{number}: k={k} where k={expected} was expected: entries must have "
                "consecutive ascending k"
            )
        k_min = k if k_min is None else k_min
        clips.append(value)
    if k_min is None:
        raise InvalidInputError(f"{source}: no table entries (only comments or blank lines)")
    return ClipTable(k_min, tuple(clips))


def _parse_entry(line: str, where: str) -> tuple[int, float]:
    match = _ENTRY.match(line)
    if match is None:
        raise InvalidInputError(f"{where}: expected 'k value' (an integer and a number)")
    k = int(match.group(1))
    try:
        value = float(match.group(2))
    except ValueError:
        raise InvalidInputError(f"{where}: {match.group(2)!r} is not a number") from None
    if not (math.isfinite(value) and value > 0.0):
        raise InvalidInputError(f"{where}: the clip value must be finite and > 0")
    if clip_exponent(value) != k:
        raise InvalidInputError(
            f"{where}: 16*log2({value!r}) rounds to k={clip_exponent(value)}, not {k}: "
            "the value is not the table entry for this k"
        )
    return k, value
