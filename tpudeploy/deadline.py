"""A deployment's deadline: fixed once at deploy time, enforced by the cloud (both platforms).

The build log: spot and on-demand "bill until preempted or deleted". The billing stack therefore
declares a Cloud Scheduler job that deletes what bills at a deadline: the TPU VM's node (the TPU
API's nodes.delete, tpudeploy.tpuvm.deadline_target) or the GKE cluster with its pools and idle
floor (the container API's clusters.delete, tpudeploy.gke.deadline_target).
stacks/deadline_job.py declares both.
The deadline is a Terraform value computed once, when the stack's `terraform_data.deadline-time`
is created (`timeadd(timestamp(), ...)`), and kept with `ignore_changes`: timestamp() changes at
every plan, and a second `make deploy` must plan no change. It is renewed only deliberately:
a changed max_run_duration replaces it, `make deploy` after the deadline passed replaces it
(tpudeploy.tpuvm.recover; on GKE, creating the cluster again), and `make extend` sets it through
the `extended_deadline` variable.

Standard library only: the GitOps helper reads a job's schedule under a bare python3.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tpudeploy.durations import MAX_DURATION_SECONDS
from tpudeploy.errors import UserError

# Terraform formatdate() specs. The deadline is kept to the minute (cron has no seconds), so the
# time shown is the time the job fires: up to 59 s before deploy time + max_run_duration.
DEADLINE_FORMAT = "YYYY-MM-DD'T'hh:mm:00Z"
# Cloud Scheduler's unix-cron: minute hour day-of-month month day-of-week, in TIME_ZONE. It has
# no year field: after firing, the job's next run is a year later (see job_view below).
CRON_FORMAT = "m h D M '*'"
TIME_ZONE = "Etc/UTC"
# The variable `make extend` sets; empty means "deploy time + max_run_duration".
VARIABLE = "extended_deadline"
# Construct ids in the billing stack (a construct id is the Terraform resource name: renaming
# one replaces the resource, so they stay short and fixed): the deadline and the job.
DEADLINE_ID = "deadline-time"
DEADLINE_JOB_ID = "deadline-job"
DEADLINE_ADDRESS = f"terraform_data.{DEADLINE_ID}"
DEADLINE_JOB_ADDRESS = f"google_cloud_scheduler_job.{DEADLINE_JOB_ID}"
# The stop account's grant of its delete, declared with the job and conditioned on the deadline
# (grant_expression): a local deployment's only grant of it.
DEADLINE_GRANT_ID = "deadline-stop-grant"
DEADLINE_GRANT_ADDRESS = f"google_project_iam_member.{DEADLINE_GRANT_ID}"
# The idle stop (issue 39, [idle] stop_after): the node's own account holds the same role under
# the same condition, so the node can delete itself until the deadline plus GRANT_MARGIN
# (stacks/deadline_job.py says why no narrower grant exists).
IDLE_GRANT_ID = "idle-stop-grant"
IDLE_GRANT_ADDRESS = f"google_project_iam_member.{IDLE_GRANT_ID}"
# The "stops soon" warning (issue 38): a second job, firing WARN_BEFORE ahead of the deadline
# with a harmless request (tpudeploy/stopsoon.py), whose run Cloud Logging records and an alert
# policy matches. Declared with the deadline job and hanging on the same value, so `make extend`
# and a new deadline move it too (deadline_ops.EXTEND_ADDRESSES).
WARN_BEFORE = "30m"
WARN_BEFORE_SECONDS = 1800
WARN_JOB_ID = "deadline-warn-job"
WARN_JOB_ADDRESS = f"google_cloud_scheduler_job.{WARN_JOB_ID}"
WARN_ALERT_ID = "alert-deadline-soon"
WARN_ALERT_ADDRESS = f"google_monitoring_alert_policy.{WARN_ALERT_ID}"
# Cloud Scheduler retries a failed attempt (a 5xx, an expired token) this often, backing off.
RETRY_COUNT = 5
MIN_BACKOFF = "60s"
ATTEMPT_DEADLINE = "60s"


# The cron line has no year: the job fires again at the same minute every year, long after what
# it deleted is gone, and deletes whatever has that name then. The job cannot be made one-shot
# (Cloud Scheduler has no year field and no run-once job); its identity's grant can: IAM
# conditions take request.time for every service (cloud.google.com/iam/docs/
# conditions-attribute-reference, "Date/time attributes"), so the stop account may delete only
# until the deadline plus GRANT_MARGIN. The margin covers the job's own attempts: at most
# RETRY_COUNT retries, backing off from MIN_BACKOFF and doubling (Cloud Scheduler's
# maxDoublings defaults to 5: 60+120+240+480+960 s), each up to ATTEMPT_DEADLINE: about 37 min.
GRANT_MARGIN = "1h"
GRANT_MARGIN_SECONDS = 3600


def grant_expression(deadline_ref: str, resource_condition: str = "") -> str:
    """The stop grant's IAM condition (a Terraform template): the request is made before the
    deadline plus GRANT_MARGIN, and `resource_condition` (the target's own, where its service
    gives IAM its name) holds."""
    before = f'request.time < timestamp("${{timeadd({deadline_ref}, "{GRANT_MARGIN}")}}")'
    return f"{before} && {resource_condition}" if resource_condition else before


def job_name(project: str, region: str, job_id: str) -> str:
    """A Cloud Scheduler job's resource name (what jobs.get and jobs.patch take)."""
    return f"projects/{project}/locations/{region}/jobs/{job_id}"


