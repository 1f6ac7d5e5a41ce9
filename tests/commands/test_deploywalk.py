"""`make deploy`'s walk down the capacity ladder, with the deploy and destroy as recorded fakes."""

from __future__ import annotations

import datetime
import io
import json
from pathlib import Path

import pytest

from tpudeploy.config import parse_config
from tpudeploy.config.ladder import RUNG_ENV, record_path
from tpudeploy.deploywalk import Attempt, forget, recorded, walk

LADDER = [
    {"provisioning": "spot", "zone": "us-west4-a"},
    {"provisioning": "spot", "zone": "us-central1-a"},
    {"provisioning": "flex-start", "zone": "us-central1-a"},
]
STOCKOUT = (
    "Error: Error waiting for Creating Vm: Error code 8, message: There is no more capacity in "
    'the zone "us-west4-a"; you can try in another zone where Cloud TPU Nodes are offered'
)
QUOTA = "Error: googleapi: Error 429: Quota limit 'TPUV5sLitepodServing' has been exceeded."
AUTH = "Error: googleapi: Error 401: Request had invalid authentication credentials."
NOW = datetime.datetime(2026, 12, 3, 9, 0, tzinfo=datetime.UTC)


class Cloud:
    """What each rung's deploy prints and returns; which rungs were deployed and destroyed."""

    def __init__(self, outcomes: dict[int, str], destroy_code: int = 0) -> None:
        self.outcomes = outcomes  # rung -> error text; a rung not listed deploys
        self.deployed: list[int | None] = []
        self.destroyed: list[int] = []
        self.destroy_code = destroy_code

    def deploy(self, number: int | None) -> Attempt:
        self.deployed.append(number)
        text = self.outcomes.get(number or 0, "")
        return Attempt(1 if text else 0, "Apply...\n" + text + "\n")

    def destroy(self, number: int) -> int:
        self.destroyed.append(number)
        return self.destroy_code


def _walk(tmp_path: Path, cloud: Cloud, name: str = "gemma4-v5e", **kw: object) -> tuple[int, str]:
    cfg = parse_config({"name": name, "capacity": LADDER})
    out = io.StringIO()
    code = walk(
        cfg,
        tmp_path / "deploy.toml",
        deploy=cloud.deploy,
        destroy=cloud.destroy,
        out=out,
        now=lambda: NOW,
        **kw,  # type: ignore[arg-type]
    )
    return code, out.getvalue()


def test_stockout_then_quota_then_the_third_rung_runs(tmp_path: Path) -> None:
    cloud = Cloud({1: STOCKOUT, 2: QUOTA})
    code, said = _walk(tmp_path, cloud)
    assert code == 0
    assert cloud.deployed == [1, 2, 3] and cloud.destroyed == [1, 2]
    assert "rung 1 (spot in us-west4-a) failed with a stockout error" in said
    assert "rung 2 (spot in us-central1-a) failed with a quota error" in said
    assert "There is no more capacity in the zone" in said  # the API's own words, shown
    assert "rung 3 of 3 runs (flex-start in us-central1-a); skipped rung 1: stockout; " in said
    record = json.loads(record_path(tmp_path / "deploy.toml", "gemma4-v5e").read_text())
    assert record["rung"] == 3 and record["zone"] == "us-central1-a"
    assert [s["kind"] for s in record["skipped"]] == ["stockout", "quota"]


def test_any_other_error_stops_the_walk_and_destroys_nothing(tmp_path: Path) -> None:
    cloud = Cloud({1: STOCKOUT, 2: AUTH})
    code, said = _walk(tmp_path, cloud)
    assert code == 1
    assert cloud.deployed == [1, 2] and cloud.destroyed == [1]
    assert "rung 3" not in said
    assert not record_path(tmp_path / "deploy.toml", "gemma4-v5e").exists()


def test_every_rung_out_of_capacity_leaves_nothing_and_fails(tmp_path: Path) -> None:
    cloud = Cloud({1: STOCKOUT, 2: STOCKOUT, 3: QUOTA})
    code, said = _walk(tmp_path, cloud)
    assert code == 1 and cloud.destroyed == [1, 2, 3]
    assert "every rung from 1 to 3 was out of capacity or quota" in said


def test_a_failed_destroy_stops_before_a_second_rung_could_bill(tmp_path: Path) -> None:
    cloud = Cloud({1: STOCKOUT}, destroy_code=1)
    code, said = _walk(tmp_path, cloud)
    assert code == 1 and cloud.deployed == [1]
    assert "stopping here so no two rungs bill at once" in said


def test_without_a_ladder_one_deploy_as_before(tmp_path: Path) -> None:
    cloud = Cloud({0: STOCKOUT})
    cfg = parse_config({})
    code = walk(
        cfg, tmp_path / "d.toml", deploy=cloud.deploy, destroy=cloud.destroy, out=io.StringIO()
    )
    assert code == 1 and cloud.deployed == [None] and cloud.destroyed == []


def test_a_redeploy_starts_at_the_rung_that_runs_and_destroy_forgets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two deployments beside each other: each walks and records on its own."""
    monkeypatch.delenv(RUNG_ENV, raising=False)
    _walk(tmp_path, Cloud({1: STOCKOUT}), name="team-a")
    _walk(tmp_path, Cloud({}), name="team-b")
    running = parse_config({"name": "team-a", "capacity": LADDER}, rung=2)
    again = Cloud({})
    walk(
        running,
        tmp_path / "deploy.toml",
        deploy=again.deploy,
        destroy=again.destroy,
        out=io.StringIO(),
    )
    assert again.deployed == [2]  # an update of the running rung, not a new node on rung 1
    other = recorded(parse_config({"name": "team-b", "capacity": LADDER}), tmp_path / "deploy.toml")
    assert other is not None and other["rung"] == 1
    forget(running, tmp_path / "deploy.toml")
    assert not record_path(tmp_path / "deploy.toml", "team-a").exists()
    assert record_path(tmp_path / "deploy.toml", "team-b").exists()


def test_a_rungs_deploy_sees_its_rung_and_its_output_is_shown_and_kept() -> None:
    from tpudeploy.deploywalk import run_deploy

    out = io.StringIO()
    script = f'echo "rung $${RUNG_ENV}"; echo "{STOCKOUT}" | tr -d "\\\\"; exit 3'.replace(
        "$$", "$"
    )
    attempt = run_deploy(["sh", "-c", script], 2, out=out)
    assert attempt.code == 3
    assert out.getvalue().startswith("rung 2\n")
    assert "There is no more capacity in the zone" in attempt.tail
    assert attempt.tail == out.getvalue()
