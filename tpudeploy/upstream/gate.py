"""The watch workflow's first job (standard library only: it runs before `make install`, and holds
no credential): is the watch on for this deployment file, is there a new build to judge, and may
the paid job run at all; as outputs for the later jobs and as the run's step summary.

    python3 -m tpudeploy.upstream.gate deployments/staging.toml --summary "$GITHUB_STEP_SUMMARY"

Off unless the repository variable names a deployment file AND its `[watch] enabled = true`. On,
it reads the digest the followed tag points at now (Docker Hub's documented tag endpoint,
tpudeploy/upstream/registry.py) and compares it with the pin: nothing new, nothing paid. A new
build is judged by the paid job only on the self-hosted runner `[watch] runner` names
(tpudeploy/watchrunner.py: a GitHub-hosted runner cannot reach the node); without one the
summary gives the new digest and the command that judges it from a machine that can. A registry
that cannot be read pays for nothing and fails this job, so the run shows it (a 404 is a tag that
is gone, not a build to skip quietly). The full validation (budget, schedule, names) is `make
check`'s, in the paid job, before its credential.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

from tpudeploy import facts
from tpudeploy.durations import DurationError, parse_duration
from tpudeploy.upstream import registry
from tpudeploy.watchrunner import runner_problem, ways_forward

# tpudeploy.config.watch_table's defaults, repeated because this step cannot import pydantic;
# tests/upstream/test_registry_gate_budget.py holds the two equal.
DEFAULT_TIME_LIMIT = "3h"
# The destroy after a cancelled run is the next run's: the job's own destroy gets this margin.
DESTROY_MARGIN_MINUTES = 20

Latest = Callable[[str, str], registry.Release]


def _latest_from_env() -> Latest:
    base_url = os.environ.get(registry.REGISTRY_URL_ENV, registry.DOCKER_HUB)

    def latest(repository: str, tag: str) -> registry.Release:
        return registry.latest(repository, tag, base_url=base_url)

    return latest


def gate(path: str, *, root: Path = Path("."), latest: Latest | None = None) -> dict[str, str]:
    """The outputs for `path` (a deployments/*.toml file, relative to root): `enabled=false` with
    the reason when the watch is off; on, `new_build` (true, false, or unknown when the registry
    could not be read) and `runs_on` (the paid job's labels as JSON, `[]`: no paid run)."""
    if not path:
        return {
            "enabled": "false",
            "reason": "the repository variable UPSTREAM_WATCH_CONFIG is unset",
        }
    file = (root / path).resolve()
    deployments = (root / "deployments").resolve()
    if file.parent != deployments or file.suffix != ".toml" or not file.is_file():
        return {
            "enabled": "false",
            "reason": f"UPSTREAM_WATCH_CONFIG = {path!r} is not a deployments/*.toml file",
        }
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        return {"enabled": "false", "reason": f"{path}: not valid TOML ({exc})"}
    watch = data.get("watch", {})
    if not isinstance(watch, dict) or watch.get("enabled") is not True:
        return {"enabled": "false", "reason": f"{path}: [watch] enabled is not true"}
    name = str(data.get("name", ""))
    try:
        limit = parse_duration(watch.get("time_limit", DEFAULT_TIME_LIMIT), name="time_limit")
    except DurationError as exc:
        return {"enabled": "false", "reason": f"{path}: watch.{exc}"}
    config = f"deployments/{file.name}"
    outputs = {
        "enabled": "true",
        "reason": "",
        "config": config,
        "name": name,
        "environment": f"{name}-watch",
        "deploy_account": f"{name}-watch-apply",
        "timeout_minutes": str(math.ceil(limit / 60) + DESTROY_MARGIN_MINUTES),
        "new_build": "false",
        "pinned": "",
        "candidate": "",
        "runs_on": "[]",
    }
    return outputs | _build(data, watch, config, latest or _latest_from_env())


def _build(
    data: dict[str, object], watch: dict[str, object], config: str, latest: Latest
) -> dict[str, str]:
    """Whether the followed tag points at a new build, and where the paid job may judge it."""
    vllm = data.get("vllm", {})
    image_text = str(vllm.get("image", facts.IMAGE) if isinstance(vllm, dict) else facts.IMAGE)
    try:
        image = registry.ImageRef.parse(image_text)
    except registry.RegistryError as exc:
        return {"reason": f"{config}: {exc}"}
    if image.digest is None:
        return {
            "reason": f"{config}: vllm.image = {image_text!r} is a tag, not a digest: no pinned "
            "build to judge a new one against; pin it first (`make pin` after a boot)"
        }
    tag = str(watch.get("tag") or image.tag or "")
    if not tag:
        return {
            "reason": f"{config}: vllm.image = {image_text!r} names no tag to follow; add the "
            'tag to the image or set [watch] tag = "nightly"'
        }
    pinned = image.pinned(image.digest)
    try:
        release = latest(image.repository, tag)
    except registry.RegistryError as exc:
        return {
            "new_build": "unknown",
            "pinned": pinned,
            "reason": f"{exc}; nothing was paid for, the next run reads the registry again",
        }
    if release.digest == image.digest:
        return {
            "pinned": pinned,
            "reason": f"{image.repository}:{tag} still points at the pinned digest",
        }
    out = {
        "new_build": "true",
        "pinned": pinned,
        "candidate": registry.ImageRef(image.repository, tag, release.digest).pinned(
            release.digest
        ),
    }
    labels = watch.get("runner", [])
    problem = runner_problem(labels)
    if problem:
        shown = json.dumps(labels, default=str)
        out["reason"] = f"{config}: watch.runner = {shown}: {problem[0]} (fix: {problem[1]})"
    elif not labels:
        out["reason"] = f"{config}: [watch] runner is empty: no self-hosted runner is named"
    else:
        assert isinstance(labels, list | tuple)  # runner_problem checked it
        out["runs_on"] = json.dumps(list(labels), separators=(",", ":"))
    return out


def summary(outputs: dict[str, str]) -> str:
    """The step summary (Markdown): what the gate found, and what judges a new build."""
    lines = ["## Upstream watch", ""]
    if outputs.get("enabled") != "true":
        return "\n".join([*lines, f"Off: {outputs['reason']}.", ""])
    config = outputs["config"]
    new = outputs["new_build"]
    if outputs["pinned"]:
        lines.append(f"- pinned: `{outputs['pinned']}`")
    if new == "true":
        lines += [
            f"- **new build**: `{outputs['candidate']}`",
            "",
            "Judge it (paid: a flex-start boot, make accept's rows and a short sweep, then "
            "destroy) from a machine that reaches the node:",
            "",
            f"    make upstream-watch DEPLOY_CONFIG={config}",
            "",
        ]
        if outputs["runs_on"] != "[]":
            lines.append(f"The paid job runs on the self-hosted runner `{outputs['runs_on']}`.")
        else:
            lines += [
                f"The paid job is skipped: {outputs['reason']}. A GitHub-hosted runner cannot "
                "reach the watch node's front door (open to [network] allowed_cidrs only) nor run "
                "make bench over IAP SSH as root, so it would pay for a boot and fail. Two ways "
                "forward:",
                "",
                *(f"1. {way}" for way in ways_forward(config, outputs["deploy_account"])),
            ]
    elif new == "unknown":
        lines.append(f"- **registry not read**: {outputs['reason']}.")
    else:
        lines.append(f"- nothing to judge: {outputs['reason']}.")
    return "\n".join([*lines, ""])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tpudeploy.upstream.gate")
    parser.add_argument("config", nargs="?", default="")
    parser.add_argument("--summary", default="", help="append the step summary to this file")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    outputs = gate(args.config)
    for key, value in outputs.items():
        # One line per output (GITHUB_OUTPUT's key=value form): never a newline in a value.
        print(f"{key}={value.replace(chr(10), ' ')}")
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as out:
            out.write(summary(outputs))
    if outputs["enabled"] != "true":
        print(f"upstream watch off: {outputs['reason']}", file=sys.stderr)
    elif outputs["new_build"] != "true" or outputs["runs_on"] == "[]":
        print(f"upstream watch: no paid run: {outputs['reason']}", file=sys.stderr)
    # A registry that could not be read fails the job: the run shows it, nothing is paid.
    return 1 if outputs.get("new_build") == "unknown" else 0


if __name__ == "__main__":
    raise SystemExit(main())
