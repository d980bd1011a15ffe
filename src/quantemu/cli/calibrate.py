"""``quantemu calibrate MODEL --calib DATA``: observe activation ranges, write them as JSON.

Exit status: 0 on success; 1 when the model or the data cannot be used (the message says why);
2 for usage errors.
"""

# Everything beyond argparse is imported when the command runs, so that `quantemu` starts quickly
# whichever subcommand is used.
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quantemu.calibration.observers import OBSERVERS
from quantemu.cli.argtypes import bits, command_parser, percentile, positive_int
from quantemu.cli.checks import check_input_file, check_output_file
from quantemu.cli.console import INPUT_ERROR, USAGE_ERROR, fail
from quantemu.cli.loading import DEMO, demo_split, load_model
from quantemu.errors import QuantemuError

_SUMMARY = "observe activation ranges over calibration data (writes JSON)"

_DESCRIPTION = """\
Run the float model over calibration data and record the range of every activation (graph
inputs and node outputs) with the chosen observer. MODEL is a .onnx file or 'demo' (the built-in
digits CNN; without --calib it calibrates on the bundled calibration split). DATA is a .npy
file, a .npz file (--calib-key selects the array; default: the only array, or the first of x,
inputs, input, images, data), or a directory of images (resized and normalized by the --image-*
options; needs Pillow). Arrays must be float and normalized as the model expects. The graph is
optimized (BN folding, activation fusion) first unless --no-optimize is given. The JSON written
with --out is what 'quantemu run MODEL --ranges FILE' takes instead of calibrating again.
--data and --key are the older names of --calib and --calib-key. Output paths and input files
are checked before the calibration starts."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``calibrate`` subcommand; its ``run`` default is :func:`run`."""
    p = command_parser(subparsers, "calibrate", _SUMMARY, _DESCRIPTION)
    p.add_argument("model", metavar="MODEL", help="a .onnx file, or 'demo'")
    p.add_argument(
        "--calib", "--data", dest="data", metavar="DATA", help=".npy, .npz or image directory"
    )
    p.add_argument(
        "--calib-key", "--key", dest="key", metavar="KEY", help="the array to use in a .npz file"
    )
    p.add_argument("--observer", choices=OBSERVERS, default="minmax", help="default: minmax")
    p.add_argument("--per-channel", action="store_true", help="one range per channel")
    p.add_argument("--axis", type=int, default=1, help="channel axis (default 1)")
    p.add_argument(
        "--percentile",
        type=percentile,
        default=99.99,
        help="for --observer percentile, in (0, 100] (default 99.99)",
    )
    p.add_argument("--bits", type=bits, default=8, help="for --observer mse, 2 to 16 (default 8)")
    p.add_argument("--symmetric", action="store_true", help="for --observer mse")
    p.add_argument("--batch-size", type=positive_int, default=32, metavar="N", help="default 32")
    p.add_argument("--limit", type=positive_int, metavar="N", help="use at most N samples")
    p.add_argument("--no-optimize", action="store_true", help="calibrate the graph as imported")
    p.add_argument("--out", metavar="FILE", help="write the ranges JSON here (default: stdout)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    images = p.add_argument_group("image directories")
    images.add_argument(
        "--image-size", type=positive_int, nargs=2, metavar=("H", "W"), help="resize to"
    )
    images.add_argument("--grayscale", action="store_true", help="convert to one channel")
    images.add_argument("--scale", type=float, default=1 / 255, help="pixel scale (1/255)")
    images.add_argument("--mean", type=float, nargs="+", default=[0.0], help="per channel")
    images.add_argument("--std", type=float, nargs="+", default=[1.0], help="per channel")
    images.add_argument("--channels-last", action="store_true", help="HWC instead of CHW")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Calibrate as ``args`` asks; return the exit status."""
    if args.data is None and args.model != DEMO:
        message = "--calib/--data is required (except for the demo model)"
        return fail("calibrate", message, USAGE_ERROR)
    try:
        check_output_file(args.out, "--out")
    except QuantemuError as exc:
        return fail("calibrate", str(exc), USAGE_ERROR)
    try:
        if args.data is not None and not Path(args.data).is_dir():
            check_input_file(args.data, "--calib")
    except QuantemuError as exc:
        return fail("calibrate", str(exc), INPUT_ERROR)
    try:
        ranges = _calibrate(args)
    except QuantemuError as exc:
        return fail("calibrate", str(exc), INPUT_ERROR)
    if args.out is None:
        sys.stdout.write(ranges.dumps() + "\n")
        return 0
    try:
        ranges.save(args.out)
    except OSError as exc:
        return fail("calibrate", f"cannot write {args.out}: {exc}", USAGE_ERROR)
    if not args.quiet:
        print(
            f"wrote {len(ranges)} tensor ranges ({ranges.observer}, {ranges.samples} samples) "
            f"to {args.out}",
            file=sys.stderr,
        )
    return 0


def _calibrate(args: argparse.Namespace):
    from quantemu.calibration.datasets import ImageOptions
    from quantemu.simulate.plan import observe_ranges

    graph = load_model(args.model)
    data = demo_split("calib")[0] if args.data is None else args.data
    options = ImageOptions(
        size=tuple(args.image_size) if args.image_size else None,
        grayscale=args.grayscale,
        scale=args.scale,
        mean=tuple(args.mean),
        std=tuple(args.std),
        channels_first=not args.channels_last,
    )
    # the flags that are calibrate()'s keywords by the same name
    same = ("observer", "per_channel", "axis", "batch_size", "limit", "percentile", "bits")
    return observe_ranges(
        graph,
        data,
        optimized=not args.no_optimize,
        symmetric=args.symmetric,
        key=args.key,
        image_options=options,
        progress=None if not args.quiet else False,
        **{name: getattr(args, name) for name in same},
    )
