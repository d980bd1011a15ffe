"""Validation of the data at every entry: ``run``, ``run_feeds``, ``evaluate``, ``calibrate``.

It lives in the graph layer (it knows tensor infos and initializers, nothing above) so that
calibration and simulation share it.

Every check raises one :class:`~quantemu.errors.InvalidInputError` that names the input, the
first offending index and the remedy. The checks are vectorized: the whole array is tested at
once (``np.isfinite(x).all()``), and the offending index is searched for only on failure.

Non-finite values (NaN, +Inf, -Inf) are refused on purpose. A target's input quantization would
turn them into codes (NaN to an arbitrary code, +-Inf saturated to the code range) without any
trace, and the float reference would propagate them: neither number means anything. quantemu
does not emulate a target's handling of special values; clean the data first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from quantemu.errors import InvalidInputError

NON_FINITE_REMEDY = (
    "quantemu refuses NaN and +-Inf inputs (a target's input quantization would turn them into "
    "codes silently); clean the data first, e.g. np.nan_to_num(x, nan=0.0, posinf=M, neginf=-M) "
    "with M the largest value the model expects, or drop those samples"
)

#: Operators whose initializers are weights (a non-finite value there is a broken model). Other
#: initializers may hold -Inf on purpose (attention masks, Clip bounds).
WEIGHT_OPS = frozenset(
    {
        "Conv",
        "ConvTranspose",
        "Gemm",
        "MatMul",
        "BatchNormalization",
        "InstanceNormalization",
        "LayerNormalization",
        "PRelu",
    }
)


def as_array(value, name: str, where: str = "input") -> np.ndarray:
    """``value`` as a NumPy array, or a clear error for ragged or non-numeric data."""
    what = f"{where} {name!r}" if where else repr(name)
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise InvalidInputError(
            f"{what} is not a rectangular array ({exc}); pass one NumPy array with "
            "the samples along axis 0"
        ) from None
    if array.dtype.kind not in "biuf":
        raise InvalidInputError(
            f"{what} has dtype {array.dtype} ({type(value).__name__}); pass a numeric "
            "NumPy array, e.g. np.asarray(x, dtype=np.float32), normalized as the model expects"
        )
    return array


def index_text(index: tuple[int, ...]) -> str:
    """``sample 3, element (0, 2, 5)`` for an index into a batch-first array."""
    if not index:
        return "the value"
    if len(index) == 1:
        return f"sample {index[0]}"
    return f"sample {index[0]}, element {tuple(int(i) for i in index[1:])}"


def _special(value: float) -> str:
    if np.isnan(value):
        return "NaN"
    if np.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value!r} (beyond float32's range: it becomes {'+' if value > 0 else '-'}Inf)"


def check_finite(
    x: np.ndarray, name: str, *, where: str = "input", offset: int = 0, original=None
) -> None:
    """Raise for the first NaN or +-Inf of float ``x`` (``offset``: index of its first sample;
    ``original``: the data before a cast to float32, whose value is quoted)."""
    if x.dtype.kind != "f":
        return
    finite = np.isfinite(x)
    if finite.all():
        return
    flat = int(np.argmin(finite.reshape(-1)))
    index = tuple(int(i) for i in np.unravel_index(flat, x.shape))
    value = (original if original is not None else x)[index]
    count = int(finite.size - np.count_nonzero(finite))
    shifted = (index[0] + offset, *index[1:]) if index else index
    raise InvalidInputError(
        f"{where} {name!r}: {index_text(shifted)} is {_special(float(value))} ({count} "
        f"non-finite value(s) in this data); {NON_FINITE_REMEDY}"
    )


def check_samples(x: np.ndarray, name: str, *, where: str = "input") -> None:
    """Raise for data with no sample axis or zero samples."""
    if x.ndim < 1 or x.shape[0] == 0:
        raise InvalidInputError(
            f"{where} {name!r} holds no samples (shape {tuple(x.shape)}); pass at least one "
            "sample, batch first"
        )


def _shape_text(shape) -> str:
    return "(" + ", ".join("N" if i == 0 else str(d) for i, d in enumerate(shape)) + ")"


def check_shape(x: np.ndarray, name: str, expected: Sequence, *, batch: bool = False) -> None:
    """``x`` must have the rank of ``expected`` and its fixed sizes (dimension 0 too if
    ``batch``); symbolic dimensions take any size."""
    fixed = [(i, d) for i, d in enumerate(expected) if isinstance(d, int) and (batch or i > 0)]
    if x.ndim != len(expected) or any(x.shape[i] != d for i, d in fixed):
        raise InvalidInputError(
            f"input {name!r}: expected shape {_shape_text(expected)}, got {tuple(x.shape)}; "
            "pass the samples batch first in the model's layout (e.g. NCHW for ONNX, NHWC for "
            "TFLite)"
        )


def float32_checked(x: np.ndarray, name: str, *, where: str = "input") -> np.ndarray:
    """Float ``x`` as float32, refusing values that are, or become, non-finite."""
    with np.errstate(over="ignore"):  # an overflow becomes +-Inf, which is reported below
        cast = x.astype(np.float32, copy=False)
    check_finite(cast, name, where=where, original=x)
    return cast


def check_feeds(graph, feeds) -> dict[str, object]:
    """``run_feeds``' ``{input name: array}``: names, dtypes, shapes, samples and values.

    A :class:`~quantemu.program.QTensor` (integer codes with their quantization) passes as is
    (recognized by its ``codes`` and ``encoding``: the program layer lies above this one).
    """
    names = [info.name for info in graph.inputs]
    if not isinstance(feeds, Mapping):
        raise InvalidInputError(
            f"run_feeds takes a dict {{input name: array}}, got {type(feeds).__name__}; the "
            f"model's inputs: {', '.join(names)} (run(x) takes one array for one input)"
        )
    unknown = [str(k) for k in feeds if k not in names]
    missing = [n for n in names if n not in feeds]
    if unknown or missing:
        raise InvalidInputError(
            f"run_feeds: unknown input name(s) {unknown}, missing {missing}; the model's inputs "
            f"are {', '.join(map(repr, names))}"
        )
    checked: dict[str, object] = {}
    for info in graph.inputs:
        feed = feeds[info.name]
        if hasattr(feed, "codes") and hasattr(feed, "encoding"):
            checked[info.name] = feed
            continue
        x = as_array(feed, info.name)
        if x.dtype.kind != "f":
            raise InvalidInputError(
                f"input {info.name!r} has dtype {x.dtype}; pass float data as the float model "
                "takes it, or a QTensor of the model's own input codes"
            )
        check_shape(x, info.name, info.shape, batch=True)
        check_samples(x, info.name)
        checked[info.name] = float32_checked(x, info.name)
    return checked


def classes_of(output: np.ndarray) -> int | None:
    """The class count of a classifier's ``(N, classes)`` output; ``None`` for any other."""
    if output.ndim == 2 and output.shape[1] >= 2:
        return int(output.shape[1])
    return None


