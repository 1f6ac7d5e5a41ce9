"""The deadline as data: defaults per provisioning model, how a job's schedule reads back, what
`make extend` accepts. Pure functions; the stacks and Terraform are tested beside this file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tpudeploy import deadline
from tpudeploy.config import ConfigError, parse_config

NOW = datetime(2026, 8, 9, 12, 0, tzinfo=UTC)
HOUR = 3600


@pytest.mark.parametrize(
    ("provisioning", "seconds"),
    [("flex-start", 4 * HOUR), ("spot", 8 * HOUR), ("on-demand", 8 * HOUR)],
)
def test_no_default_configuration_bills_without_an_end(provisioning: str, seconds: int) -> None:
    cfg = parse_config({"provisioning": provisioning})
    assert cfg.max_run_duration_seconds == seconds
    # Spot and on-demand: a deadline job; flex-start: the queued resource's own run duration.
    assert cfg.deadline_seconds == (None if provisioning == "flex-start" else seconds)


@pytest.mark.parametrize("spelling", ["none", "NONE", " None "])
def test_none_opts_out_explicitly(spelling: str) -> None:
    cfg = parse_config({"provisioning": "spot", "max_run_duration": spelling})
    assert cfg.max_run_duration_seconds is None and cfg.deadline_seconds is None


def test_flex_start_cannot_run_without_an_end() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"max_run_duration": "none"})
    (problem,) = err.value.problems
    assert problem.startswith("max_run_duration = 'none':")
    assert "Fix:" in problem and "spot" in problem


def test_auto_recover_is_for_nodes_that_can_be_preempted() -> None:
    assert parse_config({"provisioning": "spot", "auto_recover": True}).auto_recover
    with pytest.raises(ConfigError) as err:
        parse_config({"auto_recover": True})
    (problem,) = err.value.problems
    assert problem.startswith("auto_recover = true:") and "Fix:" in problem


def test_a_deadline_too_short_for_its_job_is_refused() -> None:
    assert parse_config({"provisioning": "spot", "max_run_duration": "15m"}).deadline_seconds == 900
    with pytest.raises(ConfigError) as err:
        parse_config({"provisioning": "on-demand", "max_run_duration": "10m"})
    (problem,) = err.value.problems
    assert problem.startswith("max_run_duration = '10m':") and 'at least "15m"' in problem
    # Flex-start's run duration is the TPU API's own: no job to create.
    assert parse_config({"max_run_duration": "10m"}).max_run_duration_seconds == 600


@pytest.mark.parametrize("value", ["8d", "eight hours", 0, True])
def test_a_bad_deadline_names_key_value_and_fix(value: object) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"provisioning": "spot", "max_run_duration": value})
    (problem,) = err.value.problems
    assert problem.startswith("max_run_duration = ") and "Fix:" in problem


def test_names_stay_within_gcp_limits() -> None:
    cfg = parse_config({"name": "a" * 24, "provisioning": "spot"})
    assert len(cfg.stop_account_id) <= 30  # service-account ids: 6-30 characters
    assert cfg.stop_account_id not in (cfg.service_account_id, cfg.deploy_account_id)
    assert set(cfg.stop_role_id) <= set(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."
    )


@pytest.mark.parametrize(
    ("at", "cron"),
    [
        (datetime(2026, 8, 9, 16, 5, tzinfo=UTC), "5 16 9 8 *"),
        (datetime(2026, 12, 31, 0, 0, tzinfo=UTC), "0 0 31 12 *"),
        (datetime(2026, 1, 1, 1, 30, tzinfo=UTC), "30 1 1 1 *"),
    ],
)
def test_cron_of(at: datetime, cron: str) -> None:
    assert deadline.cron_of(at) == cron


def test_cron_of_converts_to_utc() -> None:
    from datetime import timezone

    plus_two = timezone(timedelta(hours=2))
    assert deadline.cron_of(datetime(2026, 8, 9, 18, 0, tzinfo=plus_two)) == "0 16 9 8 *"


def _job(**fields: str) -> dict[str, object]:
    return {"name": "projects/p/locations/us-west4/jobs/x-deadline", "state": "ENABLED", **fields}


def test_a_job_that_has_not_fired_is_the_deadline() -> None:
    view = deadline.job_view(_job(scheduleTime="2026-08-09T20:00:00Z"), NOW)
    assert view.status == "pending"
    assert view.at == datetime(2026, 8, 9, 20, 0, tzinfo=UTC)
    assert view.describe(NOW) == "deadline 2026-08-09T20:00:00Z (in 8 h 0 min)"


def test_a_job_that_fired_waits_a_year_and_the_deadline_has_passed() -> None:
    view = deadline.job_view(
        _job(scheduleTime="2027-08-09T10:00:00Z", lastAttemptTime="2026-08-09T10:00:04Z"), NOW
    )
    assert view.status == "fired"
    assert view.at == datetime(2026, 8, 9, 10, 0, 4, tzinfo=UTC)
    assert "has passed" in view.describe(NOW)


def test_a_new_deadline_after_an_old_firing_is_pending_again() -> None:
    """`make deploy` after the deadline renewed it: the job keeps its last attempt."""
    view = deadline.job_view(
        _job(scheduleTime="2026-08-09T20:00:00Z", lastAttemptTime="2026-08-08T10:00:04Z"), NOW
    )
    assert view.status == "pending"


def test_paused_and_missing_jobs_stop_nothing() -> None:
    paused = deadline.job_view(_job(state="PAUSED", scheduleTime="2026-08-09T20:00:00Z"), NOW)
    assert paused.status == "paused" and "nothing stops" in paused.describe(NOW)
    assert deadline.job_view(None, NOW).status == "missing"


def test_a_job_whose_update_failed_is_no_deadline() -> None:
    """Cloud Scheduler's jobs.patch: a job left UPDATE_FAILED "may not be executed" until an
    update succeeds. Status never shows its schedule as a deadline, and extend says what
    applies the job again instead of patching a schedule nobody knows holds."""
    view = deadline.job_view(_job(state="UPDATE_FAILED", scheduleTime="2026-08-09T20:00:00Z"), NOW)
    assert view.status == "update-failed" and not view.pending
    assert view.describe(NOW).startswith("deadline job is UPDATE_FAILED")
    assert "nothing sure stops the billing" in view.describe(NOW)
    with pytest.raises(deadline.ExtendError, match="`make deploy` applies it again"):
        deadline.extended(view, HOUR, NOW)


def test_extend_adds_to_the_pending_deadline() -> None:
    view = deadline.job_view(_job(scheduleTime="2026-08-09T20:00:00Z"), NOW)
    assert deadline.extended(view, 2 * HOUR, NOW) == datetime(2026, 8, 9, 22, 0, tzinfo=UTC)


def test_extend_stays_within_a_week() -> None:
    view = deadline.job_view(_job(scheduleTime="2026-08-09T20:00:00Z"), NOW)
    with pytest.raises(deadline.ExtendError, match="7 days"):
        deadline.extended(view, 7 * 24 * HOUR, NOW)


def test_extend_refuses_an_ended_run() -> None:
    fired = deadline.job_view(
        _job(scheduleTime="2027-08-09T10:00:00Z", lastAttemptTime="2026-08-09T10:00:04Z"), NOW
    )
    with pytest.raises(deadline.ExtendError, match="make deploy"):
        deadline.extended(fired, HOUR, NOW)
    with pytest.raises(deadline.ExtendError, match="make deploy"):
        deadline.extended(deadline.job_view(None, NOW), HOUR, NOW)


def test_times_read_back_as_written() -> None:
    at = deadline.parse_time("2026-08-09T16:05:00Z")
    assert deadline.format_time(at) == "2026-08-09T16:05:00Z"
    with pytest.raises(ValueError, match="UTC"):
        deadline.parse_time("2026-08-09T16:05:00")
    assert deadline.remaining_text(-1) == "passed"
    assert deadline.remaining_text(26 * HOUR + 60) == "in 1 d 2 h 1 min"
