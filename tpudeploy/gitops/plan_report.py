"""The pull-request comment for one deployment's `cdktf diff`."""

from __future__ import annotations

import re

# A GitHub comment holds at most 65,536 characters and several deployments share one comment.
PLAN_DETAIL_LIMIT = 20_000
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SUMMARY = re.compile(r"Plan: \d+ to add, \d+ to change, \d+ to destroy|No changes\.|Error: ")


def plan_report(*, name: str, config: str, exit_code: int, output: str) -> str:
    """Markdown for one deployment's `cdktf diff`: summary lines first, full output folded."""
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
    lines += [f"- {s}" for s in summary] or ["- no plan summary found in the output"]
    lines += ["", "<details><summary>cdktf diff output</summary>", "", "```", text, "```"]
    lines += ["", "</details>", ""]
    return "\n".join(lines)
