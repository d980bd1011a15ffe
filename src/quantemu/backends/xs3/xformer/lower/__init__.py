"""Lowering as xcore-opt 1.4.2 builds a model (``toolchain=xformer``, the default): the rule
table is :data:`.rules.RULES`, the tflite backend's TFLite-Micro rules with the operators
xcore-opt rewrites replaced (one module per concept); :mod:`.compiled` runs a model xcore-opt
has already compiled. The context and options are shared with the BSO path
(:mod:`quantemu.backends.xs3.lower`)."""
