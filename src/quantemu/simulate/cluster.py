"""Connecting to a Dask cluster from a ``--cluster`` spec (``quantemu run ... --cluster SPEC``).

``local:N`` starts a ``LocalCluster`` of ``N`` worker processes (one thread each) for the
duration of the block and stops it afterwards; ``tcp://host:port`` (or any address Dask takes)
connects to a running scheduler, whose workers the user started (``dask scheduler``,
``dask worker tcp://host:8786``). Dask comes with the ``quantemu[distributed]`` extra.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from quantemu.errors import InvalidInputError
from quantemu.simulate.distributed import ClusterError

LOCAL = re.compile(r"local:(\d+)$")


def _distributed():
    try:
        import distributed  # noqa: PLC0415 (the distributed extra)
    except ImportError as exc:
        raise InvalidInputError(
            "--cluster needs Dask: pip install 'quantemu[distributed]'"
        ) from exc
    return distributed


def check_spec(spec: str) -> None:
    """A clear error for a spec that is neither ``local:N`` nor a scheduler address."""
    match = LOCAL.match(spec)
    if match is not None:
        if int(match.group(1)) < 1:
            raise InvalidInputError(f"--cluster {spec}: local:N needs N >= 1 worker processes")
        return
    if "://" not in spec:
        raise InvalidInputError(
            f"--cluster {spec!r}: give local:N (N worker processes on this machine) or a "
            "scheduler address such as tcp://host:8786"
        )


def connect(spec: str, *, timeout: float = 10):
    """A ``Client`` of the scheduler at ``spec`` (an address), or a clear error."""
    distributed = _distributed()
    try:
        return distributed.Client(spec, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ClusterError(
            f"cannot reach the scheduler at {spec} within {timeout:g} s ({exc}); start it "
            "(dask scheduler) and its workers (dask worker ADDRESS), or check the address"
        ) from exc


@contextlib.contextmanager
def cluster(spec: str) -> Iterator:
    """A ``Client`` for ``spec`` for the duration of the block (a local cluster is stopped
    afterwards)."""
    check_spec(spec)
    match = LOCAL.match(spec)
    if match is None:
        client = connect(spec)
        try:
            yield client
        finally:
            client.close()
        return
    distributed = _distributed()
    with (
        distributed.LocalCluster(
            n_workers=int(match.group(1)),
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
        ) as local,
        distributed.Client(local) as client,
    ):
        yield client
