"""Model and data loading for the commands: MODEL names, ``.npy``/``.npz`` samples, labels.

MODEL is a ``.onnx`` path or ``demo`` (the built-in digits CNN). DATA is a ``.npy`` file or a
``.npz`` file holding float samples along axis 0 (see :func:`load_array`); for a model with several
inputs, one ``.npz`` keyed by input name (see :func:`load_feeds`). LABELS is a ``.npy``
file, a ``.npz`` file or the name of an array inside the evaluation ``.npz``
(see :func:`load_labels`). Every failure is an :class:`~quantemu.errors.InvalidInputError` whose
message names the option and the file.
"""

# The model importer (onnx) and the data modules are imported when a command runs, so that
# `quantemu` starts quickly whichever subcommand is used.
# ruff: noqa: PLC0415

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from quantemu.errors import InvalidInputError, QuantemuError

if TYPE_CHECKING:
    from quantemu.graph import Graph

#: The MODEL word that names the built-in digits CNN.
DEMO = "demo"

#: Keys of a labels .npz file tried in order when it holds several arrays.
LABEL_KEYS = ("y", "labels", "label", "targets")


def resolve_model(text: str) -> Path:
    """``demo`` names the built-in model; anything else is a path."""
    if text == DEMO:
        from quantemu.data import demo_model_path

        return demo_model_path()
    return Path(text)


def load_model(text: str, *, shapes: dict[str, tuple] | None = None) -> Graph:
    """The model MODEL names, imported as it is (a session optimizes it), its inputs bound to
    ``shapes`` (``--input-shape``) before the import folds shape computations."""
    from quantemu.graph.loading import load_model as load_graph

    return load_graph(resolve_model(text), shapes=shapes)


def demo_split(split: str) -> tuple[np.ndarray, np.ndarray]:
    """The demo model's bundled ``calib`` or ``test`` split: samples and labels."""
    from quantemu.data import demo_dataset

    return demo_dataset(split)


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


def load_samples(source: str, key: str | None, what: str, graph: Graph) -> np.ndarray:
    """Samples for ``--eval``: float data, or the model's own integer input codes.

    Integer data is kept as it is when the model's (single) input is quantized with that dtype
    (an int8 TFLite model takes int8 codes); otherwise it goes through :func:`load_array`, whose
    error says to pass float data.
    """
    path = Path(source)
    if path.suffix in (".npy", ".npz") and path.is_file():
        raw = _raw_array(path, key)
        ov = graph.quant_overrides.get(graph.inputs[0].name) if len(graph.inputs) == 1 else None
        if raw is not None and raw.dtype.kind in "iu" and ov is not None:
            if raw.dtype != np.dtype(ov.dtype):
                raise InvalidInputError(
                    f"{what}: integer data of dtype {raw.dtype}, but the model's input codes are "
                    f"{ov.dtype}; pass {ov.dtype} codes or float data"
                )
            return raw
    return load_array(source, key, what)


def _raw_array(path: Path, key: str | None) -> np.ndarray | None:
    """The array a .npy/.npz file holds (the only one, or ``key``), without conversion."""
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None  # load_array reports it
    if isinstance(loaded, np.ndarray):
        return loaded
    with loaded as archive:
        if key is not None:
            return archive.get(key)
        keys = list(archive.keys())
        return archive[keys[0]] if len(keys) == 1 else None


def load_labels(labels: str, eval_path: str | None, samples: int) -> np.ndarray:
    """Labels from a .npy/.npz file or a key of the --eval .npz (see the module docstring)."""
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


def multi_input(graph: Graph) -> bool:
    """Whether the model has several inputs (its data is a .npz keyed by input name)."""
    return len(graph.inputs) > 1


def load_feeds(source: str, key: str | None, what: str, graph: Graph, leave=()) -> dict:
    """A multi-input model's data: the arrays of a .npz keyed by input name (``leave``: the
    other arrays it may hold, e.g. the --labels key), checked by :func:`check_data`."""
    from quantemu.calibration.datasets import npz_arrays
    from quantemu.calibration.feeds import inputs_text

    option = what.split(maxsplit=1)[0]
    if key is not None:
        raise InvalidInputError(
            f"{what}: the model has {len(graph.inputs)} inputs, fed by the arrays of one .npz "
            f"keyed by input name; {option}-key selects one array: leave it out"
        )
    if Path(source).suffix != ".npz" or any(c in source for c in "*?["):
        raise InvalidInputError(
            f"{what}: the model has {len(graph.inputs)} inputs ({inputs_text(graph)}); give one "
            ".npz file keyed by input name, e.g. numpy.savez(path, **{name: array}) (shards "
            "and .npy files hold one array)"
        )
    try:
        return npz_arrays(source, leave=tuple(leave))
    except QuantemuError as exc:
        raise InvalidInputError(f"{what}: {exc}") from None


def check_data(graph: Graph, x: Any, what: str) -> Any:
    """A clear error when ``x`` does not fit the model's inputs (names, dtype, shape); returns
    the data as the run takes it (a multi-input model's dict as checked feeds).

    Integer codes (see :func:`load_samples`) are checked as their dequantized values.
    """
    from quantemu.graph.executor import bind_inputs

    if isinstance(x, dict) or multi_input(graph):
        from quantemu.calibration.feeds import FeedSamples

        return FeedSamples(graph, x, what)
    if x.dtype.kind in "iu":
        x = x.astype(np.float32)
    try:
        bind_inputs(graph, x[:1])
    except QuantemuError as exc:
        raise InvalidInputError(f"{what}: {exc}") from None
    return x
