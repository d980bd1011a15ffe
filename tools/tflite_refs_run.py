"""Run one int8 model and its xcore-opt build through every peer runtime (helper of
``make_tflite_refs.py``; needs the TensorFlow venv, never imported by quantemu).

Runtimes: LiteRT with the BUILTIN_REF and BUILTIN op resolvers, the TFLite-Micro Python
runtime, and XMOS's host interpreter (``TFLMHostInterpreter``) on both the compiled and the
un-compiled model. Per-layer captures and the statistics stored in ``MANIFEST.json`` are
computed here as well.
"""

from __future__ import annotations

import importlib.metadata as md
import multiprocessing
import os
import platform
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from flatbuffers import flexbuffers
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils
from tflite_micro.python.tflite_micro import runtime as tflm_runtime
from xmos_ai_tools import xformer
from xmos_ai_tools.xinterpreters import TFLMHostInterpreter

TFLM_ARENA = 8 * 1024 * 1024
_BUILTIN_NAMES = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
_NO_OP = "XC_no_op"


# ---------------------------------------------------------------- flatbuffer views


def load_model(blob: bytes):
    return flatbuffer_utils.convert_bytearray_to_object(bytearray(blob))


def op_name(model, op) -> str:
    code = model.operatorCodes[op.opcodeIndex]
    if code.customCode:
        return code.customCode.decode()
    # Builtin codes above 127 live only in builtinCode; older ones in the deprecated field.
    return _BUILTIN_NAMES[max(code.builtinCode, code.deprecatedBuiltinCode)]


def op_list(blob: bytes) -> list[str]:
    model = load_model(blob)
    return [op_name(model, op) for op in model.subgraphs[0].operators]


def tensor_info(model, index: int) -> dict:
    t = model.subgraphs[0].tensors[index]
    q = t.quantization
    info = {"tensor": index, "shape": [int(d) for d in t.shape]}
    if q is not None and q.scale is not None and len(q.scale):
        info["scale"] = float(q.scale[0]) if len(q.scale) == 1 else [float(s) for s in q.scale]
        zp = q.zeroPoint
        info["zero_point"] = int(zp[0]) if len(zp) == 1 else [int(z) for z in zp]
    return info


