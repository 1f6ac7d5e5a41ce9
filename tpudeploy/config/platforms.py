"""What the config derives and validates differently by platform, as data: one section each.

The config package sits below the seam (tpudeploy/platform.py) and cannot ask a Platform. What
config itself must know per platform (which tables apply, which run-end rules, the default run
duration, what the deadline job deletes and which stack declares it) is a PlatformSection here,
picked by lookup as the seam picks a Platform; nothing else in tpudeploy/config names a
platform. Everything else that differs (stacks, commands, what a deadline job may delete) is the
Platform's, behind the seam.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class PlatformSection:
    name: str
    # The top-level `provisioning` picks how the one TPU VM is provisioned: the TPU zone list,
    # a flex-start node's own end (its queued resource's run duration) and the run-end rules
    # apply. GKE's pools take [gke] capacity instead, and its zones are [gke]'s to check.
    one_node: bool
    # The [gke] table and [routing] gateway (replicas to route between) apply.
    node_pools: bool
    # max_run_duration's default is this provisioning model's (None: the config's own).
    run_duration_as: str | None
    # What the deadline job deletes, in messages; None: the provisioning model names it.
    deadline_noun: str | None
    deadline_target: str
    # The stack that declares the deadline and its job: <name>-<deadline_stack>.
    deadline_stack: str
    # A local deployment's stop role, one per deployment: <prefix><name with _>. A role's id
    # names what it holds, so the two platforms' roles differ (tpudeploy/identities.py).
    stop_role_prefix: str


TPU_VM = PlatformSection(
    name="tpu-vm",
    one_node=True,
    node_pools=False,
    run_duration_as=None,
    deadline_noun=None,
    deadline_target="the node",
    deadline_stack="node",
    stop_role_prefix="tpudeployNodeStop_",
)
# On GKE the cluster (its spot pool, flex-start pool and idle floor) gets the spot node's
# deadline: like a spot TPU VM, nothing else ends its billing.
GKE = PlatformSection(
    name="gke",
    one_node=False,
    node_pools=True,
    run_duration_as="spot",
    deadline_noun="GKE cluster",
    deadline_target="the cluster",
    deadline_stack="gke",
    stop_role_prefix="tpudeployClusterStop_",
)
SECTIONS = MappingProxyType({s.name: s for s in (TPU_VM, GKE)})


def section_of(platform: str) -> PlatformSection:
    """The section of a platform the schema accepted (its Literal names exactly these)."""
    return SECTIONS[platform]
