"""Lowering onto tflite2xcore's lib_nn BSO operators (``toolchain=tflite2xcore``): the rule
table is :data:`.rules.RULES`, with one module per layer kind; the context and options are
shared with the xformer path (:mod:`quantemu.backends.xs3.lower`)."""
