"""Evaluation on a real Dask LocalCluster (worker processes): the same Evaluation, field for
field, as one process, on arrays and on shards the workers read themselves; a worker killed
mid-run changes nothing; an unreachable scheduler is a clear error."""

from __future__ import annotations

import itertools
import os
import signal
import threading

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import quantemu  # noqa: E402
from quantemu.data import demo_dataset, demo_model_path  # noqa: E402
from quantemu.errors import InvalidInputError, QuantemuError  # noqa: E402
from quantemu.simulate.distributed import ClusterError  # noqa: E402

BACKENDS = ["xs3", "nvdla", "onednn", "nnie", "tflite"]


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def data():
    return demo_dataset("test"), demo_dataset("calib")[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_cluster_gives_the_evaluation_of_one_process(client, data, backend):
    (x, labels), calib = data
    program = quantemu.compile(demo_model_path(), backend, calib=calib)
    one = program.evaluate(x, labels, batch_size=50).to_dict()
    seen = []
    many = program.evaluate(x, labels, batch_size=50, client=client, on_batch=seen.append)
    assert many.to_dict() == one
    assert sum(seen) == len(x)


def test_shards_are_read_by_the_workers(client, data, tmp_path):
    """Shards of uneven sizes, a batch straddling two of them: the same as the array."""
    (x, labels), calib = data
    cuts = [0, 70, 71, 200, len(x)]
    for i, (a, b) in enumerate(itertools.pairwise(cuts)):
        if i % 2:
            np.save(tmp_path / f"part-{i}.npy", x[a:b])
        else:
            np.savez(tmp_path / f"part-{i}.npz", x=x[a:b])
    program = quantemu.compile(demo_model_path(), "nvdla", calib=calib)
    want = program.evaluate(x, labels, batch_size=64).to_dict()
    pattern = str(tmp_path / "part-*.np?")
    assert program.evaluate(pattern, labels, batch_size=64).to_dict() == want
    assert program.evaluate(pattern, labels, batch_size=64, client=client).to_dict() == want


def test_a_worker_killed_mid_run_changes_nothing(client, data):
    (x, labels), calib = data
    xs = np.resize(x, (6000, *x.shape[1:]))
    ys = np.resize(labels, 6000)
    program = quantemu.compile(demo_model_path(), "xs3", calib=calib)
    want = program.evaluate(xs, ys, batch_size=100).to_dict()
    pids = list(client.run(os.getpid).values())
    killed = threading.Event()

    def kill_one(done: int) -> None:
        if not killed.is_set():
            killed.set()
            os.kill(pids[0], signal.SIGKILL)

    got = program.evaluate(xs, ys, batch_size=100, client=client, on_batch=kill_one)
    assert killed.is_set()
    assert got.to_dict() == want
    client.wait_for_workers(2, timeout=60)  # the nanny restarted it, for the other tests


def test_unreachable_scheduler_is_a_clear_error():
    from quantemu.simulate.cluster import connect

    with pytest.raises(ClusterError, match=r"cannot reach the scheduler at tcp://127.0.0.1:9"):
        connect("tcp://127.0.0.1:9", timeout=2)


def test_codes_stay_on_the_workers(client, data):
    (x, labels), calib = data
    program = quantemu.compile(demo_model_path(), "nvdla", calib=calib)
    with pytest.raises(InvalidInputError, match="on_result"):
        program.evaluate(x, labels, client=client, on_result=print)
    assert issubclass(ClusterError, QuantemuError)


def test_a_cluster_that_goes_away_is_a_clear_error(data):
    """The scheduler closed mid-run: a ClusterError naming it, no Evaluation."""
    (x, labels), calib = data
    xs, ys = np.resize(x, (20000, *x.shape[1:])), np.resize(labels, 20000)
    program = quantemu.compile(demo_model_path(), "xs3", calib=calib)
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    stopping = threading.Event()

    def stop(done: int) -> None:
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=cluster.close).start()

    with distributed.Client(cluster) as client, pytest.raises(ClusterError, match="went away"):
        program.evaluate(xs, ys, batch_size=50, client=client, on_batch=stop)
    assert stopping.is_set()


def test_an_image_folder_is_read_lazily_locally_and_on_the_cluster(client, data, tmp_path):
    from PIL import Image

    from quantemu.calibration.datasets import ImageFolderDataset, ImageOptions

    (x, labels), calib = data
    for i, image in enumerate(x[:40]):
        Image.fromarray(np.round(image[0] * 255).astype(np.uint8)).save(tmp_path / f"{i:03d}.png")
    folder = ImageFolderDataset(tmp_path, ImageOptions(grayscale=True))
    program = quantemu.compile(demo_model_path(), "tflite", calib=calib)
    want = program.evaluate(folder.read(0, len(folder)), labels[:40], batch_size=16).to_dict()
    assert program.evaluate(folder, labels[:40], batch_size=16).to_dict() == want
    assert program.evaluate(folder, labels[:40], batch_size=16, client=client).to_dict() == want
    assert want["backend_accuracy"] > 0.9  # the images are the digits
