"""XMOS's current compiler path (xcore-opt / xmos-ai-tools 1.4.2, lib_nn 0.5): compile-time
parameter derivation and run-time arithmetic of the XC_ int8 ops. See README.md here."""
