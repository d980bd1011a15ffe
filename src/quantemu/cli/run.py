"""``quantemu run MODEL --backend B --calib DATA``: simulate a model on a target, report the error.

Exit status: 0 on success; 1 when the model, the data or a backend cannot be used (the message
says why); 2 for usage errors (bad options, an output file that cannot be written, the HTML
report without matplotlib).
"""

# Everything beyond argparse and the registry is imported when the command runs, so that
# `quantemu` starts quickly whichever subcommand is used.
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from quantemu.backends.registry import known_backends
from quantemu.calibration.observers import OBSERVERS
from quantemu.cli.argtypes import command_parser, input_shape, positive_int, repeatable
from quantemu.cli.checks import check_input_file, check_output_file
from quantemu.cli.console import INPUT_ERROR, USAGE_ERROR, fail, stderr_console, stdout_console
from quantemu.cli.loading import (
    DEMO,
    check_data,
    demo_split,
    load_array,
    load_feeds,
    load_labels,
    load_model,
    load_samples,
    multi_input,
)
from quantemu.cli.options import check_options, isa_backends, options_help, parse_options
from quantemu.cli.simulation import open_session, print_outcome, save_outputs, write_outputs
from quantemu.errors import InvalidInputError, QuantemuError

if TYPE_CHECKING:
    from quantemu.simulate.session import Session

_SUMMARY = "simulate a model bit-exactly on a target and report per-layer error"

_DESCRIPTION = """\
Quantize MODEL for an inference target the way the target's toolchain does, run it with the
target's exact integer arithmetic, and compare it layer by layer with the float model: SQNR,
cosine, error in output LSBs, every counter the target keeps (accumulator and output saturation,
pair saturation, LUT under/overflow), and top-1 accuracy when labels are given.

MODEL is a .onnx file, an int8 .tflite file (or an XMOS-compiled .xcore.tflite), or 'demo' (the
built-in digits CNN; for it --calib defaults to the bundled calibration split and --eval/--labels
to the bundled test split). A pre-quantized model (an int8 TFLite file) needs no --calib: its own
quantization is used.

DATA (--calib, --eval) is a .npy file or a .npz file (--calib-key/--eval-key select the array;
default: the only array, or the first of x, inputs, input, images, data) holding float samples
along axis 0, normalized as the model expects; for a pre-quantized model --eval may also hold its
own integer input codes (e.g. int8, NHWC for a TFLite model). For a model with several inputs
DATA is one .npz with an array per input, keyed by input name, each as the model takes it (as
onnxruntime is fed): the samples run along each input's batch dimension (its symbolic dimension:
axis 0, or axis 1 for a recurrent state), and an input without one (a fixed shape) applies to
every sample; the --eval .npz may also hold the --labels array. Without --eval the calibration data
is evaluated. --ranges RANGES.json uses the activation ranges 'quantemu calibrate MODEL --out
RANGES.json' wrote instead of calibrating (then --eval gives the data, except for demo). --eval
may also be a quoted glob of .npy/.npz shards ('val/shard-*.npz'), read batch by batch.

--cluster SPEC evaluates on a Dask cluster (pip install 'quantemu[distributed]'): local:N starts
N worker processes here for the run; tcp://HOST:8786 uses a running scheduler ('dask scheduler',
'dask worker tcp://HOST:8786'). The workers read the --eval shards themselves; the report is the
same as without --cluster.

--save-outputs OUT.npz writes, for each graph output, the integer codes the target produced,
stacked over the samples, in the model's own layout (NHWC for TFLite), named by output.
--against BACKEND2 also runs BACKEND2 and reports, per layer, where and by how many LSB the two
targets' codes disagree.

LABELS is a .npy file of integer class labels (one per --eval sample), a .npz file (its only
array, or the first of y, labels, label, targets), or the name of an array inside the --eval .npz
(e.g. --labels y).

--option KEY=VALUE passes an option to the backends' lowering (repeatable); BACKEND.KEY=VALUE
passes it to one backend only. VALUE is text that the backend's registered options class types
by field (an enum value, true/false, an integer, ...); an unknown key or a bad value is an error,
reported before calibration starts. The options, as registered (also: quantemu backends):
{options}
--isa ISA is isa=ISA for the selected backends that have an isa option ({isa}). With --backend
all, every backend runs and a comparison table follows.

Every output path, option and input file is checked before calibration starts. --report writes
one self-contained HTML file (every selected backend in it; needs matplotlib: pip install
'quantemu[report]'). --json writes strict JSON; a non-finite number (the SQNR of a layer equal to
the float model is +inf) is written as the string "inf", "-inf" or "nan". An output that cannot
be written does not stop the others; the error names it."""


