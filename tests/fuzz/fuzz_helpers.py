"""The invariant every fuzz test checks, and byte mutations shared by the importer fuzzers.

Invariant: a call returns, or raises a :class:`QuantemuError` with a non-empty message. Any
other exception, or a call running past :data:`LIMIT_S` seconds (SIGALRM), fails the test.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any, TypeVar

from hypothesis import event
from hypothesis import strategies as st

from quantemu.errors import QuantemuError

T = TypeVar("T")

#: Seconds one call may run before it counts as a hang.
LIMIT_S = 20

#: Multiplies every example count, for a long local hunt: QUANTEMU_FUZZ_SCALE=50 pytest tests/fuzz
SCALE = int(os.environ.get("QUANTEMU_FUZZ_SCALE", "1"))


def examples(n: int) -> dict[str, Any]:
    """Settings for ``n`` examples (times SCALE). The profile (tests/conftest.py) decides
    derandomization: the same examples on every run under CI=1. Modest counts keep the whole
    package under a minute on 2 cores; the SIGALRM limit, not a deadline, catches hangs."""
    return {"max_examples": n * SCALE, "deadline": None}


FAST = examples(100)


class Hang(Exception):
    """Raised by the alarm: the call did not finish within LIMIT_S seconds."""


@contextmanager
def time_limit(seconds: int = LIMIT_S):
    def on_alarm(signum, frame):
        raise Hang(f"no result within {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def outcome(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """``fn(*args, **kwargs)``, or None when it raised a QuantemuError with a message."""
    what = getattr(fn, "__name__", "call")
    with time_limit():
        try:
            result = fn(*args, **kwargs)
        except QuantemuError as exc:
            assert str(exc).strip(), f"{type(exc).__name__} without a message"
            event(f"{what}: {type(exc).__name__}")
            return None
    event(f"{what}: result")
    return result


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with a few bytes overwritten, inserted or deleted, or truncated."""
    buf = bytearray(data)
    kind = draw(st.sampled_from(["flip", "flip", "insert", "delete", "truncate", "splice"]))
    if kind == "truncate":
        return bytes(buf[: draw(st.integers(0, max(len(buf) - 1, 0)))])
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, max(len(buf) - 1, 0)))
        if kind == "flip" and buf:
            buf[at] = draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, 0x01])) ^ (
                buf[at] if draw(st.booleans()) else 0
            )
        elif kind == "insert":
            buf[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del buf[at : at + draw(st.integers(1, 16))]
        elif kind == "splice":
            src = draw(st.integers(0, max(len(buf) - 1, 0)))
            buf[at : at + 8] = buf[src : src + 8]
    return bytes(buf)