def static_classes(graph) -> int | bool | None:
    """From the graph: the class count, ``None`` (not a classifier) or ``True`` (a 2-D output
    whose class count is symbolic: known after the first batch)."""
    shape = graph.tensors[graph.outputs[0]].shape
    if len(shape) != 2:
        return None
    if isinstance(shape[1], int):
        return shape[1] if shape[1] >= 2 else None
    return True


def not_classifier_text(output: str, shape) -> str:
    """Why top-1 and agreement are not computed for ``output``."""
    return (
        f"none: output {output!r} has shape {tuple(shape)}, not (N, classes) class scores; "
        "top-1 accuracy and agreement are not computed (compare the per-layer statistics)"
    )


def check_labels(labels, samples: int) -> np.ndarray | None:
    """``labels``: one integer class per sample (``None`` passes)."""
    if labels is None:
        return None
    labels = as_array(labels, "labels", where="")
    if labels.ndim == 2 and labels.shape[0] == samples and labels.shape[1] > 1:
        raise InvalidInputError(
            f"labels have shape {labels.shape} (one-hot or scores?); expected one integer class "
            f"per sample ({samples}): pass labels.argmax(axis=1)"
        )
    if labels.ndim != 1 or labels.shape[0] != samples:
        raise InvalidInputError(
            f"labels must be a 1-D integer array with one label per sample ({samples}), got "
            f"shape {labels.shape}; pass exactly one class index per evaluated sample"
        )
    if labels.dtype.kind == "f":
        whole = np.isfinite(labels) & (labels == np.round(labels))
        if whole.all():
            raise InvalidInputError(
                f"labels have dtype {labels.dtype}; class labels are integers: pass "
                "labels.astype(np.int64)"
            )
        first = int(np.argmin(whole))
        raise InvalidInputError(
            f"labels: label {first} is {float(labels[first])!r}, not an integer class index; "
            "pass one integer class index per sample"
        )
    if labels.dtype.kind not in "iu":
        raise InvalidInputError(
            f"labels have dtype {labels.dtype}; pass integer class indices (np.int64)"
        )
    return labels


def check_label_range(labels: np.ndarray | None, classes: int | None, output: str, shape) -> None:
    """Every label must be a class of the ``(N, classes)`` output ``output``."""
    if labels is None:
        return
    if classes is None:
        raise InvalidInputError(
            f"labels were given, but output {output!r} has shape {tuple(shape)}, not (N, "
            "classes) class scores: top-1 accuracy needs a classifier; evaluate without labels"
        )
    bad = (labels < 0) | (labels >= classes)
    if bad.any():
        first = int(np.argmax(bad))
        raise InvalidInputError(
            f"labels: label {first} is {int(labels[first])}, outside the {classes} classes "
            f"(0..{classes - 1}) of output {output!r} ({int(np.count_nonzero(bad))} such "
            "label(s)); pass class indices from 0 to classes - 1 in the model's class order"
        )


def check_weights(graph) -> None:
    """Refuse a model whose weights hold NaN (any initializer) or +-Inf (a weight operand)."""
    weights = {name for node in graph.nodes if node.op_type in WEIGHT_OPS for name in node.inputs}
    for name, initializer in graph.initializers.items():
        value = np.asarray(initializer)
        if value.dtype.kind != "f" or value.size == 0:
            continue
        bad = ~np.isfinite(value) if name in weights else np.isnan(value)
        if not bad.any():
            continue
        flat = int(np.argmax(bad.reshape(-1)))
        index = tuple(int(i) for i in np.unravel_index(flat, value.shape))
        raise InvalidInputError(
            f"the model's weights contain {_special(float(value[index]))} at tensor {name!r} "
            f"index {index} ({int(np.count_nonzero(bad))} non-finite value(s)); fix the model "
            "(re-export it from a checkpoint whose weights are finite)"
        )
