"""What every command shares for output: exit codes, ``fail``, consoles and progress bars.

Exit codes: 0 success; :data:`INPUT_ERROR` (1) when the model, the data, a backend or a check
cannot be used or fails (the message says why); :data:`USAGE_ERROR` (2) for usage errors.
"""

# rich is imported when a command runs, so that `quantemu --help` starts quickly.
# ruff: noqa: PLC0415

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console

INPUT_ERROR = 1
USAGE_ERROR = 2


def fail(command: str, message: str, code: int) -> int:
    """Print ``quantemu COMMAND: error: MESSAGE`` on stderr; return ``code``."""
    print(f"quantemu {command}: error: {message}", file=sys.stderr)
    return code


def stdout_console() -> Console:
    """A stdout console; wide enough for the tables when stdout is not a terminal."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    return Console(width=160, color_system=None, force_terminal=False)


def stderr_console(quiet: bool) -> Console | None:
    """The console for status lines (``None`` when quiet)."""
    if quiet:
        return None
    from rich.console import Console

    return Console(stderr=True)


def is_tty(stream: TextIO) -> bool:
    """``stream.isatty()``, False for replaced or closed streams (tests, pipes)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def progress_bar(enabled: bool, description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A transient rich progress bar on stderr; yields ``advance(n)`` (a no-op when disabled)."""
    if not enabled:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