class MissingCalibrationError(InvalidInputError):
    """No --calib for a model that needs it (a usage error)."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``run`` subcommand; its ``run`` default is :func:`run`."""
    p = command_parser(
        subparsers,
        "run",
        _SUMMARY,
        _DESCRIPTION.format(
            options=options_help(), isa=", ".join(isa_backends()) or "none registered"
        ),
    )
    p.add_argument("model", metavar="MODEL", help="a .onnx or .tflite file, or 'demo'")
    p.add_argument(
        "--backend",
        required=True,
        choices=[*known_backends(), "all"],
        help="the target to simulate, or all of them",
    )
    p.add_argument(
        "--isa",
        help=f"instruction set, for the backends with an isa option ({', '.join(isa_backends())})",
    )
    p.add_argument("--calib", metavar="DATA", help="calibration data (.npy or .npz)")
    p.add_argument(
        "--ranges",
        metavar="RANGES.json",
        help="activation ranges written by 'quantemu calibrate --out' (skips calibration; "
        "replaces --calib)",
    )
    repeatable(
        p,
        "--input-shape",
        "NAME=1x3x224x224",
        "bind an input's symbolic dimensions (N keeps one; repeatable); by default they are "
        "bound from the --calib data",
        type=input_shape,
    )
    p.add_argument("--calib-key", metavar="KEY", help="the array to use in the --calib .npz")
    p.add_argument(
        "--eval",
        metavar="DATA",
        help="evaluation data: .npy/.npz, or a quoted glob of shards ('val/shard-*.npz', read "
        "lazily) (default: the --calib data)",
    )
    p.add_argument("--eval-key", metavar="KEY", help="the array to use in the --eval .npz")
    p.add_argument("--labels", metavar="LABELS", help=".npy/.npz file, or a key of --eval .npz")
    repeatable(
        p,
        "--option",
        "KEY=VALUE",
        "a lowering option, or BACKEND.KEY=VALUE (repeatable; see above)",
    )
    p.add_argument(
        "--save-outputs", metavar="OUT.npz", help="write the output codes of every sample"
    )
    p.add_argument(
        "--against",
        metavar="BACKEND2",
        choices=known_backends(),
        help="compare the codes of every layer with another backend",
    )
    p.add_argument("--observer", choices=OBSERVERS, default="minmax", help="default: minmax")
    p.add_argument("--report", metavar="FILE.html", help="write the HTML report (matplotlib)")
    p.add_argument("--json", metavar="FILE.json", help="write the results as JSON (- for stdout)")
    p.add_argument("--batch-size", type=positive_int, default=64, metavar="N", help="default 64")
    p.add_argument(
        "--cluster",
        metavar="SPEC",
        help="evaluate on a Dask cluster: local:N (N worker processes here, started and stopped "
        "by quantemu) or a scheduler address such as tcp://host:8786 (quantemu[distributed]); "
        "the results are the same as without it",
    )
    p.add_argument(
        "--no-layers", action="store_true", help="print the summary without the per-layer table"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars or status lines")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Simulate as ``args`` asks; return the exit status."""
    backends = known_backends() if args.backend == "all" else [args.backend]
    try:
        options = _check_usage(args, backends)
    except QuantemuError as exc:
        return fail("run", str(exc), USAGE_ERROR)
    status = stderr_console(args.quiet)
    try:
        _check_files(args)
        session, calib, x, labels = _inputs(args, options)
    except MissingCalibrationError as exc:
        return fail("run", str(exc), USAGE_ERROR)
    except QuantemuError as exc:
        return fail("run", str(exc), INPUT_ERROR)
    try:
        with _cluster(args.cluster) as client:
            outcome = session.evaluate(
                calib,
                x,
                labels,
                backends=backends,
                client=client,
                keep_outputs=bool(args.save_outputs),
            )
        compare = (args.backend, args.against)
        disagreement = session.compare(calib, x, *compare) if args.against else None
    except QuantemuError as exc:
        return fail("run", str(exc), INPUT_ERROR)
    except MemoryError as exc:
        return fail(
            "run",
            f"out of memory ({exc}); try a smaller --batch-size, or check the model's shapes",
            INPUT_ERROR,
        )
    if args.json != "-":  # stdout holds the JSON document then
        layers, compare = not args.no_layers, args.backend == "all"
        print_outcome(outcome, stdout_console(), tables=True, layers=layers, compare=compare)
        if disagreement is not None:
            from quantemu.report.against import print_against

            print_against(disagreement, stdout_console())
    return _write(args, outcome, status)


def _cluster(spec: str | None):
    """The Dask client of ``--cluster`` for the block, or ``None`` without it."""
    if spec is None:
        return contextlib.nullcontext(None)
    from quantemu.simulate.cluster import cluster

    return cluster(spec)


def _write(args: argparse.Namespace, outcome, status) -> int:
    """Write every output that can be written; name the ones that could not be."""
    model = DEMO if args.model == DEMO else Path(args.model).name
    failed = write_outputs(
        outcome, report=args.report, json_path=args.json, model=model, status=status
    )
    if args.save_outputs and args.backend in outcome.outputs:
        try:
            save_outputs(args.save_outputs, outcome.outputs[args.backend], status)
        except OSError as exc:
            failed.append(f"--save-outputs {args.save_outputs}: {exc.strerror or exc}")
    if failed:
        return fail("run", "not written: " + "; ".join(failed), USAGE_ERROR)
    return INPUT_ERROR if outcome.errors else 0


def _check_usage(args: argparse.Namespace, backends: list[str]) -> dict:
    """Option combinations, output paths, input files and every backend's options, before
    anything is loaded or calibrated."""
    if args.labels is not None and args.eval is None:
        raise InvalidInputError("--labels needs --eval DATA (the samples they label)")
    if args.backend == "all" and (args.save_outputs or args.against):
        raise InvalidInputError("--save-outputs and --against take one --backend")
    if args.cluster is not None:
        from quantemu.simulate.cluster import check_spec

        check_spec(args.cluster)
        if args.save_outputs or args.against:
            raise InvalidInputError(
                "--cluster keeps the codes on its workers: run --save-outputs and --against "
                "without --cluster"
            )
    if args.ranges is not None and args.calib is not None:
        raise InvalidInputError(
            "--ranges replaces calibration: give the data to evaluate with --eval DATA, not --calib"
        )
    if args.ranges is not None and args.eval is None and args.model != DEMO:
        raise InvalidInputError("--ranges needs --eval DATA (the samples to simulate)")
    check_output_file(args.report, "--report")
    check_output_file(args.json, "--json")
    check_output_file(args.save_outputs, "--save-outputs")
    if args.report:
        from quantemu.report import require_matplotlib

        require_matplotlib()
    # With --against, BACKEND.KEY=VALUE may name either backend; KEY=VALUE goes to both.
    options = parse_options(args.option, [*backends, *([args.against] if args.against else [])],
                            args.isa)  # fmt: skip
    return check_options(options)  # typed once, before anything is calibrated


def _check_files(args: argparse.Namespace) -> None:
    """Every input file exists and is what its name says (headers only), before any loading."""
    check_input_file(args.calib, "--calib")
    if not _lazy_eval(args):
        check_input_file(args.eval, "--eval")
    check_input_file(args.ranges, "--ranges")
    if args.labels is not None and Path(args.labels).suffix in (".npy", ".npz"):
        check_input_file(args.labels, "--labels")


def _calibration_data(args: argparse.Namespace, session: Session):
    """The --calib data; the demo's calibration split; or None where none is needed (a
    pre-quantized model, --ranges, a pipeline without calibration), else a usage error."""
    if args.calib is not None and multi_input(session.loaded):
        return load_feeds(args.calib, args.calib_key, f"--calib {args.calib}", session.loaded)
    if args.calib is not None:
        return load_array(args.calib, args.calib_key, f"--calib {args.calib}")
    if args.model == DEMO and args.ranges is None:
        return demo_split("calib")[0]
    if not session.needs_data:
        if args.eval is None and args.model != DEMO:
            what = "a pre-quantized model"
            if session.calibration_free:
                what = "a pipeline without calibration (nvdla precision=fp16)"
            raise MissingCalibrationError(
                f"--eval DATA is required: {what} runs without --calib, but then there is no "
                "data to evaluate"
            )
        return None
    raise MissingCalibrationError(
        "--calib DATA is required (or --ranges RANGES.json): the model is not fully "
        "quantized (only the demo model and pre-quantized models such as int8 TFLite files "
        "run without it)"
    )


def _inputs(args: argparse.Namespace, options: dict):
    """The run's session (the model loaded, the options typed, the graph prepared), the
    calibration data (``None`` for a pre-quantized model without --calib, with --ranges, or
    where no selected backend needs calibration), evaluation data and labels (checked)."""
    from quantemu.calibration.shards import open_samples

    shapes = dict(args.input_shape or [])
    graph = load_model(args.model, shapes=shapes)
    ranges = _load_ranges(args.ranges) if args.ranges is not None else None
    session = open_session(
        graph,
        list(options),
        options,
        quiet=args.quiet,
        keep_going=args.backend == "all",
        ranges=ranges,
        observer=args.observer,
        batch_size=args.batch_size,
    )
    calib = _calibration_data(args, session)
    if calib is not None:
        what = f"--calib {args.calib or '(demo calibration split)'}"
        checked = check_data(session.prepare(calib), calib, what)
        calib = checked if multi_input(graph) else calib  # feeds checked once
    labels = None
    if args.eval is not None and multi_input(graph):  # one .npz keyed by input name
        x = load_feeds(args.eval, args.eval_key, f"--eval {args.eval}", graph, [args.labels])
        x = check_data(session.prepare(None), x, f"--eval {args.eval}")
        if args.labels is not None:
            labels = load_labels(args.labels, args.eval, len(x))
    elif args.eval is not None:
        if _lazy_eval(args):  # shards read as needed (by the cluster's workers with --cluster)
            x = open_samples(args.eval, key=args.eval_key)
            first = x.read(0, 1)
        else:
            x = first = load_samples(args.eval, args.eval_key, f"--eval {args.eval}", graph)
        prepared = session.prepare(first if first.dtype.kind == "f" else None)
        check_data(prepared, first, f"--eval {args.eval}")
        if args.labels is not None:
            labels = load_labels(args.labels, args.eval, len(x))
    elif args.model == DEMO:
        x, labels = demo_split("test")
        session.prepare(None)
    else:
        x = calib
    return session, calib, x, labels


def _lazy_eval(args: argparse.Namespace) -> bool:
    """--eval is read lazily: a glob of shards, or any --eval with --cluster (the workers
    read it)."""
    if args.eval is None:
        return False
    return any(c in args.eval for c in "*?[") or args.cluster is not None


def _load_ranges(path: str):
    from quantemu.calibration.ranges import CalibrationRanges

    try:
        return CalibrationRanges.load(path)
    except QuantemuError as exc:
        raise InvalidInputError(
            f"--ranges {path}: {exc} (write it with quantemu calibrate MODEL --out {path})"
        ) from None
