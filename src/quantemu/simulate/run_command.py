"""``quantemu run MODEL --backend B --calib DATA``: simulate a model on a target, report the error.

Exit status: 0 on success; 1 when the model, the data or a backend cannot be used (the message
says why); 2 for usage errors (bad options, an output file that cannot be written, the HTML
report without matplotlib).
"""

# Everything beyond argparse is imported when the command runs, so that `quantemu` starts quickly
# whichever subcommand is used.
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from quantemu._argtypes import positive_int
from quantemu.backends.registry import known_backends
from quantemu.calibration.observers import OBSERVERS
from quantemu.errors import InvalidInputError, QuantemuError

if TYPE_CHECKING:
    from rich.console import Console

    from quantemu.graph import Graph
    from quantemu.simulate.evaluate import Evaluation

USAGE_ERROR = 2
INPUT_ERROR = 1

#: Keys of a labels .npz file tried in order when it holds several arrays.
LABEL_KEYS = ("y", "labels", "label", "targets")

_DESCRIPTION = """\
Quantize MODEL for an inference target the way the target's toolchain does, run it with the
target's exact integer arithmetic, and compare it layer by layer with the float model: SQNR,
cosine, error in output LSBs, every counter the target keeps (accumulator and output saturation,
pair saturation, LUT under/overflow), and top-1 accuracy when labels are given.

MODEL is a .onnx file or 'demo' (the built-in digits CNN; for it --calib defaults to the bundled
calibration split and --eval/--labels to the bundled test split).

DATA (--calib, --eval) is a .npy file or a .npz file (--calib-key/--eval-key select the array;
default: the only array, or the first of x, inputs, input, images, data) holding float samples
along axis 0, normalized as the model expects. Without --eval the calibration data is evaluated.

LABELS is a .npy file of integer class labels (one per --eval sample), a .npz file (its only
array, or the first of y, labels, label, targets), or the name of an array inside the --eval .npz
(e.g. --labels y).

--option KEY=VALUE passes an option to the backends' lowering (repeatable; VALUE is read as an
int, a float, true/false, or else a string); BACKEND.KEY=VALUE passes it to one backend only.
--isa ISA is isa=ISA for the selected backends that have an ISA choice (onednn: avx2,
avx512_core, avx512_core_vnni, ...). With --backend all, every backend runs and a comparison
table follows.

--report writes one self-contained HTML file (every selected backend in it; needs matplotlib:
pip install 'quantemu[report]'). --json writes strict JSON; a non-finite number (the SQNR of a
layer equal to the float model is +inf) is written as the string "inf", "-inf" or "nan"."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``run`` subcommand; its ``run`` default is :func:`run`."""
    p = subparsers.add_parser(
        "run",
        help="simulate a model bit-exactly on a target and report per-layer error",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", metavar="MODEL", help="a .onnx file, or 'demo'")
    p.add_argument(
        "--backend",
        required=True,
        choices=[*known_backends(), "all"],
        help="the target to simulate, or all of them",
    )
    p.add_argument("--isa", help="instruction set, for backends that have a choice (onednn)")
    p.add_argument("--calib", metavar="DATA", help="calibration data (.npy or .npz)")
    p.add_argument("--calib-key", metavar="KEY", help="the array to use in the --calib .npz")
    p.add_argument("--eval", metavar="DATA", help="evaluation data (default: the --calib data)")
    p.add_argument("--eval-key", metavar="KEY", help="the array to use in the --eval .npz")
    p.add_argument("--labels", metavar="LABELS", help=".npy/.npz file, or a key of --eval .npz")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a lowering option, or BACKEND.KEY=VALUE (repeatable)",
    )
    p.add_argument("--observer", choices=OBSERVERS, default="minmax", help="default: minmax")
    p.add_argument("--report", metavar="FILE.html", help="write the HTML report (matplotlib)")
    p.add_argument("--json", metavar="FILE.json", help="write the results as JSON (- for stdout)")
    p.add_argument("--batch-size", type=positive_int, default=64, metavar="N", help="default 64")
    p.add_argument(
        "--no-layers", action="store_true", help="print the summary without the per-layer table"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars or status lines")
    p.set_defaults(run=run)
    return p


# -- options ------------------------------------------------------------------------------------


def parse_value(text: str) -> Any:
    """``--option`` values: int, float, ``true``/``false``, or the string itself.

    >>> [parse_value(t) for t in ("3", "-1.5", "true", "False", "avx2")]
    [3, -1.5, True, False, 'avx2']
    """
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_options(
    texts: Sequence[str], backends: Sequence[str], isa: str | None
) -> dict[str, dict[str, Any]]:
    """``{backend: {key: value}}`` from ``--option`` texts and ``--isa`` (see the help)."""
    options: dict[str, dict[str, Any]] = {b: {} for b in backends}
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise InvalidInputError(
                f"--option {text!r}: expected KEY=VALUE or BACKEND.KEY=VALUE (e.g. isa=avx2)"
            )
        scope, dot, name = key.rpartition(".")
        targets = backends
        if dot:
            if scope not in known_backends():
                raise InvalidInputError(
                    f"--option {text!r}: {scope!r} is not a backend; backends: "
                    f"{', '.join(known_backends())}"
                )
            if scope not in backends:
                raise InvalidInputError(
                    f"--option {text!r} is for {scope}, which is not selected "
                    f"(--backend {' '.join(backends)})"
                )
            targets = [scope]
        for backend in targets:
            options[backend][name] = parse_value(value)
    if isa is not None:
        from quantemu.backends.registry import backend_spec

        takers = [b for b in backends if "isa" in backend_spec(b).options.field_names()]
        if not takers:
            raise InvalidInputError(
                f"--isa {isa}: backend {', '.join(backends)} has no ISA choice; --isa applies to "
                "onednn (use --option KEY=VALUE for other lowering options)"
            )
        for backend in takers:
            options[backend]["isa"] = isa
    return options


def _lowering(backend: str):
    from quantemu.backends.registry import backend_spec

    return backend_spec(backend)


# -- data ---------------------------------------------------------------------------------------


def load_array(source: Any, key: str | None, what: str) -> np.ndarray:
    """All samples of a dataset (``.npy``/``.npz`` path or array) as one float32 array."""
    from quantemu.calibration.datasets import load_dataset

    try:
        dataset = load_dataset(source, key=key)
        batch = next(iter(dataset.batches(max(1, len(dataset)))))
    except QuantemuError as exc:
        raise InvalidInputError(f"{what}: {exc}") from None
    if isinstance(batch, dict):
        raise InvalidInputError(f"{what}: quantemu run evaluates single-input models")
    return batch


def load_labels(labels: str, eval_path: str | None, samples: int) -> np.ndarray:
    """Labels from a .npy/.npz file or a key of the --eval .npz (see the command's help)."""
    path = Path(labels)
    if path.suffix in (".npy", ".npz") or path.is_file():
        if not path.is_file():
            raise InvalidInputError(f"--labels {labels}: the file does not exist")
        array = _read_labels_file(path)
    elif eval_path is not None and Path(eval_path).suffix == ".npz":
        array = _npz_key(Path(eval_path), labels, "--labels")
    else:
        raise InvalidInputError(
            f"--labels {labels!r} is neither a .npy/.npz file nor the name of an array in an "
            f"--eval .npz file (--eval {eval_path or 'not given'})"
        )
    array = np.asarray(array)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.dtype.kind not in "iu" or array.ndim != 1 or array.shape[0] != samples:
        raise InvalidInputError(
            f"--labels {labels}: expected {samples} integer class labels (one per --eval "
            f"sample), got dtype {array.dtype} shape {array.shape}"
        )
    return array


def _read_labels_file(path: Path) -> np.ndarray:
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"--labels {path}: cannot read it: {exc}") from None
    if path.suffix != ".npz" and isinstance(loaded, np.ndarray):
        return loaded
    with loaded as archive:
        keys = list(archive.keys())
        key = keys[0] if len(keys) == 1 else next((k for k in LABEL_KEYS if k in keys), None)
        if key is None:
            raise InvalidInputError(
                f"--labels {path}: none of {', '.join(LABEL_KEYS)} is in the archive; its "
                f"arrays: {', '.join(keys) or 'none'} (pass ARCHIVE.npz with one array, or "
                "name the key with --labels KEY and --eval ARCHIVE.npz)"
            )
        return archive[key]


