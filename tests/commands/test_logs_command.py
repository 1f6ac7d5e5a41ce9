"""`make logs` against the fake Cloud Logging API (its filter parsed by the query language's
grammar): two deployments' entries in one project, each sees only its own, on both platforms;
SINCE and WHAT narrow the query; every page is read; a 403 names the role."""

from __future__ import annotations

import datetime
import io
from collections.abc import Iterator
from typing import Any

import pytest

from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.logging import FakeLogging
from tpudeploy import logscli, logsources
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gcp import logentries
from tpudeploy.gcp import session as gcp_session
from tpudeploy.gke import identifiers

PROJECT = "logs-unit"
NOW = datetime.datetime(2026, 12, 3, 9, 0, tzinfo=datetime.UTC)
ALPHA = parse_config({"project": PROJECT, "name": "alpha"})
BETA = parse_config({"project": PROJECT, "name": "beta"})
GKE_ALPHA = parse_config({"project": PROJECT, "name": "alpha", "platform": "gke"})
GKE_BETA = parse_config({"project": PROJECT, "name": "beta", "platform": "gke"})


def _at(minutes_ago: int) -> str:
    return (NOW - datetime.timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _access(client: str, status: int) -> dict[str, Any]:
    return {
        "time": "2026-12-03T08:50:00+00:00",
        "client": client,
        "remote_addr": "10.0.0.9",
        "method": "POST",
        "path": "/v1/chat/completions",
        "status": status,
        "request_time": 0.8,
        "upstream_response_time": "0.790",
        "bytes_sent": 900,
        "bytes_received": 400,
        "prompt_tokens": 12,
        "completion_tokens": 34,
    }


def tpuvm_entry(cfg: DeployConfig, what: str, minutes_ago: int, **payload: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "logName": logsources.log_name(PROJECT, logsources.TPUVM_LOG_IDS[what]),
        "timestamp": _at(minutes_ago),
        "insertId": f"{cfg.name}-{what}-{minutes_ago}",
        "labels": {logsources.DEPLOYMENT_LABEL: cfg.name},
        "resource": {"type": "gce_instance", "labels": {"zone": "us-west4-a"}},
    }
    if "text" in payload:
        entry["textPayload"] = payload["text"]
    else:
        entry["jsonPayload"] = payload
    return entry


def gke_entry(cfg: DeployConfig, container: str, minutes_ago: int, text: str) -> dict[str, Any]:
    return {
        "logName": logsources.log_name(PROJECT, "stdout"),
        "timestamp": _at(minutes_ago),
        "insertId": f"{cfg.name}-{container}-{minutes_ago}",
        "resource": {
            "type": "k8s_container",
            "labels": {
                "cluster_name": identifiers.cluster_name(cfg),
                "namespace_name": identifiers.namespace(cfg),
                "container_name": container,
            },
        },
        "textPayload": text,
    }


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLogging]:
    with FakeLogging(Inventory()) as server:
        server.inventory.enable(PROJECT, "logging.googleapis.com")
        monkeypatch.setenv("LOGGING_EMULATOR_HOST", server.host)
        yield server


def run(cfg: DeployConfig, *, since: str = "1h", what: str = "") -> str:
    out = io.StringIO()
    code = logscli.command(
        cfg, PROJECT, since=since, what=what, read=logentries.list_entries, out=out, now=NOW
    )
    assert code == 0
    return out.getvalue()


def test_two_tpu_vm_deployments_in_one_project_each_read_only_their_own(
    fake: FakeLogging,
) -> None:
    fake.seed(
        [
            tpuvm_entry(ALPHA, "vllm", 30, text="INFO alpha serving"),
            tpuvm_entry(BETA, "vllm", 29, text="INFO beta serving"),
            tpuvm_entry(ALPHA, "frontdoor", 20, **_access("ci-bot", 429)),
            tpuvm_entry(BETA, "frontdoor", 19, **_access("beta-agent", 200)),
            tpuvm_entry(ALPHA, "boot", 40, phase="compile", event="end", elapsed_s=412),
            tpuvm_entry(ALPHA, "boot", 39, phase="bootcheck", ok=False, disagree=["max_model_len"]),
        ]
    )
    alpha = run(ALPHA)
    assert "alpha serving" in alpha and "beta" not in alpha
    lines = alpha.splitlines()
    # oldest first, one line per entry: time, what, payload
    assert [line.split()[1] for line in lines] == ["boot", "boot", "vllm", "frontdoor"]
    assert lines[0].startswith(_at(40))
    assert "phase=compile event=end elapsed_s=412" in lines[0]
    assert "bootcheck DISAGREES" in lines[1] and "max_model_len" in lines[1]
    assert "client=ci-bot status=429 POST /v1/chat/completions tokens=12>34" in lines[3]
    beta = run(BETA)
    assert "beta serving" in beta and "client=beta-agent status=200" in beta
    assert "alpha" not in beta and "ci-bot" not in beta


