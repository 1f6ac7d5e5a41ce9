"""The Gateway's proxy-only subnet ([routing] proxy_subnet_cidr): one definition for the serving
stack and, for a pipeline deployment, the GitOps bootstrap. A subnetwork is not among the Compute
Engine types that give IAM Conditions a name (tools/rehearsal/fakes/iamrules.py, ATTRIBUTES), so
compute.subnetworks.* could not be scoped to this one: no deploy identity holds it."""

from __future__ import annotations

from typing import Any

from cdktf_cdktf_provider_google_beta.google_compute_subnetwork import GoogleComputeSubnetwork
from constructs import Construct

from tpudeploy.config import DeployConfig
from tpudeploy.gke import routing


def proxy_subnet(
    scope: Construct, cfg: DeployConfig, *, project: str, prefix: str = "", **extra: Any
) -> GoogleComputeSubnetwork:
    """Where the Gateway's proxies run, in the deployment's network and region."""
    return GoogleComputeSubnetwork(
        scope,
        f"{prefix}proxy-only-subnet",
        name=routing.proxy_subnet_name(cfg),
        project=project,
        region=cfg.effective_region,
        network=cfg.network.network,
        ip_cidr_range=cfg.routing.proxy_subnet_cidr,
        purpose=routing.PROXY_SUBNET_PURPOSE,
        role="ACTIVE",
        **extra,
    )
