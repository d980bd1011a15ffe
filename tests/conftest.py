"""Hypothesis profiles: ``ci`` is derandomized (the same examples on every run), ``dev`` is not.

The ``ci`` profile loads when the ``CI`` environment variable is set; select one explicitly with
``pytest --hypothesis-profile=dev``.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=200)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
