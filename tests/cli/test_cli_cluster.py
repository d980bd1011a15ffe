"""quantemu run --cluster: the JSON report is the same as without it (a real LocalCluster of
worker processes, every backend in one run), and bad specs are usage errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("distributed")

from quantemu.cli import main
from quantemu.data import demo_dataset


def test_every_backend_reports_the_same_on_a_local_cluster(tmp_path):
    x, labels = demo_dataset("test")
    np.save(tmp_path / "part-0.npy", x[:150])
    np.save(tmp_path / "part-1.npy", x[150:])
    np.save(tmp_path / "y.npy", labels)
    common = ["run", "demo", "--backend", "all", "--eval", str(tmp_path / "part-*.npy"),
              "--labels", str(tmp_path / "y.npy"), "-q"]  # fmt: skip
    assert main([*common, "--json", str(tmp_path / "one.json")]) == 0
    assert main([*common, "--json", str(tmp_path / "two.json"), "--cluster", "local:2"]) == 0
    one = json.loads((tmp_path / "one.json").read_text())
    two = json.loads((tmp_path / "two.json").read_text())
    assert [e["backend"] for e in two["evaluations"]] == [e["backend"] for e in one["evaluations"]]
    assert len(one["evaluations"]) >= 5 and two == one


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--cluster", "somewhere"], "give local:N"),
        (["--cluster", "local:0"], "N >= 1"),
        (["--cluster", "local:2", "--save-outputs", "o.npz"], "keeps the codes on its workers"),
    ],
)
def test_bad_cluster_use_is_a_usage_error(extra, message, capsys):
    assert main(["run", "demo", "--backend", "nvdla", "-q", *extra]) == 2
    assert message in capsys.readouterr().err
