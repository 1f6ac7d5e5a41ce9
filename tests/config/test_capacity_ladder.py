"""The capacity ladder's config: its shape, the rung in use, each rung judged as a deployment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tpudeploy import facts
from tpudeploy.config import ConfigError, load_config, parse_config
from tpudeploy.config.ladder import (
    DEFAULT_NAME,
    GCS_INTER_REGION_NA_PER_GIB,
    RUNG_ENV,
    cache_read_cost,
    check_capacity,
    record_path,
    rung_in_use,
)
from tpudeploy.tpuvm.flex import node_labels

LADDER = [
    {"provisioning": "spot", "zone": "us-west4-a"},
    {"provisioning": "flex-start", "zone": "us-central1-a"},
]


def _problems(data: dict[str, Any], **kw: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, **kw)
    return caught.value.problems


def test_the_first_rung_runs_unless_another_is_named() -> None:
    first = parse_config({"capacity": LADDER})
    assert (first.provisioning, first.zone, first.rung_index) == ("spot", "us-west4-a", 0)
    second = parse_config({"capacity": LADDER}, rung=2)
    assert (second.provisioning, second.zone, second.rung_index) == (
        "flex-start",
        "us-central1-a",
        1,
    )
    # The rung's own rules follow it: a flex-start rung has no deadline job (its queued resource
    # ends it), a spot rung has one.
    assert second.deadline_seconds is None and first.deadline_seconds == 8 * 3600


def test_what_outlives_a_rung_stays_in_the_first_rungs_region() -> None:
    second = parse_config({"capacity": LADDER}, rung=2)
    assert second.effective_region == "us-central1"
    assert second.home_region == "us-west4"


def test_a_ladder_and_a_top_level_zone_or_provisioning_are_one_of_two() -> None:
    for key, value in (("zone", "us-west4-a"), ("provisioning", "spot")):
        (line,) = _problems({"capacity": LADDER, key: value})
        assert line.startswith(f"{key} = '{value}': set together with capacity")
        assert f"remove {key}" in line and "or remove capacity" in line
    # The refusal names the file it read, like every other config problem.
    with pytest.raises(ConfigError) as info:
        parse_config({"capacity": LADDER, "zone": "us-west4-a"}, source="team.toml")
    assert str(info.value).startswith("team.toml: ")


@pytest.mark.parametrize(
    ("rung", "said"),
    [
        ({"provisioning": "spoot", "zone": "us-west4-a"}, "rung 1's provisioning 'spoot'"),
        ({"provisioning": "spot"}, "rung 1 has no zone"),
        ({"provisioning": "spot", "zone": "us-west4-a", "size": 1}, "unknown key 'size'"),
        ({"provisioning": "spot", "zone": "west4"}, "rung 1's zone 'west4' is not a zone name"),
        ("spot", "rung 1 is not a table"),
    ],
)
def test_a_malformed_rung_is_named_by_its_number(rung: object, said: str) -> None:
    (line,) = _problems({"capacity": [rung]})
    assert line.startswith("capacity = ") and said in line and "Fix:" in line


@pytest.mark.parametrize(
    ("rung", "fix"),
    [
        ({"provisioning": "spot"}, "Fix: a rung takes exactly provisioning and zone"),
        (
            {"provisioning": "spot", "zone": "us-west4-a", "size": 1},
            "Fix: a rung takes exactly provisioning and zone",
        ),
        (
            {"provisioning": "spoot", "zone": "us-west4-a"},
            "is not one of flex-start, spot, on-demand. Fix: use one of them",
        ),
    ],
)
def test_a_malformed_rung_says_what_a_rung_takes(rung: dict[str, Any], fix: str) -> None:
    (line,) = _problems({"capacity": [rung]})
    assert line.endswith(fix), line


def test_a_rung_already_checked_is_passed_over_and_the_next_one_still_judged() -> None:
    """A config built from checked rungs (Rung objects) is read again by the same check: a
    checked rung is skipped, never the end of the check."""
    checked = parse_config({"capacity": LADDER}).capacity
    assert check_capacity(list(checked)) == checked
    with pytest.raises(ValueError, match="rung 3 is not a table"):
        check_capacity([*checked, "spot"])


def test_each_rung_meets_the_zone_rules_under_its_own_key() -> None:
    found = _problems(
        {
            "capacity": [
                {"provisioning": "flex-start", "zone": "europe-west4-b"},
                {"provisioning": "spot", "zone": "us-wset4-a"},
            ]
        }
    )
    assert found[0].startswith("capacity[1].zone = 'europe-west4-b': flex-start v5litepod-1")
    assert found[0].endswith("allow_untested_flex_zone = true to try anyway")
    assert found[1].startswith("capacity[2].zone = 'us-wset4-a': Google lists no TPU v5e")
    assert "did you mean 'us-west4-a'?" in found[1]
    # The first rung's region (europe-west4) holds the bucket: us-wset4 is on another continent.
    assert found[2].startswith("capacity[2].zone = 'us-wset4-a': its node would read")
    assert len(found) == 3


def test_every_north_american_v5e_zone_google_lists_is_a_spot_rung() -> None:
    zones = [z for z in facts.TPU_ZONES["v5e"] if z.startswith("us-")]
    ladder = [{"provisioning": "spot", "zone": z} for z in zones]
    assert len(parse_config({"capacity": ladder}).capacity) == len(zones) > 4


def test_a_flex_start_rung_must_end_even_when_the_first_rung_is_spot() -> None:
    (line,) = _problems({"capacity": LADDER, "max_run_duration": "none"})
    assert line.startswith("capacity[2] (flex-start, us-central1-a): max_run_duration = 'none'")


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"platform": "gke"}, "capacity"),
        ({"region": "us-west4"}, "region"),
        ({"network": {"subnetwork": "tpu-subnet"}}, "network.subnetwork"),
        ({"capacity": [LADDER[0], LADDER[0]]}, "capacity[2]"),
    ],
)
def test_rules_that_span_rungs(extra: dict[str, Any], key: str) -> None:
    found = _problems({"capacity": LADDER, **extra})
    assert [line.split(" = ")[0] for line in found] == [key], found


def test_rules_that_span_rungs_name_what_the_user_wrote() -> None:
    """Each refusal shows the value it judged, as the user wrote it, and the regions it saw."""
    (gke,) = _problems({"capacity": LADDER, "platform": "gke"})
    assert gke.startswith(
        "capacity = [{provisioning = 'spot', zone = 'us-west4-a'}, "
        "{provisioning = 'flex-start', zone = 'us-central1-a'}]: the ladder is for one TPU VM"
    )
    (twice,) = _problems({"capacity": [LADDER[0], LADDER[0]]})
    assert twice.startswith(
        "capacity[2] = {provisioning = 'spot', zone = 'us-west4-a'}: the same rung as capacity[1]"
    )
    (region,) = _problems({"capacity": LADDER, "region": "us-west4"})
    assert region.startswith(
        "region = 'us-west4': the ladder's rungs are in us-central1, us-west4: a rung outside "
        "region would never deploy. Fix: leave region out"
    )
    (subnet,) = _problems({"capacity": LADDER, "network": {"subnetwork": "tpu-subnet"}})
    assert subnet.startswith(
        "network.subnetwork = 'tpu-subnet': a subnetwork is regional, and the ladder's rungs "
        "span us-central1, us-west4: the node of a rung in another region cannot join it"
    )


def test_a_ladder_within_the_region_and_its_subnetwork_is_accepted() -> None:
    """Two zones of one region: the region and a regional subnetwork serve every rung."""
    one_region = [
        {"provisioning": "spot", "zone": "us-west4-a"},
        {"provisioning": "spot", "zone": "us-west4-b"},
    ]
    cfg = parse_config(
        {"capacity": one_region, "region": "us-west4", "network": {"subnetwork": "tpu-subnet"}}
    )
    assert [r.zone for r in cfg.capacity] == ["us-west4-a", "us-west4-b"]


def test_an_empty_ladder_is_no_ladder() -> None:
    """A whole config dumped and read back carries capacity = [] beside its zone."""
    whole = parse_config({}).model_dump()
    assert whole["capacity"] == () and parse_config(whole).zone == facts.ZONE


def test_a_rung_out_of_range_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    (line,) = _problems({"capacity": LADDER}, rung=3)
    assert line.startswith(f"{RUNG_ENV} = 3: the ladder has 2 rung(s)")
    assert line.endswith(f"Fix: unset {RUNG_ENV}, or give a number from 1 to 2")


def test_both_top_level_keys_beside_a_ladder_are_named_in_the_fix() -> None:
    (line,) = _problems({"capacity": LADDER, "provisioning": "spot", "zone": "us-west4-a"})
    assert "Fix: remove provisioning and zone and write the preferred choice" in line


@pytest.mark.parametrize(
    ("record", "rung"),
    [
        pytest.param(None, 1, id="no-record"),
        pytest.param('{"rung": 2}', 2, id="recorded"),
        pytest.param("not json", 1, id="unreadable"),
        pytest.param("[2]", 1, id="not-a-table"),
        pytest.param('{"rung": "2"}', 1, id="a-string"),
        pytest.param('{"rung": 0}', 1, id="zero"),
        pytest.param('{"rung": 1}', 1, id="the-first"),
    ],
)
def test_the_recorded_rung_is_read_only_when_it_is_a_rung_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: str | None, rung: int
) -> None:
    """A record the walker did not write (or wrote and a crash cut short) falls back to the
    first rung, never to a rung nobody chose. A config without a name reads the default
    deployment's record."""
    monkeypatch.delenv(RUNG_ENV, raising=False)
    config = tmp_path / "deploy.toml"
    if record is not None:
        record_path(config, DEFAULT_NAME).write_text(record)
    assert rung_in_use(config, {"capacity": LADDER}) == rung
    # Another deployment's name reads another record: the default one is not its.
    assert rung_in_use(config, {"capacity": LADDER, "name": "team-b"}) == 1
    # No ladder: the one "rung" is the config itself, whatever a record says.
    assert rung_in_use(config, {}) == 1


