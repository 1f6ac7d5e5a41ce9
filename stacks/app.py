"""Builds the cdktf App for one deployment; no side effects at import."""

from __future__ import annotations

import os
import sys

from cdktf import App

from stacks.secrets import SecretsStack
from stacks.tpu_node import TpuNodeStack
from tpudeploy.cli import summary_lines
from tpudeploy.config import ConfigError, DeployConfig, config_path, load_config


def build_app(cfg: DeployConfig, *, outdir: str | None = None) -> App:
    """Two lifetimes, two stacks: `<name>-secrets` (long-lived) and `<name>-node` (billing)."""
    app = App(outdir=outdir) if outdir else App()
    secrets = SecretsStack(app, cfg.secrets_stack_name, config=cfg)
    node = TpuNodeStack(app, cfg.node_stack_name, config=cfg)
    node.add_dependency(secrets)
    return app


def main() -> int:
    """Synthesize the deployment named by DEPLOY_CONFIG (else deploy.toml); exit 2 on bad config."""
    path = config_path()
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    # The cdktf CLI passes its output directory in CDKTF_OUTDIR; `make synth` uses the default.
    outdir = os.environ.get("CDKTF_OUTDIR") or "cdktf.out"
    build_app(cfg, outdir=outdir).synth()
    print(f"synthesized deployment {cfg.name!r} from {path}:")
    for stack in (cfg.secrets_stack_name, cfg.node_stack_name):
        print(f"  {outdir}/stacks/{stack}/cdk.tf.json")
    print()
    print("\n".join(summary_lines(cfg)))
    return 0
