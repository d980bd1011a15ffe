"""The bundled copy of the public suite, and the tool that keeps it in sync."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import pytest

from quantemu.conformance.reader import Case, read_cases
from quantemu.conformance.suite import BUNDLED_PREFIX, bundled_files, bundled_root

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / ".." / "shared" / "conformance"
needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(),
    reason=f"the shared conformance suite is not checked out beside the repository ({SHARED})",
)


def load_tool():
    spec = importlib.util.spec_from_file_location("sync_vectors", REPO / "tools/sync_vectors.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_shared
def test_bundled_copy_equals_the_shared_suite_and_the_generated_vectors():
    originals = {
        p.relative_to(SHARED).as_posix().removesuffix(".gz"): p
        for pattern in ("*/*.jsonl", "*/*.jsonl.gz")
        for p in SHARED.glob(pattern)
    }
    assert "nvdla-fp16/sdp_fp16.jsonl" in originals
    generated = {
        f"{backend}/{p.name.removesuffix('.gz')}": p
        for backend, entry in load_tool().GENERATED.items()
        for folder, _ in load_tool().generated_pairs(entry)
        for p in folder.glob("*.jsonl.gz")
    }
    assert {"onednn/lstm.jsonl", "onednn/gru.jsonl"} <= set(generated)
    assert {"nvdla-fp16/pdp_avg.jsonl", "nvdla-fp16/pdp_min.jsonl"} <= set(generated)
    bundled = {vf.display.removeprefix(BUNDLED_PREFIX): vf for vf in bundled_files()}
    assert sorted(bundled) == sorted(rel + ".gz" for rel in {**originals, **generated})
    for rel, path in originals.items():
        data = path.read_bytes()
        data = gzip.decompress(data) if path.name.endswith(".gz") else data
        with bundled[rel + ".gz"].source.open("rb") as packed:
            assert gzip.decompress(packed.read()) == data, rel
    for rel, path in generated.items():
        with bundled[rel + ".gz"].source.open("rb") as packed:
            assert gzip.decompress(packed.read()) == gzip.decompress(path.read_bytes()), rel


@needs_shared
def test_sync_tool_check_passes_on_the_repository():
    tool = load_tool()
    assert tool.differences(tool.DEFAULT_DEST, tool.build(tool.DEFAULT_SOURCE)) == []


def test_bundled_suite_is_readable_and_well_formed():
    files = bundled_files()
    assert all(vf.display.startswith(BUNDLED_PREFIX) for vf in files)
    items = list(read_cases(files))
    assert len(items) > 1000
    assert all(isinstance(item, Case) for item in items), [
        item for item in items if not isinstance(item, Case)
    ][:3]
    assert (bundled_root() / "README.md").is_file()


def write_source(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_sync_is_deterministic_and_check_detects_every_kind_of_drift(tmp_path, monkeypatch):
    tool = load_tool()
    monkeypatch.setattr(tool, "GENERATED", {})
    source = write_source(
        tmp_path / "src",
        {"a/x.jsonl": '{"id": 1}\n\n{"id": 2}\n', "b/y.jsonl": "{}\n", "FORMAT.md": "# not copied"},
    )
    dest = tmp_path / "dest"
    first = tool.build(source)
    assert first == tool.build(source)
    assert sorted(first) == ["README.md", "a/x.jsonl.gz", "b/y.jsonl.gz"]
    assert first["a/x.jsonl.gz"][4:8] == b"\0\0\0\0"  # gzip mtime field
    assert "| `a/x.jsonl.gz` | 2 |" in first["README.md"].decode()

    assert tool.main(["--source", str(source), "--dest", str(dest)]) == 0
    assert tool.main(["--source", str(source), "--dest", str(dest), "--check"]) == 0
    assert gzip.decompress((dest / "a/x.jsonl.gz").read_bytes()) == b'{"id": 1}\n\n{"id": 2}\n'

    (source / "a/x.jsonl").write_text('{"id": 3}\n')
    (source / "c").mkdir()
    (source / "c/z.jsonl").write_text("{}\n")
    (dest / "b/stale.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    problems = tool.differences(dest, tool.build(source))
    assert "differs: a/x.jsonl.gz" in problems
    assert "differs: README.md" in problems
    assert "missing: c/z.jsonl.gz" in problems
    assert "not in the source: b/stale.jsonl.gz" in problems
    assert tool.main(["--source", str(source), "--dest", str(dest), "--check"]) == 1

    assert tool.main(["--source", str(source), "--dest", str(dest)]) == 0
    assert tool.differences(dest, tool.build(source)) == []
    assert not (dest / "b/stale.jsonl.gz").exists()


def test_check_ignores_a_different_compression_of_the_same_data(tmp_path, monkeypatch):
    tool = load_tool()
    monkeypatch.setattr(tool, "GENERATED", {})
    source = write_source(tmp_path / "src", {"a/x.jsonl": '{"id": 1}\n' * 50})
    dest = tmp_path / "dest"
    tool.main(["--source", str(source), "--dest", str(dest)])
    (dest / "a/x.jsonl.gz").write_bytes(gzip.compress(b'{"id": 1}\n' * 50, compresslevel=1))
    assert tool.differences(dest, tool.build(source)) == []


def test_generated_vectors_join_the_bundle_and_may_not_shadow_shared_ones(tmp_path):
    tool = load_tool()
    source = write_source(tmp_path / "src", {"a/x.jsonl": '{"id": 1}\n'})
    folder = tmp_path / "gen"
    folder.mkdir()
    (folder / "y.jsonl.gz").write_bytes(gzip.compress(b'{"id": 2}\n'))
    built = tool.build(source, {"a": [(folder, "tools/gen.py")]})
    assert gzip.decompress(built["a/y.jsonl.gz"]) == b'{"id": 2}\n'
    assert tool.build(source, {"a": (folder, "tools/gen.py")}) == built  # one bare pair
    assert "`tools/gen.py`" in built["README.md"].decode()
    (folder / "x.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    with pytest.raises(SystemExit, match="shadow"):
        tool.build(source, {"a": (folder, "tools/gen.py")})


def test_a_bundle_folder_may_gather_several_generated_folders(tmp_path):
    tool = load_tool()
    source = write_source(tmp_path / "src", {"a/x.jsonl": '{"id": 1}\n'})
    one, two = tmp_path / "one", tmp_path / "two"
    for folder, name in ((one, "p.jsonl.gz"), (two, "q.jsonl.gz")):
        folder.mkdir()
        (folder / name).write_bytes(gzip.compress(b"{}\n"))
    built = tool.build(source, {"a-ext": [(one, "tools/one.py"), (two, "tools/two.py")]})
    assert {"a-ext/p.jsonl.gz", "a-ext/q.jsonl.gz"} <= set(built)
    readme = built["README.md"].decode()
    assert "`tools/one.py`" in readme and "`tools/two.py`" in readme
    (two / "p.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    with pytest.raises(SystemExit, match="two generated folders"):
        tool.build(source, {"a-ext": [(one, "tools/one.py"), (two, "tools/two.py")]})