def test_loading_takes_the_walkers_rung_then_the_recorded_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two deployments beside each other: each reads its own record, never the other's."""
    monkeypatch.delenv(RUNG_ENV, raising=False)
    ladder_toml = (
        'capacity = [{provisioning = "spot", zone = "us-west4-a"}, '
        '{provisioning = "flex-start", zone = "us-central1-a"}]\n'
    )
    for name in ("team-a", "team-b"):
        (tmp_path / f"{name}.toml").write_text(f'name = "{name}"\n' + ladder_toml)
    assert load_config(tmp_path / "team-a.toml").zone == "us-west4-a"
    record_path(tmp_path / "team-a.toml", "team-a").write_text(json.dumps({"rung": 2}))
    assert load_config(tmp_path / "team-a.toml").zone == "us-central1-a"
    assert load_config(tmp_path / "team-b.toml").zone == "us-west4-a"
    monkeypatch.setenv(RUNG_ENV, "1")
    assert load_config(tmp_path / "team-a.toml").zone == "us-west4-a"
    monkeypatch.setenv(RUNG_ENV, "two")
    with pytest.raises(ConfigError, match=f"{RUNG_ENV} = 0"):
        load_config(tmp_path / "team-a.toml")


def test_the_node_says_which_rung_it_is() -> None:
    assert node_labels(parse_config({"capacity": LADDER}, rung=2))["tpudeploy-rung"] == "2"
    assert "tpudeploy-rung" not in node_labels(parse_config({}))


def test_a_cross_region_rung_reads_the_cache_across_regions_at_the_documented_rate() -> None:
    gib = facts.COMPILE_CACHE_BYTES / 2**30
    assert cache_read_cost("us-west4", "us-west4") == 0.0
    cost = cache_read_cost("us-west4", "us-central1")
    assert cost is not None and cost == pytest.approx(gib * GCS_INTER_REGION_NA_PER_GIB)
    assert 0 < cost < 0.01  # 197 MB at cents per GiB: under a cent a boot
    assert cache_read_cost("us-west4", "europe-west4") is None


def test_a_rung_on_another_continent_than_the_bucket_is_refused() -> None:
    (line,) = _problems(
        {"capacity": [LADDER[0], {"provisioning": "spot", "zone": "europe-west4-b"}]}
    )
    assert line.startswith("capacity[2].zone = 'europe-west4-b': its node would read the compile")
    assert "across continents" in line and "Fix: keep the ladder on one continent" in line
