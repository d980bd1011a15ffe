"""The gfpq clip table: generation, snapping, and the table file."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quantemu.backends.nnie import log_quantize
from quantemu.backends.nnie.cliptable import (
    DEFAULT_K_MAX,
    DEFAULT_K_MIN,
    ClipTable,
    clip_table,
    default_clip_table,
    read_clip_table,
    snap_clip,
    write_clip_table,
)
from quantemu.backends.nnie.params import clip_exponent
from quantemu.errors import InvalidInputError


def test_default_range_keeps_every_level_finite_and_normal():
    # k_min: smallest level 2^((k-127)/16) = 2^-126 exactly; k_max: largest level 2^(2047/16).
    assert (DEFAULT_K_MIN, DEFAULT_K_MAX) == (-1889, 2047)
    codes = np.arange(256, dtype=np.uint8)
    from quantemu.backends.nnie import log_dequantize

    for k, ok in ((DEFAULT_K_MIN, True), (DEFAULT_K_MIN - 1, False), (DEFAULT_K_MAX, True)):
        y = np.abs(log_dequantize(codes, 2.0 ** (k / 16))[codes != 0x80])
        normal = np.all(y >= np.finfo(np.float32).tiny)
        assert normal == ok and np.all(np.isfinite(y))
    y = log_dequantize(codes, 2.0 ** ((DEFAULT_K_MAX + 1) / 16))
    assert np.isinf(y[0x7F])


def test_table_values_are_powers_and_snap_back_to_their_k():
    table = default_clip_table()
    ks, values = table.ks(), table.values()
    assert len(table) == DEFAULT_K_MAX - DEFAULT_K_MIN + 1
    assert table.clip(0) == 1.0 and table.clip(16) == 2.0 and table.clip(-16) == 0.5
    assert table.clip(15) == 1.9152065613971474  # nnie.md §9's table value for k = 15
    np.testing.assert_array_equal(np.rint(16 * np.log2(values)).astype(np.int64), ks)
    # float64 nearest: within half an ulp of 2^(k/16) (checked exactly in test_nnie_grid)
    assert np.all(np.abs(values - np.exp2(ks / 16)) <= np.spacing(values))


def test_custom_range_and_errors():
    t = clip_table(-3, 3)
    assert (t.k_min, t.k_max, len(t)) == (-3, 3, 7)
    assert 0 in t and 4 not in t and "1" not in t
    with pytest.raises(InvalidInputError, match="k_min=5 > k_max=3"):
        clip_table(5, 3)
    with pytest.raises(InvalidInputError, match="k_max=16384 is outside"):
        clip_table(0, 16384)
    with pytest.raises(InvalidInputError, match="k_min must be an integer"):
        clip_table(1.5, 3)
    with pytest.raises(InvalidInputError, match=r"k=4 is outside the clip table \[-3, 3\]"):
        t.clip(4)


@pytest.mark.parametrize(
    "clip, k, snapped",
    [
        (3.7, 30, 2.0 ** (30 / 16)),  # nnie.md §7: the largest level 3.668 is below c
        (2.4304971504556576, 21, 2.0 ** (21 / 16)),  # just above the tie 2^(20.5/16)
        (2.4304922894662178, 20, 2.0 ** (20 / 16)),  # just below it
        (1.9152065613971474, 15, 1.9152065613971474),  # a table value snaps to itself
        (6.0, 41, 2.0 ** (41 / 16)),
    ],
)
def test_snap(clip, k, snapped):
    s = snap_clip(clip)
    assert (s.k, s.clip) == (k, clip)
    assert s.snapped == pytest.approx(snapped, rel=1e-15)
    assert s.abs_error == s.snapped - clip
    assert s.rel_error == (s.snapped - clip) / clip
    assert s.steps == pytest.approx(k - 16 * math.log2(clip), abs=1e-12)
    assert -0.5 <= s.steps <= 0.5


def test_snapping_error_sign_and_steps():
    s = snap_clip(3.7)  # 16*log2(3.7) = 30.2004: snapped below, by 0.2004 steps
    assert s.abs_error < 0 and s.rel_error < 0
    assert s.steps == pytest.approx(-0.200404, abs=1e-6)
    s = snap_clip(2.4304971504556576)  # just above the tie: +0.5 steps (nearly)
    assert s.steps == pytest.approx(0.5, abs=1e-4) and s.abs_error > 0


def test_snapping_keeps_codes():
    x = np.linspace(-10, 10, 501, dtype=np.float32)
    for clip in (3.7, 6.0, 0.1, 1e5):
        s = snap_clip(clip)
        assert clip_exponent(s.snapped) == s.k
        np.testing.assert_array_equal(log_quantize(x, clip)[0], log_quantize(x, s.snapped)[0])


def test_snap_errors():
    with pytest.raises(InvalidInputError, match="clip must be finite and > 0"):
        snap_clip(0.0)
    with pytest.raises(InvalidInputError, match="outside the clip table"):
        snap_clip(1e-300)  # k = -15945: levels would underflow; not in the default table
    with pytest.raises(InvalidInputError, match="outside the clip table"):
        snap_clip(3.7, clip_table(0, 16))


def test_file_round_trip(tmp_path):
    path = write_clip_table(tmp_path / "gfpq_param_table_8bit.txt")
    text = path.read_text()
    assert text.startswith("# gfpq_param_table_8bit.txt-style clip table written by quantemu")
    assert "HiSilicon's own file is not public" in text
    assert "\n15 1.9152065613971474\n" in text and "\n0 1.0\n" in text
    assert read_clip_table(path) == default_clip_table()
    small = clip_table(-2, 2)
    assert read_clip_table(write_clip_table(tmp_path / "small.txt", small)) == small


def test_reading_accepts_fewer_digits_and_comments(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("# a comment\n\n14 1.834  # trailing comment\n15   1.915207\n")
    assert read_clip_table(path) == ClipTable(14, (1.834, 1.915207))


@pytest.mark.parametrize(
    "content, message",
    [
        ("15 1.9152065613971474\n3\n", r"t\.txt:2: '3': expected 'k value'"),
        ("15 1.9152065613971474 7\n", r"t\.txt:1: .*expected 'k value'"),
        ("x 1.5\n", r"t\.txt:1: 'x 1\.5': expected 'k value'"),
        ("15 abc\n", r"t\.txt:1: .*'abc' is not a number"),
        ("15 -1.9\n", r"t\.txt:1: .*must be finite and > 0"),
        ("15 inf\n", r"t\.txt:1: .*must be finite and > 0"),
        ("15 3.7\n", r"t\.txt:1: .*rounds to k=30, not 15"),
        ("15 1.9152065613971474\n17 2.0994333672461347\n", r"t\.txt:2: k=17 where k=16 was"),
        ("# only comments\n\n", r"t\.txt: no table entries"),
    ],
)
def test_malformed_files(tmp_path, content, message):
    path = tmp_path / "t.txt"
    path.write_text(content)
    with pytest.raises(InvalidInputError, match=message):
        read_clip_table(path)


def test_missing_file(tmp_path):
    with pytest.raises(InvalidInputError, match="cannot read clip table"):
        read_clip_table(tmp_path / "absent.txt")
