"""NVDLA FP16 convolution (CMAC Booth MAC + CACC fp48) throughput, as ratios measured in one run.

Run: ``python bench/nvdla_fp16.py [--rounds R]`` (with quantemu installed, or ``PYTHONPATH=src``).

* ``speed-up``: ``conv_fp16`` against the implementation it replaced (:func:`_old_cmac`, kept
  here: the cmod's Booth routine per product in int64, every one of the 64 channels formed,
  ``np.select`` partial products), both driving the same CACC, on a 64 -> 64 channel 3x3 conv
  of 14x14 data, dense and ReLU (about half the data +-0). Bit-identical outputs are asserted.
* ``vs float32``: ``conv_fp16`` / ``conv_fp16_grouped`` against a float32 NumPy convolution of
  the same shape (im2col and a batched ``matmul``): the price of exactness, for a 64 -> 64 3x3
  conv of 28x28 data (dense and ReLU), a 256-channel depthwise 3x3 conv and a 256 -> 64 1x1
  conv.

* ``model``: the demo CNN run whole on the FP16 pipeline (``precision=fp16``: every layer's
  check against its local reference included) against the same model on the INT8 pipeline.

Timings come from interleaved blocks (``_timing.compare``); printed as the median over rounds of
the paired ratio with its spread.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import quantemu
from _timing import compare, machine_record
from quantemu.backends.nvdla.fp16.cc import (
    cacc_add_fp16,
    cacc_fp48_to_fp32,
    conv_fp16,
    conv_fp16_grouped,
)
from quantemu.data import demo_dataset, demo_model_path

_I = np.int64
_M32, _M38 = 0xFFFFFFFF, (1 << 38) - 1
_COMP = np.array([0xAAAB0000 | 0, 0xFAAAB000, 0xFFAAAB00, 0xFFFAAAB0, 0xFFFFAAAB, 0xFFFFFAAB,
                  0xFFFFFFAB, 0xFFFFFFFB], _I)  # fmt: skip


def _old_booth(res_sign, wm, dm, sft):
    """The replaced ``booth_fp16``: partial products by ``np.select``, the CSA tree in int64."""
    wt, rev = wm << 1, np.where(res_sign != 0, 7, 0)
    pp, inv = [], []
    for i in range(8):
        code = ((wt >> (2 * i)) & 7) ^ rev
        conds = [(code == 0) | (code == 7), (code == 1) | (code == 2), code == 3, code == 4]
        vals = [0x10000, dm | 0x10000, (dm << 1) | 0x10000, ~(dm << 1) & 0xFFFF]
        pp.append(np.select(conds, vals, ~dm & 0xFFFF))
        inv.append(((code >= 4) & (code <= 6)).astype(_I))
    c = [pp[0], (pp[1] << 2) | inv[0], (pp[2] << 4) | (inv[1] << 2), (pp[3] << 6) | (inv[2] << 4)]
    c += [inv[3] << 6, pp[4] << 8, (pp[5] << 10) | (inv[4] << 8), (pp[6] << 12) | (inv[5] << 10)]
    c += [(pp[7] << 14) | (inv[6] << 12), inv[7] << 14]

    def csa(a, b, d):
        return a ^ b ^ d, (((a & b) | (b & d) | (a & d)) << 1) & _M32

    halves = []
    for v in (c[:5], c[5:]):
        s, k = csa(*v[:3])
        s, k = csa(s, k, v[3])
        halves.append(csa(s, k, v[4]))
    s, k = csa(*halves[0], halves[1][0])
    p0, p1 = csa(s, k, halves[1][1])
    sh = np.minimum(sft, 31)
    total = ((p0 >> sh) + (p1 >> sh) + _COMP[np.minimum(sft // 4, 7)]) & _M32
    return np.where(sft >= 32, 0, total - ((total >> 31) << 32))


def _old_cmac(dat, wt):
    """The replaced ``cmac_cell_fp16`` ([P, 64] x [K, 64] -> [K, P]); no NaN in the bench data."""
    d, w = dat[None, :, :], wt[:, None, :]
    use = (d & 0x7FFF != 0) & (w & 0x7FFF != 0)
    ed, ew = (d >> 10) & 31, (w >> 10) & 31
    md = ((d & 0x3FF) | ((ed != 0) << 10)) << np.where(ed == 0, 1, ed & 3)
    mw = ((w & 0x3FF) | ((ew != 0) << 10)) << np.where(ew == 0, 1, ew & 3)
    coarse = np.where(use, (ed >> 2) + (ew >> 2), 0)
    top = coarse.max(axis=-1)
    prod = _old_booth((d ^ w) >> 15, mw, md, (top[..., None] - coarse) * 4)
    total = np.where(use, prod, 0).sum(axis=-1)
    return (((top * 4) & 63) << 38) | (total & _M38)


def _old_conv(x, w):
    """The replaced ``conv_fp16`` for C <= 64, stride 1, padding 1, pad value 0."""
    (c, h, wd), (k, _, r, s) = x.shape, w.shape
    xp = np.zeros((64, h + 2, wd + 2), _I)
    xp[:c, 1:-1, 1:-1] = x.view(np.uint16)
    wp = np.zeros((k, 64, r, s), _I)
    wp[:, :c] = w.view(np.uint16)
    acc = None
    step = max(1, (1 << 18) // (64 * k))
    for i in range(r):
        for j in range(s):
            dat = xp[:, i : i + h, j : j + wd].reshape(64, -1).T
            parts = [_old_cmac(dat[p : p + step], wp[:, :, i, j]) for p in range(0, h * wd, step)]
            mac = np.concatenate(parts, axis=-1)
            acc = cacc_add_fp16(np.zeros_like(mac) if acc is None else acc, mac)
    return cacc_fp48_to_fp32(acc).astype(np.uint32).reshape(k, h, wd)


def _float_conv(x, w, groups: int, pad: int):
    """float32 grouped convolution, stride 1: im2col and a batched BLAS ``matmul``."""
    (_, h, wd), (k, cg, r, s) = x.shape, w.shape
    xp = np.pad(x.astype(np.float32), ((0, 0), (pad, pad), (pad, pad)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (h, wd), axis=(1, 2))  # [C, r, s, h, w]
    cols = np.ascontiguousarray(cols).reshape(groups, cg * r * s, h * wd)
    wg = w.astype(np.float32).reshape(groups, k // groups, cg * r * s)
    return np.matmul(wg, cols).reshape(k, h, wd)


def _data(rng, shape, relu: bool, scale: float = 1.0):
    v = rng.standard_normal(shape) * scale
    return (np.maximum(v, 0) if relu else v).astype(np.float16)


def _speedups(rng, rounds: int) -> None:
    w = _data(rng, (64, 64, 3, 3), False, 0.05)
    for relu in (False, True):
        x = _data(rng, (64, 14, 14), relu)
        assert np.array_equal(conv_fp16(x, w, padding=1), _old_conv(x, w))
        t0 = time.perf_counter()
        _old_conv(x, w)
        one = time.perf_counter() - t0  # about a second: one call per block is enough
        fns = [lambda x=x: conv_fp16(x, w, padding=1), lambda x=x: _old_conv(x, w)]
        c = compare(fns, rounds, min_calls=1, min_seconds=min(0.3, one))
        label = f"speed-up 3x3 64->64 14x14 {'relu' if relu else 'dense'}"
        new, old = c.median_time(0) * 1e3, c.median_time(1) * 1e3
        print(f"{label:<34} new {new:8.1f} ms  old {old:8.1f} ms  {c.summary()}")
        print(f"{'':<34} = {1 / c.ratio():.1f}x faster")


def _vs_float(rng, rounds: int) -> None:
    w3 = _data(rng, (64, 64, 3, 3), False, 0.05)
    xd = _data(rng, (64, 28, 28), False)
    xr = _data(rng, (64, 28, 28), True)
    xdw, wdw = _data(rng, (256, 28, 28), True), _data(rng, (256, 1, 3, 3), False, 0.3)
    x1, w1 = _data(rng, (256, 14, 14), True), _data(rng, (64, 256, 1, 1), False, 0.05)
    cases = [
        ("3x3 64->64 28x28 dense", xd, w3, 1),
        ("3x3 64->64 28x28 relu", xr, w3, 1),
        ("depthwise 3x3 256 28x28 relu", xdw, wdw, 256),
        ("1x1 256->64 14x14 relu", x1, w1, 1),
    ]
    for name, x, w, g in cases:
        pad = 1 if w.shape[2] == 3 else 0

        def ours(x=x, w=w, g=g, pad=pad):
            return conv_fp16_grouped(x, w, groups=g, padding=pad)

        def base(x=x, w=w, g=g, pad=pad):
            return _float_conv(x, w, g, pad)

        c = compare([ours, base], rounds)
        macs = w.size * x.shape[1] * x.shape[2] / 1e6
        print(f"vs float32 {name:<28} {c.median_time(0) * 1e3:8.1f} ms "
              f"({macs / c.median_time(0):6.1f} MMAC/s)  {c.summary()}")  # fmt: skip


def _models(rounds: int) -> None:
    xc, _ = demo_dataset("calib")
    x = demo_dataset("test")[0][:32]
    fp16 = quantemu.compile(demo_model_path(), backend="nvdla", precision="fp16")
    int8 = quantemu.compile(demo_model_path(), backend="nvdla", calib=xc, progress=False)
    c = compare([lambda: fp16.run(x), lambda: int8.run(x)], rounds, min_calls=1)
    print(f"{'model demo, 32 samples':<34} fp16 {c.median_time(0) * 1e3:8.1f} ms  int8 "
          f"{c.median_time(1) * 1e3:8.1f} ms  {c.summary()}")  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    for line in machine_record():
        print(line)
    _speedups(rng, args.rounds)
    _vs_float(rng, args.rounds)
    _models(args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
