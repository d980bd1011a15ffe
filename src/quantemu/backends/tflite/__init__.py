"""TFLite int8: the reference kernels (LiteRT BUILTIN_REF, TFLite-Micro) and the converter's
quantization scheme."""
