"""What both XS3 toolchain generations' lowerings share: the options (:mod:`.options`), the
context that gives every tensor its TFLite int8 encoding (:mod:`.context`), and ``lower``, which
picks the generation's rule table (:mod:`.toolchains`). The rules and layers are each
generation's own: :mod:`quantemu.backends.xs3.xformer.lower` (xcore-opt, the default) and
:mod:`quantemu.backends.xs3.bso.lower` (tflite2xcore's lib_nn BSO operators).

This package imports nothing on import, so that the variants' rules can import the context
without a circle through it.
"""
