"""``TfliteCustom``: a custom operator of a TFLite file (XMOS's ``XC_`` ops in a compiled model).

Its attributes carry what the file says: ``custom_code`` (e.g. ``"XC_conv2d_v2"``),
``custom_options`` (the raw flexbuffer bytes), ``output_shapes`` (one shape per output, batch
first, as the file gives them), ``output_dtypes`` and ``batch_input`` (the input whose batch the
outputs take, -1 for none). A backend that
knows the operator decodes the options; the float executor cannot run it, because a compiled
operator has no float meaning of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Attrs, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import data, register


def _infer_custom(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    # The batch follows the first activation input (``batch_input``); an op of constants only
    # (XC_broadcast of a weight) keeps the file's shapes.
    index = node.attrs.get("batch_input", -1)
    source = data(node, infos, index).shape if index >= 0 else ()
    if not source:
        return [tuple(shape) for shape in node.attrs["output_shapes"]]
    return [(source[0], *shape[1:]) if shape else shape for shape in node.attrs["output_shapes"]]


def _run_custom(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    raise UnsupportedError(
        f"custom operator {attrs['custom_code']!r} of a compiled TFLite model has no float "
        "reference; run the int8 model it was compiled from for float comparisons"
    )


register("TfliteCustom", _infer_custom, _run_custom, inputs=(0, 1 << 10))