def io_info(blob: bytes) -> tuple[dict, dict]:
    model = load_model(blob)
    sg = model.subgraphs[0]
    dtype = {v: k.lower() for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    res = []
    for idx in (sg.inputs[0], sg.outputs[0]):
        info = tensor_info(model, idx)
        info.pop("tensor")
        info["dtype"] = dtype[sg.tensors[idx].type]
        res.append(info)
    return res[0], res[1]


def xc_conv_transforms(blob: bytes) -> list[dict]:
    """Per XC_conv2d_v2: its output-transform kind (custom option ``t``: 0 group, 1
    channelwise) and kernel type ``k``, read from the flexbuffer options."""
    model = load_model(blob)
    out = []
    for i, op in enumerate(model.subgraphs[0].operators):
        if op_name(model, op) != "XC_conv2d_v2":
            continue
        # Other keys hold raw bytes typed as strings, so read only the two integers.
        opts = flexbuffers.GetRoot(bytes(bytearray(op.customOptions))).AsMap
        keys = {k.AsKey for k in opts.Keys}
        t = opts["t"].AsInt if "t" in keys else 0
        k = opts["k"].AsInt if "k" in keys else None
        out.append({"op_index": i, "t": t, "ot": "channelwise" if t == 1 else "group", "k": k})
    return out


# ---------------------------------------------------------------- xcore-opt


def run_xformer(int8_path: Path, name: str) -> tuple[bytes, dict]:
    """Compile with default options in a scratch folder; only the .xcore.tflite is kept."""
    with tempfile.TemporaryDirectory() as tmp:
        out_path = Path(tmp) / f"{name}.xcore.tflite"
        rc = xformer.convert(str(int8_path), str(out_path), None)
        if rc != 0:  # convert() only prints the failure: rerun for the message
            cmd = ["xcore-opt", "-o", str(out_path), str(int8_path)]
            res = subprocess.run(cmd, check=False, capture_output=True, text=True)
            err = " ".join((res.stdout + res.stderr).split())
            raise RuntimeError(f"xcore-opt exit code {res.returncode}: {err}")
        blob = out_path.read_bytes()
        side = sorted(p.name for p in Path(tmp).iterdir() if p.name != out_path.name)
    info = {
        "command": f"xcore-opt -o {name}.xcore.tflite {name}.int8.tflite",
        "tensor_arena_size": int(xformer.tensor_arena_size()),
        "stderr": getattr(xformer, "__compilation_stderr"),
        "side_files_not_kept": side,
    }
    return blob, info


def xcore_opt_version() -> str:
    res = subprocess.run(["xcore-opt", "--version"], check=False, capture_output=True, text=True)
    return (res.stdout + res.stderr).strip().splitlines()[-1]


def versions() -> dict:
    v = {"python": platform.python_version()}
    for pkg in (
        "numpy",
        "tensorflow-cpu",
        "tensorflow",
        "tf-keras",
        "keras",
        "ai-edge-litert",
        "tflite-micro",
        "tflite",
        "xmos-ai-tools",
        "flatbuffers",
    ):
        try:
            v[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            v[pkg] = None
    v["xcore-opt --version"] = xcore_opt_version()
    return v


# ---------------------------------------------------------------- runtimes


def run_litert(blob: bytes, x: np.ndarray, resolver: OpResolverType) -> np.ndarray:
    it = Interpreter(model_content=blob, experimental_op_resolver_type=resolver)
    it.allocate_tensors()
    i_idx = it.get_input_details()[0]["index"]
    o_idx = it.get_output_details()[0]["index"]
    ys = []
    for xi in x:
        it.set_tensor(i_idx, xi[None])
        it.invoke()
        ys.append(it.get_tensor(o_idx)[0].copy())
    return np.stack(ys)


def run_tflm(blob: bytes, x: np.ndarray) -> np.ndarray:
    it = tflm_runtime.Interpreter.from_bytes(blob, arena_size=TFLM_ARENA)
    ys = []
    for xi in x:
        it.set_input(xi[None], 0)
        it.invoke()
        ys.append(it.get_output(0)[0].copy())
    return np.stack(ys)


def _xmos_outputs(blob: bytes, x: np.ndarray, indices: list[int]) -> list[list[np.ndarray]]:
    it = TFLMHostInterpreter()
    it.set_model(model_content=blob)
    res = []
    for xi in x:
        it.set_tensor(0, xi[None])
        it.invoke()
        res.append([it.get_tensor(t).copy() for t in indices])
    it.close()
    return res


def run_xmos(blob: bytes, x: np.ndarray) -> np.ndarray:
    out = load_model(blob).subgraphs[0].outputs[0]
    return np.stack([r[0][0] for r in _xmos_outputs(blob, x, [int(out)])])


def _child(conn, blob: bytes, x: np.ndarray, log: str) -> None:
    # The runtime names a missing kernel on the C-level stdout/stderr: keep it for the error.
    fd = os.open(log, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    conn.send(run_xmos(blob, x))
    conn.close()


def run_xmos_isolated(blob: bytes, x: np.ndarray) -> np.ndarray:
    """run_xmos in a spawned process: the XMOS runtime crashes (SIGSEGV) on a model that uses a
    builtin it was built without (e.g. HARD_SWISH), which must not end the generator."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    with tempfile.NamedTemporaryFile() as log:
        proc = ctx.Process(target=_child, args=(child, blob, x, log.name))
        proc.start()
        child.close()
        try:
            y = parent.recv()
        except EOFError:
            y = None
        proc.join()
        said = " ".join(Path(log.name).read_text(errors="replace").split())
    if y is None or proc.exitcode != 0:
        msg = f"TFLMHostInterpreter process ended with exit code {proc.exitcode}"
        raise RuntimeError(f"{msg}: {said}" if said else msg)
    return y


def attempt(notes: dict, key: str, what: str, fn, *args):
    """``fn(*args)``, or None with ``notes[key]`` saying why: xcore-opt or the XMOS runtime
    rejects some models (ops it lacks), which must be recorded, not end the generator."""
    try:
        return fn(*args)
    except RuntimeError as exc:
        notes[key] = f"not stored: {exc} ({what})"
        return None


def xmos_or_note(blob, x, notes, key, what):
    """The XMOS runtime, in a child process: it crashes on a model with a builtin it was built
    without (HARD_SWISH, SQUARED_DIFFERENCE, BATCH_MATMUL)."""
    if blob is None:
        return None
    ops = sorted(set(op_list(blob)))
    return attempt(notes, key, f"XMOS runtime on {what} ops {ops}", run_xmos_isolated, blob, x)


def xcore_entry(xcore, xinfo) -> dict:
    if xcore is None:
        return {}
    xops = op_list(xcore)
    xinfo["unoptimized_warning"] = "Op left unoptimized" in xinfo["stderr"]
    xinfo["conv_output_transforms"] = xc_conv_transforms(xcore)
    xinfo["channelwise_ot_used"] = any(t["t"] == 1 for t in xinfo["conv_output_transforms"])
    return {
        "xcore_ops": xops,
        "tfl_ops_kept_by_xcore_opt": [o for o in xops if not o.startswith("XC_")],
        "xcore_opt": xinfo,
    }


# ---------------------------------------------------------------- per-layer captures


def _per_input(t: np.ndarray) -> np.ndarray:
    """Drop a batch dim of 1; a tensor without one (a token model's (16, 32) reshape before
    FULLY_CONNECTED) is kept whole, so that no element is lost."""
    return (t[0] if len(t) == 1 else t).copy()


def capture_ref(blob: bytes, x: np.ndarray) -> tuple[dict, list[dict]]:
    """Every op output of the int8 model under BUILTIN_REF (all tensors preserved)."""
    model = load_model(blob)
    sg = model.subgraphs[0]
    it = Interpreter(
        model_content=blob,
        experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
        experimental_preserve_all_tensors=True,
    )
    it.allocate_tensors()
    metas = []
    for i, op in enumerate(sg.operators):
        meta = {"op_index": i, "op": op_name(model, op)}
        meta.update(tensor_info(model, int(op.outputs[0])))
        meta = {
            **{k: meta[k] for k in ("op_index", "op", "tensor")},
            "name": sg.tensors[op.outputs[0]].name.decode(),
        } | {k: v for k, v in meta.items() if k not in ("op_index", "op", "tensor")}
        meta["key"] = f"ref_{i:02d}"
        metas.append(meta)
    arrays = {m["key"]: [] for m in metas}
    i_idx = it.get_input_details()[0]["index"]
    for xi in x:
        it.set_tensor(i_idx, xi[None])
        it.invoke()
        for m in metas:
            arrays[m["key"]].append(_per_input(it.get_tensor(m["tensor"])))
    return {k: np.stack(v) for k, v in arrays.items()}, metas


def _bypass_no_ops(model) -> None:
    """Without the offline plan an XC_no_op no longer shares memory with its input, so its
    output holds garbage: consumers are rewired to read the no_op's input (the same bytes)."""
    sg = model.subgraphs[0]
    alias = {
        int(op.outputs[0]): int(op.inputs[0]) for op in sg.operators if op_name(model, op) == _NO_OP
    }
    for op in sg.operators:
        if op_name(model, op) == _NO_OP:
            continue
        ins = [int(t) for t in op.inputs]
        for _ in range(len(alias)):  # chains of no_ops
            ins = [alias.get(t, t) for t in ins]
        op.inputs = np.array(ins, dtype=np.int32)


def capture_xcore(blob: bytes, x: np.ndarray) -> tuple[dict, list[dict]]:
    """Every op output of the xcore model: all op outputs become subgraph outputs and the
    offline memory plan is dropped so that TFLM plans (and keeps) them all. XC_no_op outputs
    alias their input under the original plan only, so they are listed but not captured, and
    their consumers read the no_op's input instead."""
    model = load_model(blob)
    sg = model.subgraphs[0]
    metas, wanted = [], []
    for i, op in enumerate(sg.operators):
        name = op_name(model, op)
        meta = {"op_index": i, "op": name}
        meta.update(tensor_info(model, int(op.outputs[0])))
        if name == _NO_OP:
            meta["key"] = None
            meta["note"] = (
                "XC_no_op output not captured (aliases its input; same data as the previous op)"
            )
        else:
            meta["key"] = f"xcore_{i:02d}"
            wanted.append(int(op.outputs[0]))
        metas.append(meta)
    _bypass_no_ops(model)
    sg.outputs = np.array(sorted(set(wanted) | {int(t) for t in sg.outputs}), dtype=np.int32)
    model.metadata = [m for m in (model.metadata or []) if m.name != b"OfflineMemoryAllocation"]
    patched = bytes(flatbuffer_utils.convert_object_to_bytearray(model))
    per_input = _xmos_outputs(patched, x, wanted)
    arrays = {}
    for j, m in enumerate(k for k in metas if k["key"]):
        arrays[m["key"]] = np.stack([_per_input(r[j]) for r in per_input])
    return arrays, metas


# ---------------------------------------------------------------- statistics


def diff_stats(a: np.ndarray, b: np.ndarray) -> dict:
    d = np.abs(a.astype(np.int32) - b.astype(np.int32)).reshape(len(a), -1)
    return {
        "n_elems": int(d.size),
        "n_diff": int((d != 0).sum()),
        "max_abs_lsb": int(d.max()) if d.size else 0,
        "n_inputs_with_diff": int((d != 0).any(axis=1).sum()),
    }


def requantize(y_float: np.ndarray, out: dict) -> np.ndarray:
    q = np.round(y_float.astype(np.float64) / out["scale"]) + out["zero_point"]
    return np.clip(q, -128, 127).astype(np.int8)


def pair_layers(ref: dict, ref_meta: list, xc: dict, xc_meta: list) -> list[dict]:
    """Pair each reference op output with an xcore op output of the same element count, scale
    and zero point; among several, the one closest in values (then the later one)."""
    rows = []
    for r in ref_meta:
        row = {"ref_key": r["key"], "ref_op": r["op"], "shape": r["shape"]}
        best = None
        for m in xc_meta:
            same = (
                m["key"]
                and np.prod(m["shape"]) == np.prod(r["shape"])
                and m.get("scale") == r.get("scale")
                and m.get("zero_point") == r.get("zero_point")
            )
            if not same:
                continue
            d = np.abs(xc[m["key"]].reshape(-1).astype(np.int32) - ref[r["key"]].reshape(-1))
            score = float(d.mean())
            if best is None or score <= best[0]:
                best = (score, m)
        if best is None:
            row.update({"xcore_key": None, "xcore_op": None})
        else:
            m = best[1]
            a = xc[m["key"]].reshape(ref[r["key"]].shape)
            row.update({"xcore_key": m["key"], "xcore_op": m["op"]})
            row.update(diff_stats(a, ref[r["key"]]))
            row["frac_at_rail_ref"] = float(np.isin(ref[r["key"]], (-128, 127)).mean())
        rows.append(row)
    return rows
