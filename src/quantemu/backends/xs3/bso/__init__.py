"""The older XMOS toolchain generation (tflite2xcore, lib_nn ``a5f0c8b``, 2021): lib_nn's int8
convolution and fully-connected operators with the 7-row Bias-Scale-Offset (BSO) output stage,
bit-exact against XMOS's x86 reference (``conformance/xs3.md``), and the lowering that builds a
model of them (:mod:`.lower`, ``toolchain=tflite2xcore``). The public operators are re-exported
by :mod:`quantemu.backends.xs3`; see its README.md."""