def deadline_expression(seconds: int) -> str:
    """The terraform_data input: `make extend`'s value, else the apply's time + the duration."""
    return (
        f'var.{VARIABLE} != "" ? var.{VARIABLE} : '
        f'formatdate("{DEADLINE_FORMAT}", timeadd(timestamp(), "{seconds}s"))'
    )


def cron_expression(deadline_ref: str) -> str:
    """The job's schedule, from the deadline as Terraform holds it."""
    return f'formatdate("{CRON_FORMAT}", {deadline_ref})'


def warn_cron_expression(deadline_ref: str) -> str:
    """The warning job's schedule: WARN_BEFORE ahead of the deadline as Terraform holds it."""
    return cron_expression(f'timeadd({deadline_ref}, "-{WARN_BEFORE}")')


# Terraform refuses a `deadline` that is not a timestamp (a typo in `make extend` would
# otherwise fail inside formatdate with a less helpful message).
VARIABLE_CONDITION = f'var.{VARIABLE} == "" || can(timeadd(var.{VARIABLE}, "0s"))'


def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp as the APIs and Terraform write it, as an aware UTC datetime."""
    value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone; write it in UTC, e.g. 2026-08-09T16:00:00Z")
    return value.astimezone(UTC)


def format_time(value: datetime) -> str:
    """What Terraform's DEADLINE_FORMAT writes: UTC, to the minute."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:00Z")


def cron_of(deadline: datetime) -> str:
    """The cron line the job gets for `deadline` (what CRON_FORMAT makes in Terraform)."""
    d = deadline.astimezone(UTC)
    return f"{d.minute} {d.hour} {d.day} {d.month} *"


