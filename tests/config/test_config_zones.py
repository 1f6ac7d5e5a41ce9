"""What Google refuses at apply time, refused at load: a zone with no TPU of the accelerator's
generation (a typo like us-wset4-a), and a compile-cache bucket name Cloud Storage reserves."""

from __future__ import annotations

import pytest

from tpudeploy import facts, names
from tpudeploy.config import ConfigError, parse_config

VM = {"provisioning": "spot"}


def _problems(data: dict[str, object]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    return err.value.problems


def test_a_typo_in_the_zone_is_refused_with_the_nearest_v5e_zone() -> None:
    (problem,) = _problems({**VM, "zone": "us-wset4-a"})
    assert problem.startswith("zone = 'us-wset4-a': Google lists no TPU v5e in this zone")
    assert facts.TPU_ZONES_SOURCE in problem
    assert "did you mean 'us-west4-a'?" in problem
    assert "allow_unlisted_zone = true" in problem


@pytest.mark.parametrize("zone", sorted(facts.TPU_ZONES["v5e"]))
def test_every_listed_v5e_zone_loads_for_a_vm(zone: str) -> None:
    assert parse_config({**VM, "zone": zone}).zone == zone


def test_a_real_zone_without_v5e_is_refused_unless_the_user_says_google_lists_it() -> None:
    (problem,) = _problems({"provisioning": "on-demand", "zone": "asia-east1-c"})
    assert "Google lists no TPU v5e in this zone" in problem
    assert "did you mean" not in problem  # nothing close to suggest
    cfg = parse_config(
        {"provisioning": "on-demand", "zone": "asia-east1-c", "allow_unlisted_zone": True}
    )
    assert cfg.zone == "asia-east1-c"


def test_flex_start_keeps_its_own_narrower_check() -> None:
    (problem,) = _problems({"zone": "us-wset4-a"})
    assert "flex-start v5litepod-1 in this zone" in problem


@pytest.mark.parametrize(
    ("bucket", "refused"),
    [
        ("googly-eyes-x", True),
        ("goog-x", True),
        ("my-google-x", True),
        ("my-g00gle-x", True),
        ("my-go0gle-x", True),
        ("my-goggle-x", False),
        ("my-gemma4-v5e-xla", False),
    ],
)
def test_bucket_reserved_words(bucket: str, refused: bool) -> None:
    assert bool(names.bucket_name_problem(bucket)) is refused


def test_a_name_that_puts_google_in_the_bucket_is_refused_before_any_api_call() -> None:
    (problem,) = _problems({**VM, "name": "google-e2b"})
    assert problem.startswith(
        "name = 'google-e2b': the compile-cache bucket 'PROJECT-google-e2b-xla'"
    )
    assert 'contains "google"' in problem


def test_a_project_that_starts_the_bucket_with_goog_is_refused() -> None:
    (problem,) = _problems({**VM, "project": "googol-project"})
    assert problem.startswith("project = 'googol-project': the compile-cache bucket")
    assert 'begins with "goog"' in problem
    assert parse_config({**VM, "project": "goofy-project"}).project == "goofy-project"


def test_every_chip_with_data_has_its_tpu_vm_zone_list() -> None:
    """The zone check reads facts.TPU_ZONES by the accelerator's chip generation: each chip the
    config accepts (facts.CHIPS) must have one (tests/mutants_equivalent.toml relies on it)."""
    assert {chip.generation for chip in facts.CHIPS.values()} <= set(facts.TPU_ZONES)


def test_a_zone_with_nothing_close_is_told_every_listed_zone() -> None:
    """No near match: the fix is the whole list, in one readable line, and no empty hint."""
    (problem,) = _problems({"provisioning": "on-demand", "zone": "asia-east1-c"})
    listed = ", ".join(facts.TPU_ZONES["v5e"])
    assert f"Fix: use one of {listed}; or set allow_unlisted_zone = true if the page" in problem
