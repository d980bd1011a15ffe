"""Catalog cases of evaluation at scale (shards, clusters) and of quantization-aware training."""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.simulate.distributed import ClusterError
from tests.catalog.support import Bad, CliRefused, cli, npy, program, tmp, x

E, U, C = InvalidInputError, UnsupportedError, CliRefused


def _shards(*shapes) -> list[str]:
    return [npy(f"shard{i}.npy", np.zeros(s, np.float32)) for i, s in enumerate(shapes)]


def _npz_two() -> str:
    path = tmp() / "two.npz"
    np.savez(path, p=np.zeros((2, 1, 8, 8), np.float32), q=np.zeros((2, 1, 8, 8), np.float32))
    return str(path)


def _connect():
    from quantemu.simulate.cluster import connect

    return connect("tcp://127.0.0.1:9", timeout=1)


def _qat(*args, **kwargs):
    import quantemu.torch as qt

    return qt.prepare(*args, **kwargs)


def _module():
    import torch

    return torch.nn.Linear(2, 2)


def _weight():
    from quantemu.data import demo_model_path

    return _qat(demo_model_path(), "nvdla", x(16)).weight("logits")


SHARDS = (
    Bad("shards_shapes", "evaluation shards holding samples of different shapes",
        lambda: program().evaluate(_shards((2, 1, 8, 8), (2, 1, 4, 4))), E,
        ("different shapes", "batch first")),
    Bad("shards_glob_empty", "a glob of shards that matches no file",
        lambda: program().evaluate(str(tmp() / "nothing-*.npy")), E, ("matched none",)),
    Bad("shards_missing", "a shard that does not exist",
        lambda: program().evaluate([str(tmp() / "missing.npy")]), E, ("does not exist",)),
    Bad("shards_npz_key", "an .npz shard with several arrays and no key",
        lambda: program().evaluate([_npz_two()]), E, ("['p', 'q']", "name the data array")),
    Bad("cluster_unreachable", "a scheduler that cannot be reached",
        _connect, ClusterError,
        ("cannot reach the scheduler at tcp://127.0.0.1:9", "dask scheduler")),
    Bad("cli_cluster_spec", "a --cluster that is neither local:N nor an address",
        lambda: cli("run", "demo", "--backend", "xs3", "-q", "--cluster", "here"), C,
        ("give local:N", "tcp://host:8786"), 2),
    Bad("cli_cluster_outputs", "--cluster with --save-outputs (the codes stay on the workers)",
        lambda: cli("run", "demo", "--backend", "xs3", "-q", "--cluster", "local:2",
                    "--save-outputs", str(tmp() / "o.npz")), C,
        ("keeps the codes on its workers",), 2),
)  # fmt: skip

QAT = (
    Bad("qat_module_example", "a torch.nn.Module without an example input",
        lambda: _qat(_module(), "xs3", "calib.npy"), E, ("example input", "example=")),
    Bad("qat_ranges_mode", "an unknown ranges= mode",
        lambda: _qat("demo.onnx", "nvdla", x(16), ranges="lsq"), E,
        ("ranges = 'lsq'", "'observed'", "'learned'")),
    Bad("qat_weight", "asking for a weight the model does not train",
        _weight, E, ("'logits' is not a trainable weight", "weights:")),
)  # fmt: skip

CASES = (*SHARDS, *QAT)
