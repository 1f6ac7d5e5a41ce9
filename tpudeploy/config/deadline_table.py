"""`[deadline]`: where the Cloud Scheduler job deleting a spot or on-demand node, or a GKE
cluster, runs."""

from __future__ import annotations

from pydantic import field_validator

from tpudeploy import names
from tpudeploy.config.base import Strict


class DeadlineConfig(Strict):
    """The deadline job of a spot or on-demand node, or of a GKE cluster
    (stacks/deadline_job.py)."""

    # Cloud Scheduler is regional and its locations are not every Compute region: us-west4 (the
    # build log's) is not confirmed (its locations page as stored stops at us-east4 in the
    # Americas). `make preflight` checks the region against locations.list when it can.
    region: str = ""
    """Cloud Scheduler region of the deadline job; empty: the node's region"""

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        return check_scheduler_region(v)


def check_scheduler_region(v: str) -> str:
    if v and not names.REGION_RE.fullmatch(v):
        raise ValueError(
            "not a region name; write a Cloud Scheduler location such as us-central1 "
            "(`gcloud scheduler locations list` shows your project's), or leave it out for "
            "the node's region"
        )
    return v
