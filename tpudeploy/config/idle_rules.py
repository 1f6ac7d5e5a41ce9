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

    def refuse(why: str, fix: str) -> list[str]:
        return [problem("idle.stop_after", value, why, fix)]

    if not cfg.section.one_node:
        return refuse(
            "the idle stop ends one TPU VM; GKE replicas end with traffic by scaling to zero "
            "(issue 39, [gke] min_replicas = 0), not by deleting the cluster",
            "remove [idle], and use [gke] min_replicas = 0 where the cluster supports it",
        )
    if cfg.deadline_seconds is None and not cfg.flex_start_node:
        return refuse(
            'with max_run_duration = "none" there is no deadline, and the node\'s grant to '
            "delete itself ends with the deadline (a grant with no end would outlive the node)",
            'set max_run_duration (e.g. "8h"), or remove [idle]',
        )
    if cfg.gitops_managed:
        # Evidence (tests/gitops/test_idle_pipeline.py, over the synthesized bootstrap): the
        # bootstrap grants no node account any tpu.* permission, and no deploy identity holds
        # resourcemanager.projects.setIamPolicy, so the node stack cannot add the grant itself.
        return refuse(
            "a pipeline deployment's grants are the GitOps bootstrap's, applied once by an "
            "owner before any deploy: it cannot know a run's deadline (fixed at each deploy), "
            "so its grant of the node's delete to the node's account would have no end and "
            "reach every TPU node and queued resource of the project for as long as the account "
            "lives (Cloud TPU gives IAM conditions no resource name); and the deploy identity "
            "cannot add a grant ending at the deadline at deploy time without "
            "resourcemanager.projects.setIamPolicy on the project, which would let it grant "
            "itself any role",
            "remove [idle] from a pipeline deployment: its deadline job still ends the run",
        )
    # Flex-start's run ends at max_run_duration (the queued resource's run duration), spot and
    # on-demand at the deadline: both the same value (config/schema.py).
    end = cfg.max_run_duration_seconds
    if end is None:
        return []  # flex-start without an end: loading's run-end rule words it
    if seconds >= end:
        what = "the run's end" if cfg.flex_start_node else "the deadline"
        return refuse(
            f"{what} ({end // 60} min after the deploy) always comes first: "
            "the idle stop would never fire",
            "use a stop_after shorter than max_run_duration, or remove [idle]",
        )
    return []
