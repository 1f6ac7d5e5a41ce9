"""[access]: client names, limits naming clients, the rotation overlap, and the planner's
default limits against the KV wall (tpudeploy/planner/clients.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tpudeploy.config import DeployConfig
from tpudeploy.config.access import client_secret_id
from tpudeploy.planner import clients
from tpudeploy.planner.capacity import kv_pool


def _cfg(access: dict[str, object], **extra: object) -> DeployConfig:
    return DeployConfig.model_validate({"access": access, **extra}, strict=False)


def test_default_client_keeps_the_historical_secret_and_others_get_their_own() -> None:
    cfg = _cfg({"clients": ["default", "planner"]})
    assert cfg.client_key_secret_ids == {
        "default": "gemma4-v5e-api-key",
        "planner": "gemma4-v5e-api-key-planner",
    }
    assert client_secret_id("a", "default") != client_secret_id("a", "default-x")


@pytest.mark.parametrize(
    ("access", "fragment"),
    [
        ({"clients": []}, "name at least one"),
        ({"clients": ["Planner"]}, "'Planner' is not a client name"),
        ({"clients": ["9lives"]}, "'9lives' is not a client name"),
        ({"clients": ["a" * 25]}, "is not a client name"),
        ({"clients": ["ci", "ci"]}, "ci listed twice"),
        ({"clients": ["ci"], "limits": {"coder": {"streams": 2}}}, "names coder, not in"),
        ({"limits": {"default": {"streams": 0}}}, "greater than or equal to 1"),
        ({"rotation_overlap": "soon"}, "rotation_overlap"),
        ({"rotation_overlap": "8d"}, "longer than 7 days"),
    ],
)
def test_bad_access_is_refused_naming_the_reason(access: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValidationError) as err:
        _cfg(access)
    assert fragment in str(err.value)


def test_rotation_overlap_seconds() -> None:
    assert _cfg({}).access.rotation_overlap_seconds == 3600
    assert _cfg({"rotation_overlap": "90m"}).access.rotation_overlap_seconds == 5400
    assert _cfg({"rotation_overlap": 0}).access.rotation_overlap_seconds == 0


def _pool_streams(context: int) -> int:
    return kv_pool().safe_tokens // context


def test_unset_streams_share_what_the_set_ones_leave_of_the_wall() -> None:
    cfg = _cfg(
        {"clients": ["planner", "coder", "ci"], "limits": {"coder": {"streams": 3}}},
        load={"expected_context": 8192},
    )
    wall = _pool_streams(8192)
    got = {lim.client: lim for lim in clients.client_limits(cfg)}
    assert got["coder"].streams == 3 and got["coder"].streams_from == "config"
    assert got["planner"].streams == got["ci"].streams == (wall - 3) // 2
    assert got["planner"].streams_from == "planner"
    assert sum(lim.streams for lim in got.values()) <= wall
    assert clients.check_access(cfg) == []


def test_without_a_context_the_clients_share_the_build_logs_fleet() -> None:
    cfg = _cfg({"clients": ["a", "b", "c"]})
    assert [lim.streams for lim in clients.client_limits(cfg)] == [5, 5, 5]
    assert clients.client_limits(_cfg({}))[0].streams == 16


def test_rate_defaults_to_one_request_a_second_per_stream_and_its_retry_after() -> None:
    cfg = _cfg({"clients": ["a"], "limits": {"a": {"streams": 2, "requests_per_minute": 40}}})
    (lim,) = clients.client_limits(cfg)
    assert lim.requests_per_minute == 40 and lim.rate_from == "config"
    assert lim.rate_retry_after_s == 2  # 60 / 40 = 1.5 s between requests, rounded up
    (lim,) = clients.client_limits(_cfg({"clients": ["a"], "limits": {"a": {"streams": 2}}}))
    assert lim.requests_per_minute == 120 and lim.rate_retry_after_s == 1


def test_caps_past_the_wall_warn_with_the_numbers() -> None:
    wall = _pool_streams(8192)
    cfg = _cfg(
        {"clients": ["planner", "coder"], "limits": {"coder": {"streams": wall}}},
        load={"expected_context": 8192},
    )
    (finding,) = clients.check_access(cfg)
    assert finding.severity == "warning" and finding.key == "access.limits"
    assert f"{wall + 1} streams at once (planner 1, coder {wall})" in finding.message
    assert f"add up to at most {wall}" in finding.message
