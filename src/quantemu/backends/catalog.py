"""Every backend quantemu ships, registered in one place.

``quantemu.compile``, the CLI (``--backend``, ``--backend all``, ``--isa``, ``inspect --lint``)
and the conformance runner find backends here, through
:func:`~quantemu.backends.registry.backend_spec`. Adding a backend is its package, which defines
``BACKEND`` (a :class:`~quantemu.backends.registry.BackendSpec`), and one entry below.
"""

from quantemu.backends import nnie, nvdla, onednn, tflite, xs3
from quantemu.backends.registry import register_backend

BACKENDS = tuple(
    register_backend(package.BACKEND) for package in (xs3, nvdla, onednn, nnie, tflite)
)
