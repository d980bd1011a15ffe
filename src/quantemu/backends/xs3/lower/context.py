"""What every XS3 lowering rule shares: the int8 encoding of any tensor, derived once.

XMOS's flow starts from a TFLite int8 model, so :class:`Xs3Context` is the ``tflite`` backend's
context (:class:`~quantemu.backends.tflite.lower.context.TfliteContext`: the model's own
quantization, else TensorFlow's converter rules) with the xs3 options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.xs3.lower.options import Options


@dataclass
class Xs3Context(TfliteContext):
    """The XS3 lowering context (see the module docstring); ``options`` is an :class:`Options`.

    ``absorbed``: nodes xcore-opt fuses into the convolution before them
    (:mod:`quantemu.backends.xs3.xformer.lower.fuse`); their rules only pass the codes on.
    """

    backend: ClassVar[str] = "xs3"
    options: Options
    absorbed: set[str] = field(default_factory=set)
