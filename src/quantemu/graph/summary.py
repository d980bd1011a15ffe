"""The per-node summary table that ``quantemu inspect`` prints (rendered with rich)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from quantemu.graph.ir import Graph, Node, format_shape
from quantemu.graph.ops import spec


def op_label(node: Node) -> str:
    """The op type, with a fused activation shown as ``Conv+relu`` / ``Conv+clip[0,6]``."""
    kind = node.attrs.get("activation")
    if kind is None:
        return node.op_type
    if kind == "clip":
        low, high = node.attrs["activation_min"], node.attrs["activation_max"]
        return f"{node.op_type}+clip[{low:g},{high:g}]"
    if kind == "leaky_relu":
        return f"{node.op_type}+leaky_relu({node.attrs['activation_alpha']:g})"
    return f"{node.op_type}+{kind}"


def node_macs(graph: Graph, node: Node) -> int:
    """Multiply-accumulates of ``node`` per sample (0 where not meaningful or not known)."""
    op = spec(node.op_type)
    if op.macs is None:
        return 0
    infos = [graph.tensors[n] if n else None for n in node.inputs]
    return int(op.macs(node, infos, [graph.tensors[n] for n in node.outputs]))


def summary_table(graph: Graph) -> Table:
    """A rich :class:`Table`: one row per node, with shapes, parameters and MACs; totals."""
    producer = graph.metadata.get("producer") or "unknown producer"
    title = f"{graph.name} · opset {graph.opset} · {producer}"
    table = Table(title=title, show_footer=True, title_justify="left")
    total_params = sum(int(v.size) for v in graph.initializers.values())
    total_macs = sum(node_macs(graph, n) for n in graph.nodes)
    table.add_column("#", justify="right", footer="")
    table.add_column("node", footer=f"{len(graph.nodes)} nodes")
    table.add_column("op")
    table.add_column("inputs")
    table.add_column("weights")
    table.add_column("output")
    table.add_column("params", justify="right", footer=f"{total_params:,}")
    table.add_column("MACs", justify="right", footer=f"{total_macs:,}")
    for index, node in enumerate(graph.nodes):
        data = [n for n in node.inputs if n and n not in graph.initializers]
        weights = [n for n in node.inputs if n in graph.initializers]
        table.add_row(
            str(index),
            node.name,
            op_label(node),
            ", ".join(format_shape(graph.tensors[n].shape) for n in data),
            ", ".join(format_shape(graph.tensors[n].shape) for n in weights),
            ", ".join(format_shape(graph.tensors[n].shape) for n in node.outputs),
            f"{graph.param_count(node):,}",
            f"{node_macs(graph, node):,}",
        )
    return table


def header_lines(graph: Graph) -> list[str]:
    """Inputs, outputs and QDQ overrides, one line each."""
    lines = [
        "inputs:  "
        + ", ".join(f"{t.name} {format_shape(t.shape)} {t.dtype}" for t in graph.inputs),
        "outputs: "
        + ", ".join(f"{t.name} {format_shape(t.shape)} {t.dtype}" for t in graph.output_infos),
    ]
    if graph.quant_overrides:
        per_axis = sum(1 for q in graph.quant_overrides.values() if q.per_axis)
        lines.append(
            f"quantization from the model ({graph.metadata.get('source_format', 'QDQ')}): "
            f"{len(graph.quant_overrides)} tensors "
            f"({per_axis} per-axis)"
        )
    return lines


def print_summary(graph: Graph, console: Console | None = None) -> None:
    """Print the header lines and the table to ``console`` (stdout by default)."""
    console = console or Console()
    for line in header_lines(graph):
        console.print(line, highlight=False, markup=False)
    console.print(summary_table(graph))
    console.print("MACs are per sample.", highlight=False, style="dim")
    if graph.quant_overrides:
        from quantemu.graph.quant_summary import quantization_table  # noqa: PLC0415

        console.print(quantization_table(graph))


def summary_text(graph: Graph, *, width: int = 120) -> str:
    """:func:`print_summary` as plain text (no colours), ``width`` characters wide."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False)
    print_summary(graph, console)
    return buffer.getvalue()
