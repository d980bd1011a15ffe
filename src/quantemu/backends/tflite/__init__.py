"""TFLite's int8 reference kernels, bit for bit: LiteRT's ``BUILTIN_REF`` kernels and
TFLite-Micro's, with the parameters their ``Prepare`` functions derive from the float32 scales
(:mod:`.params`). Activations are NCHW integer codes, convolution weights OIHW; see README.md.
"""

from quantemu.backends.registry import BackendSpec
from quantemu.backends.tflite.lower import Options, header, lower
from quantemu.backends.tflite.lower.decompose import decompose_for_tf_converter

#: The backend's registration (:mod:`quantemu.backends.catalog` registers it).
BACKEND = BackendSpec(
    name="tflite",
    target="TFLite int8 reference kernels (LiteRT BUILTIN_REF, TFLite-Micro)",
    scheme="the model's own int8 quantization, else TensorFlow's converter (per-channel weights)",
    options=Options,
    lower=lower,
    header=header,
    prepare=lambda graph, options: decompose_for_tf_converter(graph),
)

__all__ = ["BACKEND"]
