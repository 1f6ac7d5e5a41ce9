"""Where `[idle] stop_after` (config/idle_table.py) cannot work, judged on one deployment as
one rung of its capacity ladder would be (config/loading.py applies it rung by rung). Apart
from the table because it reads the whole config, which the schema builds from the table."""

from __future__ import annotations

from tpudeploy.config.messages import problem
from tpudeploy.config.schema import DeployConfig


def idle_problems(cfg: DeployConfig) -> list[str]:
    """Where an idle stop cannot work, each naming [idle] stop_after, why and the fix. `cfg`:
    the deployment as one rung of its capacity ladder would be (config/loading.py judges each
    rung in turn, as it does the zone and the run's end)."""
    seconds = cfg.idle.seconds
    if seconds is None:
        return []
    value = cfg.idle.stop_after
    provisioning, deadline_seconds = cfg.provisioning, cfg.deadline_seconds

    def refuse(why: str, fix: str) -> list[str]:
        return [problem("idle.stop_after", value, why, fix)]

    if not cfg.section.one_node:
        return refuse(
            "the idle stop ends one TPU VM; GKE replicas end with traffic by scaling to zero "
            "(issue 39, [gke] min_replicas = 0), not by deleting the cluster",
            "remove [idle], and use [gke] min_replicas = 0 where the cluster supports it",
        )
    if provisioning == "flex-start":
        # Not built yet: the node would need tpu.queuedResources.delete on its own queued
        # resource, and the stop role it borrows (stacks/deadline_job.py) exists only for spot
        # and on-demand. Flex-start ends at max_run_duration anyway.
        return refuse(
            "not built for flex-start yet (its queued resource would have to go too, and the "
            "node has no grant for that); flex-start already ends at max_run_duration",
            'use provisioning = "spot" or "on-demand", or a shorter max_run_duration',
        )
    if deadline_seconds is None:
        return refuse(
            'with max_run_duration = "none" there is no deadline, and the node\'s grant to '
            "delete itself ends with the deadline (a grant with no end would outlive the node)",
            'set max_run_duration (e.g. "8h"), or remove [idle]',
        )
    if cfg.gitops_managed:
        return refuse(
            "a pipeline deployment's grants are the GitOps bootstrap's, which does not grant "
            "the node's account its delete yet",
            "remove [idle] from a pipeline deployment",
        )
    if seconds >= deadline_seconds:
        return refuse(
            f"the deadline ({deadline_seconds // 60} min after the deploy) always comes first: "
            "the idle stop would never fire",
            "use a stop_after shorter than max_run_duration, or remove [idle]",
        )
    return []
