"""State the team shares: where a deployment's Terraform state lives (`make check` says it),
`make state-init` (a state bucket for local use, and the local state moved into it without
loss), and the refusal of a second file that declares the same deployment name.

Local state (terraform.<stack>.tfstate at the repository root) lives on one machine: a teammate
can neither see nor stop that deployment. With `state_bucket` set, every stack's backend is GCS
at gs://<bucket>/tpudeploy/<name>/<stack>/ (stacks/common.py), and every make target uses it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tpudeploy import terraform
from tpudeploy.config import ConfigError, DeployConfig
from tpudeploy.config.messages import problem
from tpudeploy.errors import UserError
from tpudeploy.gcp import statebucket
from tpudeploy.gitops import STATE_PREFIX_ROOT
from tpudeploy.gitops.deployments import same_name_files, same_name_refusal
from tpudeploy.tfrun import Terraform, TerraformError

# Terraform's gcs backend keeps the default workspace's state at <prefix>/default.tfstate
# (https://developer.hashicorp.com/terraform/language/backend/gcs: prefix "env/prod" is
# "Stored as: env/prod/default.tfstate").
STATE_OBJECT = "default.tfstate"
# What a local state file is renamed to once its bucket copy is verified: kept, never deleted,
# and no longer where a config without state_bucket would pick it up again.
MIGRATED_SUFFIX = ".migrated"
LOCAL_WARNING = (
    "warning: state is local (on this machine only): a teammate cannot see or stop this "
    "deployment; make state-init"
)


class StateInitError(UserError):
    """state-init stopped before changing anything it cannot undo; the message says what to do."""


def state_prefix(cfg: DeployConfig, stack: str) -> str:
    """stacks/common.py's backend prefix (tests/commands/test_state_init.py holds them equal)."""
    return f"{STATE_PREFIX_ROOT}/{cfg.name}/{stack}"


def state_lines(cfg: DeployConfig, stacks: Sequence[str], root: Path) -> list[str]:
    """`make check`'s lines on where state lives, with the warning when it is local."""
    if cfg.state_bucket:
        where = f"gs://{cfg.state_bucket}/{STATE_PREFIX_ROOT}/{cfg.name}/<stack>/{STATE_OBJECT}"
        who = (
            "applied by the GitOps pipeline (pipeline = true): its bootstrap makes the node "
            "account, secrets, APIs and NAT"
            if cfg.gitops_managed
            else "local use (no pipeline = true): these stacks make the node account, secrets, "
            "APIs and NAT"
        )
        return [f"  state: shared, {where} ({', '.join(stacks)})", f"  {who}"]
    files = ", ".join(str(terraform.local_state_path(s, root)) for s in stacks)
    return [f"  state: local, {files}", LOCAL_WARNING]


def refuse_same_name(cfg: DeployConfig, config_file: Path, root: Path) -> None:
    """Refuse the file in use when another deployment file of the repository declares its name.

    A file outside the repository (a test's, a scratch copy in /tmp) is not compared: the
    pipeline's files are the repository's, and nothing else is known to share its name."""
    try:
        rel = config_file.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return
    others = same_name_files(root, cfg.name, besides=rel)
    if others:
        raise ConfigError(
            str(config_file),
            [
                problem(
                    "name",
                    cfg.name,
                    same_name_refusal(rel, cfg.name, " and ".join(others)),
                    f'set another name in {rel} (e.g. name = "{cfg.name}-2"), or delete the copy',
                )
            ],
        )


def default_bucket(project: str) -> str:
    """The bootstrap's suggested name (tpudeploy/bootstrap_preflight.py: PROJECT-tfstate)."""
    return f"{project}-tfstate"


@dataclass(frozen=True, slots=True)
class StackState:
    """One stack's local state file and what it holds."""

    stack: str
    path: Path
    state: dict[str, Any] | None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StateInitError(
            f"{path} is not a readable Terraform state ({type(exc).__name__}); nothing was "
            "moved: restore it (e.g. from its .backup) and run make state-init again"
        ) from None
    return data if isinstance(data, dict) else None


def _resources(state: dict[str, Any]) -> list[Any]:
    return sorted(
        (json.dumps(r, sort_keys=True) for r in state.get("resources") or []),
    )


def same_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """One state: the same lineage, resources and outputs. Not the serial: a push over the empty
    state the gcs backend's init writes may number the snapshot past it."""
    return (
        a.get("lineage") == b.get("lineage")
        and _resources(a) == _resources(b)
        and a.get("outputs") == b.get("outputs")
    )


def _describe(state: dict[str, Any]) -> str:
    return (
        f"lineage {state.get('lineage')}, serial {state.get('serial')}, "
        f"{len(state.get('resources') or [])} resource(s)"
    )


