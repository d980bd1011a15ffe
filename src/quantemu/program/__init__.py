"""The lowered program: the layer between the backends and the simulator.

Everything a backend produces and everything the simulator runs is defined here, below both:

- :mod:`.encoding`: how a tensor's integer codes map to floats (:class:`Encoding`,
  :class:`LinearEncoding`) and the tensors that flow between layers (:class:`QTensor`);
  :mod:`.float_encoding`: fp16 words (:class:`Fp16Encoding`);
- :mod:`.layer`: :class:`Layer`, whose ``run`` is a template method that checks inputs and
  outputs against their encodings, and :class:`LayerOutput`;
- :mod:`.model`: :class:`LoweredModel` and :func:`run_lowered`;
- :mod:`.options`, :mod:`.lowering`, :mod:`.fallback`: the lowering framework every backend
  shares (typed options, the context, the rule table and driver, the float-fallback layer).

Backends import this package; they never import :mod:`quantemu.simulate`.
"""

from quantemu.program.encoding import Encoding, LinearEncoding, QTensor
from quantemu.program.float_encoding import FP16, Fp16Encoding
from quantemu.program.layer import Layer, LayerError, LayerOutput
from quantemu.program.model import LoweredModel, RunResult, quantize_feeds, run_lowered

__all__ = [
    "FP16",
    "Encoding",
    "Fp16Encoding",
    "Layer",
    "LayerError",
    "LayerOutput",
    "LinearEncoding",
    "LoweredModel",
    "QTensor",
    "RunResult",
    "quantize_feeds",
    "run_lowered",
]
