"""Builds the cdktf App for one deployment; no side effects at import."""

from __future__ import annotations

import datetime
import shutil
from collections.abc import Callable
from pathlib import Path

from cdktf import App, TerraformStack

from stacks.secrets import SecretsStack
from stacks.tpuvm.node import TpuNodeStack
from tpudeploy.config import DeployConfig
from tpudeploy.platform import platform_for, summary_lines


def _node(app: App, cfg: DeployConfig) -> TerraformStack:
    return TpuNodeStack(app, cfg.node_stack_name, config=cfg)


def _cluster(app: App, cfg: DeployConfig) -> TerraformStack:
    # Imported here only: the Kubernetes bindings' jsii assembly costs the TPU VM nothing.
    from stacks.gke.cluster import GkeStack

    return GkeStack(app, cfg.gke_stack_name, config=cfg)


def _serving(app: App, cfg: DeployConfig) -> TerraformStack:
    from stacks.gke.serving import ServingStack

    return ServingStack(app, cfg.serving_stack_name, config=cfg)


# The construct behind each kind of billing stack the platforms name
# (Platform.billing_stack_kinds): the seam says which, this says how.
_STACK_KINDS: dict[str, Callable[[App, DeployConfig], TerraformStack]] = {
    "node": _node,
    "cluster": _cluster,
    "serving": _serving,
}


def build_app(cfg: DeployConfig, *, outdir: str | None = None) -> App:
    """Two lifetimes, two stacks: `<name>-secrets` (long-lived) and `<name>-node` (billing); on
    GKE the billing part is the cluster (`<name>-gke`) and its objects (`<name>-serving`)."""
    app = App(outdir=outdir) if outdir else App()
    previous: TerraformStack = SecretsStack(app, cfg.secrets_stack_name, config=cfg)
    # Each depends on the one before: the cluster on its secrets, the serving objects on it.
    for kind in platform_for(cfg).billing_stack_kinds:
        stack = _STACK_KINDS[kind](app, cfg)
        stack.add_dependency(previous)
        previous = stack
    return app


def prune_other_stacks(outdir: str, *, keep: tuple[str, ...]) -> list[str]:
    """Remove stack folders of other deployments from `outdir`; return their names.

    App.synth() rewrites manifest.json with this deployment's stacks only and leaves other
    folders behind; the cdktf CLI (diff, deploy) deletes them after its own synth. Doing the same
    here keeps `make synth` and `make scan` to exactly the deployment named by DEPLOY_CONFIG.
    State never lives in these folders (LocalBackend writes to the repository root, GCS remotely).
    """
    stacks_dir = Path(outdir) / "stacks"
    removed = []
    for folder in sorted(stacks_dir.iterdir()) if stacks_dir.is_dir() else []:
        if folder.is_dir() and folder.name not in keep:
            shutil.rmtree(folder)
            removed.append(folder.name)
    return removed


def synth(cfg: DeployConfig, *, outdir: str, source: str) -> None:
    """Write both stacks' JSON to `outdir`, then say where it went and what it will cost."""
    # cdktf creates the last folder only; a deployment's is two levels below cdktf.out.
    Path(outdir).mkdir(parents=True, exist_ok=True)
    build_app(cfg, outdir=outdir).synth()
    stacks = platform_for(cfg).stacks(cfg)
    prune_other_stacks(outdir, keep=stacks)
    print(f"synthesized deployment {cfg.name!r} from {source}:")
    for stack in stacks:
        print(f"  {outdir}/stacks/{stack}/cdk.tf.json")
    print()
    print("\n".join(summary_lines(cfg, today=datetime.date.today())))
