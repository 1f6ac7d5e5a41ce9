"""`make wait`: follow the boot phase the startup script reports as guest attributes (no SSH)."""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from tpudeploy.config import DeployConfig
from tpudeploy.iapssh import ssh_argv
from tpudeploy.nodebuild import check_lines
from tpudeploy.timefmt import format_seconds
from tpudeploy.tpuvm.guestattributes import node_name, read_attributes
from tpudeploy.tpuvm.queued_resource import ApiError, TpuApi

# The startup script waits 2400 s for /health after the pull; the pull and the cache restore
# come on top (seed: cold boot 857 s).
DEFAULT_TIMEOUT = 3000.0
DEFAULT_INTERVAL = 10.0


@dataclass(frozen=True)
class BootState:
    phase: str  # a startup-script phase, or "no-node" / "no-report" before there is one
    reason: str = ""


def read_state(api: TpuApi, name: str) -> BootState:
    values = read_attributes(api, name)
    if values is None:
        return BootState("no-report" if api.get_node(name) is not None else "no-node")
    if "phase" not in values:
        return BootState("no-report")
    return BootState(values["phase"], values.get("reason", ""))


_DESCRIPTIONS = {
    "no-node": "the node does not exist yet (flex-start waits for capacity)",
    "no-report": "the node is booting; the startup script has not reported yet",
    "reading-secrets": "reading the Hugging Face token and API key from Secret Manager",
    "pulling-image": "pulling the vLLM image",
    "restoring-cache": "restoring the XLA compile cache from Cloud Storage",
    "starting-vllm": "vLLM is loading and compiling (build log: 685 s of the 857 s cold boot)",
    "starting-proxy": "vLLM is ready on the node; starting the TLS proxy in front of it",
    "ready": "the TLS proxy answers /health and refuses requests without the API key",
}


def wait_ready(
    cfg: DeployConfig,
    project: str,
    *,
    api: TpuApi | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    interval: float = DEFAULT_INTERVAL,
    out: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Poll until phase ready (0), failed (1) or the timeout (3); one line per phase change."""
    out = out or sys.stdout
    api = api or TpuApi(log=sys.stderr)
    name = node_name(cfg, project)
    ssh = shlex.join([*ssh_argv(cfg.node_id, cfg.zone, project), "--"])
    start = clock()
    last = None
    interactive = out.isatty()
    while True:
        elapsed = clock() - start
        try:
            state = read_state(api, name)
        except ApiError as exc:
            print(
                f"\nerror: the TPU API refused get_guest_attributes for {name}: "
                f"{exc.api_message}. "
                "Check your credentials (`gcloud auth application-default login`) and project.",
                file=out,
            )
            return 1
        if state != last:
            newline = "\n" if interactive and last else ""
            print(
                f"{newline}[{format_seconds(elapsed)}] {state.phase}: "
                f"{state.reason or _DESCRIPTIONS.get(state.phase, '')}",
                file=out,
            )
            last = state
        elif interactive:
            print(
                f"\r  ... {state.phase} for {format_seconds(elapsed)}", end="", file=out, flush=True
            )
        if state.phase == "ready":
            # What the node measured against the planner: warnings and open wins only.
            try:
                alerts = check_lines(read_attributes(api, name) or {}, only_alerts=True)
            except ApiError:
                alerts = []
            for line in alerts:
                print(line, file=out)
            print(
                f"ready after {format_seconds(elapsed)} of waiting. Next: make endpoint (address "
                "and certificate), make tunnel + make smoke, then make accept (the build log's "
                "acceptance table) (build log: cold boot 857 s, warm 497 s with the compile "
                "cache)",
                file=out,
            )
            return 0
        if state.phase == "failed":
            print(
                f"boot failed: {state.reason or 'no reason reported'}\n"
                f"next: make status, then the logs:\n"
                f"  {ssh} sudo journalctl -u google-startup-scripts --no-pager | tail -50\n"
                f"  {ssh} sudo docker logs --tail 100 {cfg.vllm.container_name}",
                file=out,
            )
            return 1
        if elapsed >= timeout:
            print(
                f"timed out after {format_seconds(elapsed)} in phase {state.phase}. "
                "Next: make status, or follow the boot on the node:\n"
                f"  {ssh} sudo docker logs -f {cfg.vllm.container_name}",
                file=out,
            )
            return 3
        sleep(interval)
