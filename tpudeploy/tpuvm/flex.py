"""The flex-start queued resource's spec, derived from the deployment config."""

from __future__ import annotations

from tpudeploy.config import DeployConfig
from tpudeploy.config.ladder import RUNG_LABEL
from tpudeploy.config.schema import DEFAULT_RUN_DURATION
from tpudeploy.durations import parse_duration
from tpudeploy.names import service_account_email
from tpudeploy.render import node_metadata
from tpudeploy.tpuvm.queued_resource import DEFAULT_SCOPES, QueuedResourceSpec


def node_labels(cfg: DeployConfig) -> dict[str, str]:
    """The node's labels, the same on the VM and the queued resource's node. A ladder's node
    also says which rung it is (from 1): `make status` reads it from the node itself."""
    rung = {} if cfg.rung_index is None else {RUNG_LABEL: str(cfg.rung_index + 1)}
    return {"deployment": cfg.name, "provisioning": cfg.provisioning, **rung, **cfg.labels}


def node_description(cfg: DeployConfig) -> str:
    return f"vLLM {cfg.vllm.model} ({cfg.provisioning})"


def queued_resource_spec(cfg: DeployConfig, project: str) -> QueuedResourceSpec:
    """The node the queued resource carries is the same node the VM path declares: same startup
    script, OS Login, dedicated service account, network, tags and labels."""
    metadata = node_metadata(cfg)
    startup = metadata.pop("startup-script")
    return QueuedResourceSpec(
        project=project,
        zone=cfg.zone,
        queued_resource_id=cfg.queued_resource_id,
        node_id=cfg.node_id,
        accelerator_type=cfg.accelerator_type,
        runtime_version=cfg.runtime_version,
        startup_script=startup,
        metadata=metadata,
        service_account_email=service_account_email(cfg.service_account_id, project),
        scopes=DEFAULT_SCOPES,
        network=cfg.network.network,
        subnetwork=cfg.network.subnetwork or None,
        enable_external_ips=cfg.network.enable_external_ip,
        tags=(cfg.network_tag,),
        labels=node_labels(cfg),
        description=node_description(cfg),
        # The VM path sets shielded secure boot; the flex-start node is the same node.
        enable_secure_boot=True,
        # A spot or on-demand deployment's spec only names its node (make status, recover);
        # one with no end ("none") still needs a valid run duration to build it.
        max_run_duration_seconds=cfg.max_run_duration_seconds
        or parse_duration(DEFAULT_RUN_DURATION["flex-start"]),
    )


def delete_queued_resource(cfg: DeployConfig, project: str, *, timeout: float | None) -> int:
    """Delete the deployment's flex-start queued resource whatever Terraform's state says.

    `make destroy` runs this after `cdktf destroy`: Terraform never runs the destroy provisioner
    of a tainted terraform_data (a create that failed or was killed), so a queued resource could
    outlive the destroy and later bill. The name comes from the config; a missing one is success.
    Checked for every provisioning model: a deployment switched away from flex-start may still
    have one.
    """
    import os
    import sys

    from tpudeploy.tpuvm import queued_resource as qr

    spec = queued_resource_spec(cfg, project)
    poll = float(os.environ.get(qr.POLL_ENV) or qr.DEFAULT_POLL)
    try:
        qr.QueuedResourceClient(spec, poll=poll).delete(
            timeout=timeout or qr.DEFAULT_DELETE_TIMEOUT
        )
    except qr.QueuedResourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