def _npz_key(path: Path, key: str, what: str) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as archive:
            if key not in archive:
                raise InvalidInputError(
                    f"{what} {key!r}: no array {key!r} in {path}; its arrays: "
                    f"{', '.join(archive.keys())}"
                )
            return archive[key]
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{what}: cannot read {path}: {exc}") from None


def check_data(graph: Graph, x: np.ndarray, what: str) -> None:
    """A clear error when ``x`` does not fit the model's single input (dtype, shape)."""
    from quantemu.graph.executor import bind_inputs

    if len(graph.inputs) != 1:
        raise InvalidInputError(
            f"the model has {len(graph.inputs)} inputs; quantemu run takes single-input models "
            "(use the Python API, Program.run_feeds, for others)"
        )
    try:
        bind_inputs(graph, x[:1])
    except QuantemuError as exc:
        raise InvalidInputError(f"{what}: {exc}") from None


# -- running ------------------------------------------------------------------------------------


@contextlib.contextmanager
def progress_bar(enabled: bool, description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A transient rich progress bar on stderr; yields ``advance(n)`` (a no-op when disabled)."""
    if not enabled:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


@dataclass
class Outcome:
    """What :func:`simulate` produced: evaluations, timings and per-backend errors."""

    backends: list[str] = field(default_factory=list)  # in the order they were asked for
    evaluations: list[Evaluation] = field(default_factory=list)
    timings: dict[str, tuple[float, float]] = field(default_factory=dict)  # compile s, eval s
    errors: dict[str, str] = field(default_factory=dict)


def simulate(
    graph: Graph,
    backends: Sequence[str],
    calib: np.ndarray,
    x: np.ndarray,
    labels: np.ndarray | None,
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    observer: str = "minmax",
    batch_size: int = 64,
    progress: bool = False,
    keep_going: bool = False,
    status: Console | None = None,
) -> Outcome:
    """Calibrate ``graph`` once, then compile and evaluate it on every backend.

    With ``keep_going`` a backend that fails is recorded in ``Outcome.errors`` and the others
    still run; otherwise the error propagates.
    """
    from quantemu.calibration.api import calibrate
    from quantemu.simulate.compile import compile_model

    ranges = calibrate(graph, calib, observer=observer, batch_size=batch_size, progress=progress)
    outcome = Outcome(backends=list(backends))
    for backend in backends:
        try:
            start = time.perf_counter()
            program = compile_model(
                graph, backend, None, calibration=ranges, **(options or {}).get(backend, {})
            )
            compiled = time.perf_counter()
            with progress_bar(progress, f"simulating on {backend}", x.shape[0]) as advance:
                evaluation = program.evaluate(x, labels, batch_size=batch_size, on_batch=advance)
            done = time.perf_counter()
        except QuantemuError as exc:
            if not keep_going:
                raise
            outcome.errors[backend] = str(exc)  # reported with the comparison table
            continue
        outcome.evaluations.append(evaluation)
        outcome.timings[backend] = (compiled - start, done - compiled)
        if status is not None:
            status.print(
                f"{backend}: compiled in {compiled - start:.2f} s, simulated "
                f"{x.shape[0]:,} samples in {done - compiled:.2f} s",
                highlight=False,
            )
    return outcome


def write_outputs(
    outcome: Outcome,
    *,
    report: str | None,
    json_path: str | None,
    model: str,
    status: Console | None,
) -> None:
    """Write the HTML report and the JSON document when asked for."""
    from quantemu.report import write_html, write_json

    if report and outcome.evaluations:
        write_html(outcome.evaluations, report, model=model)
        if status is not None:
            status.print(f"wrote the HTML report to {report}", highlight=False)
    if json_path:
        write_json(outcome.evaluations, json_path, model=model, errors=outcome.errors)
        if status is not None and json_path != "-":
            status.print(f"wrote the JSON results to {json_path}", highlight=False)


def stderr_console(quiet: bool) -> Console | None:
    """The console for status lines (``None`` when quiet)."""
    if quiet:
        return None
    from rich.console import Console

    return Console(stderr=True)


def fail(command: str, message: str, code: int) -> int:
    """Print ``quantemu COMMAND: error: MESSAGE`` on stderr; return ``code``."""
    print(f"quantemu {command}: error: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    """Simulate as ``args`` asks; return the exit status."""
    if args.calib is None and args.model != "demo":
        return fail("run", "--calib DATA is required (except for the demo model)", USAGE_ERROR)
    if args.labels is not None and args.eval is None:
        return fail("run", "--labels needs --eval DATA (the samples they label)", USAGE_ERROR)
    backends = known_backends() if args.backend == "all" else [args.backend]
    try:
        if args.report:
            from quantemu.report import require_matplotlib

            require_matplotlib()
        options = parse_options(args.option, backends, args.isa)
    except QuantemuError as exc:
        return fail("run", str(exc), USAGE_ERROR)
    console = _stdout_console()
    status = stderr_console(args.quiet)
    progress = not args.quiet and sys.stderr.isatty()
    try:
        if args.backend != "all":
            _lowering(args.backend)  # a backend that cannot lower: fail before calibrating
        graph, calib, x, labels = _inputs(args)
        outcome = simulate(
            graph,
            backends,
            calib,
            x,
            labels,
            options=options,
            observer=args.observer,
            batch_size=args.batch_size,
            progress=progress,
            keep_going=args.backend == "all",
            status=status,
        )
    except QuantemuError as exc:
        return fail("run", str(exc), INPUT_ERROR)
    if args.json != "-":  # stdout holds the JSON document then
        _print(outcome, console, layers=not args.no_layers, compare=args.backend == "all")
    model = "demo" if args.model == "demo" else Path(args.model).name
    try:
        write_outputs(outcome, report=args.report, json_path=args.json, model=model, status=status)
    except OSError as exc:
        return fail("run", f"cannot write {exc.filename}: {exc.strerror}", USAGE_ERROR)
    return INPUT_ERROR if outcome.errors else 0


def _stdout_console() -> Console:
    from quantemu.graph.command import make_console

    return make_console()


def _inputs(args: argparse.Namespace):
    """The optimized graph, calibration data, evaluation data and labels (checked)."""
    from quantemu.graph.command import resolve_model
    from quantemu.graph.onnx_import import load_onnx
    from quantemu.graph.passes import optimize

    graph = optimize(load_onnx(resolve_model(args.model)))
    demo = args.model == "demo"
    if args.calib is None:
        from quantemu.data import demo_dataset

        calib = demo_dataset("calib")[0]
    else:
        calib = load_array(args.calib, args.calib_key, f"--calib {args.calib}")
    check_data(graph, calib, f"--calib {args.calib or '(demo calibration split)'}")
    labels = None
    if args.eval is not None:
        x = load_array(args.eval, args.eval_key, f"--eval {args.eval}")
        check_data(graph, x, f"--eval {args.eval}")
        if args.labels is not None:
            labels = load_labels(args.labels, args.eval, x.shape[0])
    elif demo:
        from quantemu.data import demo_dataset

        x, labels = demo_dataset("test")
    else:
        x = calib
    return graph, calib, x, labels


def _print(outcome: Outcome, console: Console, *, layers: bool, compare: bool) -> None:
    from quantemu.report import print_comparison, print_evaluation

    for evaluation in outcome.evaluations:
        print_evaluation(evaluation, console, layers=layers)
    if compare:
        print_comparison(
            outcome.evaluations,
            console,
            timings=outcome.timings,
            errors=outcome.errors,
            order=outcome.backends,
        )
