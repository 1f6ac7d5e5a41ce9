"""After an idle stop (issue 39): the node is gone while Terraform's state still has it and its
deadline is pending. `make deploy` creates it again (Terraform's refresh finds it gone) with the
same deadline and says whether it boots warm; `make recover` (and the recover workflow) never
brings it back: the stop was the billing stop, on purpose."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.fake_scheduler_api import FakeSchedulerApi
from tests.fake_tpu_api import FakeTpuApi
from tests.tpuvm.test_recover import NOW, PROJECT, _cfg, _job, _live
from tpudeploy.gcp.scheduler import SchedulerApi
from tpudeploy.render import compile_cache_key
from tpudeploy.tpuvm import queued_resource as qr
from tpudeploy.tpuvm import recover
from tpudeploy.tpuvm.addresses import QUEUED_RESOURCE_ADDRESS

IDLE: dict[str, Any] = {"idle": {"stop_after": "30m"}}


@pytest.fixture
def apis(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeTpuApi, FakeSchedulerApi]]:
    with FakeTpuApi() as tpu, FakeSchedulerApi() as sched:
        monkeypatch.setenv("TPU_EMULATOR_HOST", tpu.host)
        monkeypatch.setenv("CLOUD_SCHEDULER_EMULATOR_HOST", sched.host)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", sched.host)
        yield tpu, sched


def test_deploy_after_an_idle_stop_creates_the_node_with_the_same_deadline(
    apis: tuple[FakeTpuApi, FakeSchedulerApi],
) -> None:
    _, sched = apis
    cfg = _cfg("spot", **IDLE)
    sched.set_job(_job(cfg), schedule_time=NOW + timedelta(hours=3))
    live = _live(cfg)
    assert live.state == recover.NOT_FOUND
    deploy = recover.decide(cfg, live, recover.DEPLOY, NOW)
    assert not deploy.acts  # nothing tainted: the deadline stays, the refresh finds no node
    assert "the idle stop ended its billing: this deploy creates it again, same deadline" in (
        deploy.summary
    )


def test_recover_never_undoes_an_idle_stop(apis: tuple[FakeTpuApi, FakeSchedulerApi]) -> None:
    _, sched = apis
    cfg = _cfg("spot", **IDLE)
    sched.set_job(_job(cfg), schedule_time=NOW + timedelta(hours=3))
    again = recover.decide(cfg, _live(cfg), recover.RECOVER, NOW)
    assert not again.acts
    assert "deletes itself" in again.summary and "`make deploy` brings it back" in again.summary
    # Without [idle] a gone node before its deadline is still brought back (unchanged).
    plain = _cfg("spot")
    assert recover.decide(plain, _live(plain), recover.RECOVER, NOW).create


@pytest.mark.parametrize(
    ("cached", "says"),
    [
        (False, ("cold boot: no compile cache for this config yet, about 857 s",)),
        (
            True,
            (
                "warm boot: the compile cache holds this config",
                "about 497 s (cold: 857 s)",
            ),
        ),
    ],
    ids=["cold", "warm"],
)
def test_make_deploy_says_warm_or_cold(
    apis: tuple[FakeTpuApi, FakeSchedulerApi], cached: bool, says: tuple[str, ...]
) -> None:
    _, sched = apis
    cfg = _cfg("spot", **IDLE)
    sched.set_job(_job(cfg), schedule_time=NOW + timedelta(hours=3))
    if cached:
        sched.add_bucket(
            cfg.compile_cache_bucket(PROJECT), [f"xla/{compile_cache_key(cfg)}/5555.tar.gz"]
        )
    out = io.StringIO()
    recover.recover(
        cfg,
        PROJECT,
        api=qr.TpuApi(num_retries=0),
        stack_dir=_no_synth,
        scheduler=lambda: SchedulerApi(num_retries=0),
        out=out,
        now=NOW,
    )
    for line in says:
        assert line in out.getvalue()


def _no_synth() -> Any:
    raise AssertionError("nothing to change: the deploy must not synthesize for this")


FLEX: dict[str, Any] = {"zone": "us-central1-a", "max_run_duration": "4h", **IDLE}


def test_after_a_flex_start_idle_stop_recover_waits_and_deploy_starts_a_new_run(
    apis: tuple[FakeTpuApi, FakeSchedulerApi],
) -> None:
    """The idle node deleted its queued resource (force=true: the node went first): the
    scheduled recover must not buy it back; `make deploy` creates it again (a new run, and a
    new end for the node's grant: stacks/tpuvm/node.py renews it with the queued resource)."""
    cfg = _cfg("flex-start", **FLEX)
    live = _live(cfg)
    assert live.state == recover.NOT_FOUND
    again = recover.decide(cfg, live, recover.RECOVER, NOW)
    assert not again.acts
    assert "deletes its queued resource" in again.summary
    assert "`make deploy` brings it back" in again.summary
    deploy = recover.decide(cfg, live, recover.DEPLOY, NOW)
    assert deploy.replace == (QUEUED_RESOURCE_ADDRESS,)
    # Without [idle] a vanished queued resource is still created again by recover (unchanged).
    plain = _cfg("flex-start", zone="us-central1-a", max_run_duration="4h")
    assert recover.decide(plain, _live(plain), recover.RECOVER, NOW).replace == (
        QUEUED_RESOURCE_ADDRESS,
    )
