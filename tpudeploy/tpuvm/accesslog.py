"""The TPU VM's front-door access log for `make usage`: the proxy container's stdout on the node
(nginx writes the access log to /dev/stdout, its error log to stderr), read over the IAP SSH
every node command uses (tpudeploy/iapssh.py), with when the container started: before that,
another container (a previous boot) served, and its log went with it."""

from __future__ import annotations

import datetime
import shlex
import subprocess
from collections.abc import Callable, Sequence

from tpudeploy.config import DeployConfig
from tpudeploy.errors import UserError
from tpudeploy.facts import lookup_accelerator
from tpudeploy.iapssh import gcloud_failure, ssh_argv
from tpudeploy.usage import ReplicaLog

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[bytes]"]


class AccessLogError(UserError, RuntimeError):
    """The node's log could not be read; the message says why and what to run."""


def remote_command(cfg: DeployConfig, since_s: int) -> str:
    """First line: the container's start (RFC 3339); then its stdout since `since_s` seconds
    ago, stderr (nginx's error log, docker's own complaints) dropped."""
    name = shlex.quote(cfg.proxy.container_name)
    return (
        f"sudo docker inspect --format '{{{{.State.StartedAt}}}}' {name} && "
        f"sudo docker logs --since {int(since_s)}s {name} 2>/dev/null"
    )


def ssh_command(cfg: DeployConfig, project: str, since_s: int) -> list[str]:
    return [
        *ssh_argv(cfg.node_id, cfg.zone, project),
        "--quiet",
        "--ssh-flag=-T",
        "--command",
        remote_command(cfg, since_s),
    ]


def parse_started(text: str) -> datetime.datetime:
    """docker's StartedAt ("2026-12-03T05:01:02.123456789Z") to a UTC datetime."""
    raw = text.strip().replace("Z", "+00:00")
    head, _, rest = raw.partition(".")
    if rest:  # nanoseconds: fromisoformat takes at most microseconds
        digits = rest.split("+")[0].split("-")[0]
        raw = f"{head}.{digits[:6].ljust(6, '0')}+00:00"
    return datetime.datetime.fromisoformat(raw).astimezone(datetime.UTC)


def access_logs(
    cfg: DeployConfig, project: str, since_s: int, *, run: Runner | None = None
) -> list[ReplicaLog]:
    def default_run(argv: Sequence[str]) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(list(argv), capture_output=True, check=False)
        except FileNotFoundError:
            raise AccessLogError(
                "gcloud is not installed: `make usage` reads the node's front-door log over "
                "IAP SSH (install the Google Cloud CLI with its alpha component)"
            ) from None

    done = (run or default_run)(ssh_command(cfg, project, since_s))
    stderr = done.stderr.decode(errors="replace")
    if done.returncode != 0:
        why = gcloud_failure(stderr) or (stderr.strip().splitlines() or ["no message"])[-1]
        raise AccessLogError(
            f"could not read the front door's log on {cfg.node_id}: {why}. `make status` says "
            "whether the node is up; the log lives in its proxy container, so a node that was "
            "re-created has only the log since its boot"
        )
    lines = done.stdout.decode(errors="replace").splitlines()
    if not lines:
        raise AccessLogError(f"{cfg.node_id} printed no container start time: is it booted?")
    try:
        started = parse_started(lines[0])
    except ValueError:
        raise AccessLogError(
            f"{cfg.node_id}'s proxy container reported no start time ({lines[0][:60]!r}): the "
            "front door is not running yet; `make wait`"
        ) from None
    chips = lookup_accelerator(cfg.accelerator_type).chips
    return [ReplicaLog(cfg.node_id, started, lines[1:], chips)]