def remaining_text(seconds: float) -> str:
    if seconds <= 0:
        return "passed"
    minutes = int(seconds // 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [f"{days} d"] if days else []
    parts += [f"{hours} h"] if hours or days else []
    parts.append(f"{minutes} min")
    return "in " + " ".join(parts)


@dataclass(frozen=True)
class JobView:
    """What the deadline job in the cloud says about the deployment's deadline."""

    # "pending": it fires at `at`; "fired": it fired (at `at` when known) and runs next a year
    # later; "paused": it will not fire; "update-failed": a change to it did not finish, and it
    # may not fire; "missing": there is no job.
    status: str
    at: datetime | None = None
    last_attempt: datetime | None = None

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    def describe(self, now: datetime, what: str = "the node") -> str:
        """`what`: what the job deletes ("the node", "the cluster")."""
        at = format_time(self.at) if self.at else "an unknown time"
        if self.status == "pending" and self.at is not None:
            return f"deadline {at} ({remaining_text((self.at - now).total_seconds())})"
        if self.status == "fired":
            return f"deadline {at} has passed: the job deleted {what}"
        if self.status == "paused":
            return f"deadline job is PAUSED: nothing stops the billing (deadline was {at})"
        if self.status == "update-failed":
            return (
                "deadline job is UPDATE_FAILED (a change to it did not finish, and Cloud "
                f"Scheduler may not run it): nothing sure stops the billing (deadline was {at})"
            )
        return "no deadline job: nothing stops the billing"


def job_view(job: dict[str, object] | None, now: datetime) -> JobView:
    """Judge a Cloud Scheduler job (the API's JSON). Its `scheduleTime` is its next run: within
    the week a deadline may lie ahead, that is the deadline; further out, the yearly cron has
    already fired at the deadline and waits for next year."""
    if job is None:
        return JobView("missing")
    last = _time_or_none(job.get("lastAttemptTime"))
    scheduled = _time_or_none(job.get("scheduleTime"))
    if str(job.get("state", "")) in ("PAUSED", "DISABLED"):
        return JobView("paused", scheduled, last)
    if str(job.get("state", "")) == "UPDATE_FAILED":
        # Cloud Scheduler, jobs.patch: "If jobs.patch does not successfully return, it is
        # possible for the job to be in an UPDATE_FAILED state. A job in this state may not be
        # executed. If this happens, retry the jobs.patch request until a successful response
        # is received." A make extend or deploy cut short can leave it so: never a deadline.
        return JobView("update-failed", scheduled, last)
    horizon = now + timedelta(seconds=MAX_DURATION_SECONDS) + timedelta(days=1)
    if (
        scheduled is not None
        and now - timedelta(minutes=10) < scheduled <= horizon
        and (last is None or last < scheduled)
    ):
        return JobView("pending", scheduled, last)
    when = last
    if when is None and scheduled is not None:
        when = scheduled if scheduled <= now else _a_year_before(scheduled)
    return JobView("fired", when, last)


def _a_year_before(value: datetime) -> datetime:
    try:
        return value.replace(year=value.year - 1)
    except ValueError:  # 29 February
        return value - timedelta(days=365)


def _time_or_none(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


class ExtendError(UserError, ValueError):
    """`make extend` refused, with what to do instead: one line, never a traceback."""


def extended(view: JobView, by_seconds: int, now: datetime, what: str = "the node") -> datetime:
    """The new deadline for `make extend BY=...`: the pending one plus `by_seconds`, within a
    week of now (the same bound as max_run_duration)."""
    if by_seconds <= 0:
        raise ExtendError("BY must be a positive duration, e.g. BY=2h")
    if not view.pending or view.at is None:
        if view.status == "fired":
            raise ExtendError(
                f"the deadline has passed and the job deleted {what}: `make deploy` starts a "
                "new run with a fresh deadline"
            )
        if view.status == "paused":
            raise ExtendError(
                "the deadline job is paused, so there is no deadline to extend: `make deploy` "
                "enables it again"
            )
        if view.status == "update-failed":
            raise ExtendError(
                "the deadline job is UPDATE_FAILED (a change to it did not finish, and Cloud "
                "Scheduler may not run it): `make deploy` applies it again, then `make extend` "
                "moves the deadline it shows"
            )
        raise ExtendError(f"there is no deadline job: `make deploy` creates {what} and its job")
    new = view.at + timedelta(seconds=by_seconds)
    limit = now + timedelta(seconds=MAX_DURATION_SECONDS)
    if new > limit:
        raise ExtendError(
            f"{format_time(new)} is more than 7 days from now (at most {format_time(limit)}); "
            'extend by less, or set max_run_duration = "none" and run `make deploy` to bill '
            "until `make destroy`"
        )
    return new