def migrate_stack(tf: Terraform, local: StackState, where: str, out: TextIO) -> str:
    """Move one stack's local state into the backend its folder now declares; return what was
    done ("moved", "already there", "nothing to move").

    The backend's state is read first: one that differs from the local file is refused (nothing
    is written), since a teammate may have deployed from it. The push is then checked by reading
    it back before the local file is renamed (kept, never deleted)."""
    if local.state is None:
        print(f"  {local.stack}: no local state ({local.path.name}); nothing to move", file=out)
        return "nothing to move"
    tf.init("-reconfigure")
    remote = tf.state_pull()
    if remote is not None:
        if same_state(remote, local.state):
            local.path.rename(local.path.with_name(local.path.name + MIGRATED_SUFFIX))
            print(f"  {local.stack}: {where} already holds this state", file=out)
            return "already there"
        # An empty state (no resource, no output) is what the gcs backend's init writes for a
        # new prefix; Terraform itself lets a push replace it ("It's always okay to overwrite an
        # empty state, regardless of its lineage/serial", statemgr.CheckValidImport).
        if remote.get("resources") or remote.get("outputs"):
            raise StateInitError(
                f"{where} already holds state for {local.stack} ({_describe(remote)}) that "
                f"differs from {local.path} ({_describe(local.state)}); nothing was copied. "
                "If a teammate deploys from the bucket, theirs is the truth: move "
                f"{local.path.name} aside and run make state-init again. If yours is, compare "
                f"both (terraform -chdir={tf.stack_dir} state pull) and decide with them"
            )
    tf.state_push(local.path.resolve())
    pushed = tf.state_pull()
    if pushed is None or _resources(pushed) != _resources(local.state):
        raise StateInitError(
            f"{where} does not read back what was pushed for {local.stack}; {local.path} is "
            "kept as it was: check the bucket's versions (gcloud storage ls -a) and try again"
        )
    local.path.rename(local.path.with_name(local.path.name + MIGRATED_SUFFIX))
    print(
        f"  {local.stack}: moved {local.path.name} to {where} "
        f"(local copy kept as {local.path.name}{MIGRATED_SUFFIX})",
        file=out,
    )
    return "moved"


def grants_lines(project: str, bucket: str) -> list[str]:
    """What the operator needs, what teammates need, and what state-init grants: nothing."""
    return [
        f"  you need: {statebucket.CREATE_PERMISSION} on project {project} to create it "
        "(roles/storage.admin has it); then object read/write on it",
        f"  teammates need: {statebucket.TEAM_ROLE} on gs://{bucket}, or narrower, a grant "
        f"conditioned on gs://{bucket}/{STATE_PREFIX_ROOT}/<name>/ as the GitOps deploy "
        "identities' tpudeployState has (docs/gitops.md), plus what their own targets need",
        "  grants given: none (state-init changes no IAM policy)",
    ]


def state_init(
    cfg: DeployConfig,
    project: str,
    *,
    stacks: Sequence[str],
    api: Callable[[], statebucket.StateBucketApi],
    synthesize: Callable[[], Path],
    config_file: str,
    bucket_override: str = "",
    dry_run: bool = False,
    root: Path = terraform.REPO_ROOT,
    out: TextIO | None = None,
) -> int:
    """Create (or check) the state bucket; with state_bucket in the config, move each stack's
    local state into it. Never edits the config: it prints the line to add."""
    out = out or sys.stdout
    bucket = cfg.state_bucket or bucket_override or default_bucket(project)
    if cfg.state_bucket and bucket_override and bucket_override != cfg.state_bucket:
        raise StateInitError(
            f"STATE_BUCKET={bucket_override} but {config_file} sets state_bucket = "
            f'"{cfg.state_bucket}"; drop STATE_BUCKET, or change the config first'
        )
    spec = statebucket.StateBucketSpec(bucket, cfg.home_region.upper())
    locals_ = [
        StackState(
            s, terraform.local_state_path(s, root), _read(terraform.local_state_path(s, root))
        )
        for s in stacks
    ]
    prefix = "would " if dry_run else ""
    print(f"state bucket gs://{bucket} in {spec.location}, project {project}:", file=out)
    print(
        "  versioned, uniform bucket-level access, public access prevention enforced, "
        f"archived versions deleted past {spec.noncurrent_versions} newer, never force-destroyed",
        file=out,
    )
    print("\n".join(grants_lines(project, bucket)), file=out)
    if dry_run:
        print(
            f"  {prefix}create gs://{bucket} unless it exists (then check its settings)", file=out
        )
        for local in locals_:
            where = f"gs://{bucket}/{state_prefix(cfg, local.stack)}/{STATE_OBJECT}"
            what = "no local state" if local.state is None else f"{prefix}move {local.path}"
            print(f"  {local.stack}: {what} -> {where}", file=out)
        if not cfg.state_bucket:
            print(f'  then add to {config_file}: state_bucket = "{bucket}"', file=out)
        print("dry run: nothing was created, moved or written", file=out)
        return 0
    client = api()
    existing = client.get(bucket)
    if existing is None:
        client.insert(project, spec)
        print(f"  created gs://{bucket}", file=out)
    else:
        missing = statebucket.missing_settings(existing)
        if missing:
            raise StateInitError(
                f"gs://{bucket} exists but lacks what keeps state safe: " + "; ".join(missing)
            )
        print(f"  gs://{bucket} exists with the settings state needs", file=out)
    if not cfg.state_bucket:
        print(
            f"\nadd this line to {config_file} (state-init never edits it):\n"
            f'  state_bucket = "{bucket}"\n'
            # Not pipeline = true: that key makes the stacks leave the node account, secrets
            # and APIs to the GitOps bootstrap, and Terraform would destroy them here.
            "only that line: remote state changes no resource (your stacks keep declaring the "
            "node account, secrets and APIs); pipeline = true is for files the GitOps pipeline "
            "applies (docs/gitops.md)\n"
            "then run make state-init again: it moves the local state of "
            f"{', '.join(stacks)} into the bucket, and every make target uses it from then on",
            file=out,
        )
        return 0
    if all(local.state is None for local in locals_):
        print("  no local state to move: every make target uses the bucket", file=out)
        return 0
    outdir = synthesize()
    for local in locals_:
        where = f"gs://{bucket}/{state_prefix(cfg, local.stack)}/{STATE_OBJECT}"
        try:
            migrate_stack(Terraform(outdir / "stacks" / local.stack), local, where, out)
        except TerraformError as exc:
            raise StateInitError(f"{local.stack}: {exc}; {local.path} is kept as it was") from None
    print("state is shared: every make target uses the bucket", file=out)
    return 0
