"""The watch's artifact as text: the verdict (always) and the pull request's body (a win only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpudeploy.terminal import printable


def _cell(text: object) -> str:
    # A detail is the server's text: never let it break the table or carry control characters.
    return printable(str(text)).replace("|", "\\|").replace("\n", " ")[:300]


def _accept_table(rows: list[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return ["No acceptance row ran."]
    lines = ["| row | verdict | seconds | detail |", "|---|---|---|---|"]
    lines += [
        f"| {_cell(r['row'])} | {_cell(r['status'])} | {r['seconds']} | {_cell(r['detail'])} |"
        for r in rows
    ]
    return lines


def _sweep_table(sweep: Mapping[str, Any]) -> list[str]:
    if not sweep:
        return ["No sweep ran."]
    lines = [
        f"Aggregate throughput: better in {sweep['better_cells']} cell(s), worse in "
        f"{sweep['worse_cells']}; geometric mean of the ratios "
        + (
            "n/a"
            if sweep.get("geomean_throughput_ratio") is None
            else f"{sweep['geomean_throughput_ratio']:.3f}"
        )
        + " (candidate / pinned, above 1 is better).",
        "",
        "| context | clients | metric | candidate vs pinned [95% interval] |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {c['context']} | {c['clients']} | {c['metric']} | {_cell(c['verdict'])} |"
        for c in sweep.get("cells", [])
    ]
    return lines


def verdict_markdown(data: Mapping[str, Any]) -> str:
    lines = [
        f"# Upstream watch of {data['deployment']}: {data['status']}",
        "",
        f"- pinned: `{data['pinned'] or '-'}`",
        f"- candidate: `{data['candidate'] or '-'}`",
        f"- judged on deployment `{data['watch_deployment']}` (flex-start, destroyed after)",
    ]
    if data.get("resumed_an_interrupted_run"):
        lines.append("- an interrupted earlier run was found and its node destroyed first")
    lines += ["", "## Why not proposed" if data["reasons"] else "## Proposed", ""]
    lines += [f"- {_cell(r)}" for r in data["reasons"]] or [
        "Better than the pinned build and every acceptance row passed."
    ]
    lines += ["", "## Acceptance (make accept's rows)", "", *_accept_table(data["accept"])]
    lines += ["", "## Sweep (make tune's verdict, quick profile)", "", *_sweep_table(data["sweep"])]
    return "\n".join(lines) + "\n"


def pr_body(data: Mapping[str, Any]) -> str:
    """The pull request that pins the candidate: what changes, and the evidence."""
    return "\n".join(
        [
            f"Pin `{data['candidate']}` for deployment `{data['deployment']}`.",
            "",
            "The scheduled upstream watch booted this build on its own flex-start deployment "
            f"`{data['watch_deployment']}` with this deployment's config, ran the "
            "acceptance table and a short sweep against the pinned build "
            f"`{data['pinned']}` on fresh nodes, and destroyed everything after.",
            "",
            "Only a v5e answers this; merging deploys it through the usual gated pipeline.",
            "",
        ]
    ) + verdict_markdown(data)