def test_since_and_what_narrow_the_query(fake: FakeLogging) -> None:
    fake.seed(
        [
            tpuvm_entry(ALPHA, "vllm", 90, text="old line"),
            tpuvm_entry(ALPHA, "vllm", 10, text="new line"),
            tpuvm_entry(ALPHA, "frontdoor", 5, **_access("ci-bot", 200)),
        ]
    )
    recent = run(ALPHA, since="1h")
    assert "new line" in recent and "old line" not in recent
    assert "old line" in run(ALPHA, since="2h")
    only_door = run(ALPHA, what="frontdoor")
    assert "client=ci-bot" in only_door and "new line" not in only_door
    sent = fake.requests[-1]["body"]["filter"]
    assert 'logName="projects/logs-unit/logs/tpudeploy-frontdoor"' in sent
    assert "tpudeploy-vllm" not in sent and 'timestamp>="2026-12-03T08:00:00Z"' in sent


def test_every_page_is_read(fake: FakeLogging, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logentries, "PAGE_SIZE", 3)
    fake.seed([tpuvm_entry(ALPHA, "vllm", 50 - i, text=f"line {i}") for i in range(8)])
    out = run(ALPHA)
    assert [line.split()[-1] for line in out.splitlines()] == [str(i) for i in range(8)]
    pages = [r for r in fake.requests if r["path"].endswith("entries:list")]
    assert len(pages) == 3 and "pageToken" in pages[-1]["body"]


def test_two_gke_deployments_read_their_own_containers_and_events(fake: FakeLogging) -> None:
    events = {
        "logName": logsources.log_name(PROJECT, logsources.GKE_EVENTS_LOG_ID),
        "timestamp": _at(45),
        "resource": {
            "type": "k8s_pod",
            "labels": {
                "cluster_name": identifiers.cluster_name(GKE_ALPHA),
                "namespace_name": identifiers.namespace(GKE_ALPHA),
            },
        },
        "jsonPayload": {
            "reason": "Pulled",
            "message": "image pulled",
            "involvedObject": {"name": "r-a"},
        },
    }
    fake.seed(
        [
            gke_entry(GKE_ALPHA, "vllm", 30, "alpha vllm up"),
            gke_entry(GKE_BETA, "vllm", 30, "beta vllm up"),
            gke_entry(GKE_ALPHA, "frontdoor", 20, "alpha door"),
            # a JSON line on stdout: GKE's agent parses it into jsonPayload
            {
                **gke_entry(GKE_ALPHA, "frontdoor", 19, ""),
                "textPayload": None,
                "jsonPayload": _access("ci-bot", 503),
            },
            events,
        ]
    )
    alpha = run(GKE_ALPHA)
    assert "alpha vllm up" in alpha and "alpha door" in alpha and "r-a: Pulled" in alpha
    assert "client=ci-bot status=503" in alpha
    assert "beta" not in alpha
    beta = run(GKE_BETA)
    assert "beta vllm up" in beta and "alpha" not in beta and "Pulled" not in beta
    assert "alpha door" not in run(GKE_ALPHA, what="vllm")


def test_a_bad_what_or_since_is_refused_with_the_fix() -> None:
    with pytest.raises(logscli.LogsError, match=r"WHAT='nginx'.*vllm\|frontdoor\|boot"):
        run(ALPHA, what="nginx")
    with pytest.raises(logscli.LogsError, match=r"SINCE"):
        run(ALPHA, since="yesterday")


def test_a_403_names_the_role_the_caller_needs(
    fake: FakeLogging, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.inventory.tokens["stranger"] = "user:stranger@example.com"
    real = gcp_session.session

    def as_stranger(*args: Any, **kwargs: Any) -> tuple[Any, str]:
        session, base = real(*args, **kwargs)
        session.headers["Authorization"] = "Bearer stranger"
        return session, base

    monkeypatch.setattr(gcp_session, "session", as_stranger)
    with pytest.raises(logentries.LoggingError, match=r"HTTP 403.*roles/logging\.viewer"):
        run(ALPHA)
