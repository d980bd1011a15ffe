"""quantemu: bit-exact emulation of quantized inference targets.

The layers, from the bottom up: :mod:`quantemu.intmath` (exact integer primitives),
:mod:`quantemu.backends` (per-target operators), :mod:`quantemu.conformance` (vectors from real
implementations and the runner that checks the emulation against them).
"""

from quantemu._version import __version__

__all__ = ["__version__"]
