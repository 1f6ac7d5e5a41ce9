"""The pull-request comment for one deployment's `cdktf diff`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# A GitHub comment holds at most 65,536 characters and several deployments share one comment.
PLAN_DETAIL_LIMIT = 20_000
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SUMMARY = re.compile(r"Plan: \d+ to add, \d+ to change, \d+ to destroy|No changes\.|Error: ")
# Terraform diffs the startup script line by line, inside metadata or a jsonencode()d spec:
#   - readonly IMAGE=vllm/vllm-tpu:nightly
#   + readonly IMAGE=vllm/vllm-tpu@sha256:...
_IMAGE_CHANGE = re.compile(
    r"^\s*- readonly (IMAGE|PROXY_IMAGE)=(\S+)\n\s*\+ readonly \1=(\S+)\s*$", re.MULTILINE
)
_ROLES = {"IMAGE": "vLLM image", "PROXY_IMAGE": "proxy image"}
# The lines of `make check` that say what the deployment costs and what stops its billing
# (tpudeploy/gke/summary.py for GKE: replicas, per-hour cost at min and max replicas, the idle
# floor, $/M tokens, billing stops, the deadline; the TPU VM's cost and billing-stops lines).
COST_PREFIXES = (
    "replicas:",
    "cost:",
    "idle floor:",
    "$/M output tokens:",
    "billing stops:",
    "deadline:",
)
# `make pin` writes `image = "repo@sha256:..."  # <versions>; make pin <date>`.
_PINNED_LINE = re.compile(r'^\s*image\s*=\s*"([^"]+)"\s*#\s*(.+?)\s*$', re.MULTILINE)


def pinned_versions(config_text: str) -> dict[str, str]:
    """{image reference: the versions `make pin` wrote beside it} from a deployment's TOML."""
    return {ref: comment for ref, comment in _PINNED_LINE.findall(config_text)}


def image_changes(text: str, versions: Mapping[str, str] | None = None) -> list[str]:
    """One line per image the plan changes, said as the build change it is."""
    lines: list[str] = []
    for role, old, new in _IMAGE_CHANGE.findall(text):
        noted = (versions or {}).get(new)
        line = (
            f"{_ROLES[role]}: `{old}` -> `{new}`"
            + (f" ({noted})" if noted else "")
            + ": a different build; vLLM's version, memory layout and compile cache can all "
            "change. After the deploy, `make status` shows what the node reports and its boot "
            "check"
        )
        if line not in lines:
            lines.append(line)
    return lines


def cost_lines(check_output: str) -> list[str]:
    """The cost and billing lines of `make check`'s output, in its order."""
    text = _ANSI.sub("", check_output)
    return [line.strip() for line in text.splitlines() if line.strip().startswith(COST_PREFIXES)]


def plan_report(
    *,
    name: str,
    config: str,
    exit_code: int,
    output: str,
    versions: Mapping[str, str] | None = None,
    stacks: Sequence[str] = (),
    check_output: str = "",
) -> str:
    """Markdown for one deployment's `cdktf diff`: summary lines first (an image change as the
    version change it is, with `versions` from the config's `make pin` comments), full output
    folded. `stacks` (in apply order): each gets its line, or says it has no plan summary
    (its plan failed or never ran: `make diff` stops at the first failing stack).
    `check_output`: `make check`'s output, whose cost and billing lines follow the plan."""
    # A fence inside the plan output would close the code block early and render the rest.
    text = _ANSI.sub("", output).replace("```", "'''")
    summary: list[str] = []
    for line in text.splitlines():
        if _SUMMARY.search(line) and line.strip() not in summary:
            summary.append(line.strip())
    status = "plan succeeded" if exit_code == 0 else f"plan FAILED (exit {exit_code})"
    if len(text) > PLAN_DETAIL_LIMIT:
        text = text[:PLAN_DETAIL_LIMIT] + "\n... truncated: the full plan is in the job log\n"
    lines = [f"### `{name}` ({config}): {status}", ""]
    if stacks:
        lines += _by_stack(summary, stacks)
    else:
        lines += [f"- {s}" for s in summary] or ["- no plan summary found in the output"]
    lines += [f"- {change}" for change in image_changes(_ANSI.sub("", output), versions)]
    costs = cost_lines(check_output)
    if costs:
        lines += ["", "Cost and billing (`make check`):", ""] + [f"- {c}" for c in costs]
    lines += ["", "<details><summary>cdktf diff output</summary>", "", "```", text, "```"]
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def _by_stack(summary: Sequence[str], stacks: Sequence[str]) -> list[str]:
    """One line per stack, in apply order, then the summary lines no stack claims (an error
    printed before any stack's plan). cdktf prefixes each line with its stack's name; a line
    is claimed by the stack whose whole name it carries (gemma4-gke never claims a
    gemma4-gke-serving line)."""
    lines: list[str] = []
    claimed: set[str] = set()
    for stack in stacks:
        mine = [s for s in summary if re.search(rf"(^|\s){re.escape(stack)}(\s|$)", s)]
        claimed.update(mine)
        lines += [f"- {s}" for s in mine] or [
            f"- {stack}: no plan summary in the output (its plan failed or did not run)"
        ]
    return lines + [f"- {s}" for s in summary if s not in claimed]
