"""A deployment's Cloud Router and NAT: one definition for the TPU VM's node stack, GKE's cluster
stack and, for a pipeline deployment, the GitOps bootstrap (whose owner holds compute.routers.*,
which no deploy identity does: a router gives IAM Conditions no name to scope it by)."""

from __future__ import annotations

from cdktf_cdktf_provider_google_beta.google_compute_router import GoogleComputeRouter
from cdktf_cdktf_provider_google_beta.google_compute_router_nat import (
    GoogleComputeRouterNat,
    GoogleComputeRouterNatSubnetwork,
)
from constructs import Construct

from stacks.common import terraform_literal
from tpudeploy.config import DeployConfig


def cloud_nat(scope: Construct, cfg: DeployConfig, *, prefix: str = "", **extra: object) -> None:
    """A router and a NAT for the deployment's subnetwork in its region, all its ranges (a GKE
    node's pods' secondary range too). Private nodes have no external address: pulling the image
    and the weights goes out through NAT (Cloud NAT: a gateway per region and network, on a
    Cloud Router; cloud.google.com/nat/docs/overview), which bills per VM using it. The node's
    subnetwork only: a NAT for every subnetwork (ALL_SUBNETWORKS_*) may be the only NAT of the
    network in the region (Compute's RouterNat reference), so it would collide with another
    deployment's or the user's. A second deployment on the same subnetwork sets [network]
    nat = false and uses the first's (one NAT per subnetwork). `prefix`: construct ids in a
    stack holding several deployments' (the bootstrap); `extra`: e.g. depends_on."""
    router = GoogleComputeRouter(
        scope,
        f"{prefix}router",
        name=cfg.router_name,
        network=terraform_literal(cfg.network.network),
        region=cfg.effective_region,
        **extra,  # type: ignore[arg-type]
    )
    GoogleComputeRouterNat(
        scope,
        f"{prefix}nat",
        name=cfg.nat_name,
        router=router.name,
        region=cfg.effective_region,
        nat_ip_allocate_option="AUTO_ONLY",
        source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
        subnetwork=[
            GoogleComputeRouterNatSubnetwork(
                name=terraform_literal(cfg.nat_subnetwork),
                source_ip_ranges_to_nat=["ALL_IP_RANGES"],
            )
        ],
    )
