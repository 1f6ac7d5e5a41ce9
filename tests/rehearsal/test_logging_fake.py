"""The fake Cloud Logging API refuses what the real one refuses (a malformed filter, a request
outside the documented shape, a caller without logging.logEntries.list) and matches entries by
the query language's grammar, its odd precedence included."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.rehearsal.test_rehearsal_node_rules import call
from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.logging import FakeLogging
from tools.rehearsal.fakes.logging_rules import FilterError, parse_filter, request_problems

PROJECT = "logging-unit"
ENTRY: dict[str, Any] = {
    "logName": f"projects/{PROJECT}/logs/tpudeploy-frontdoor",
    "timestamp": "2026-12-03T08:30:00Z",
    "labels": {"tpudeploy_deployment": "alpha"},
    "resource": {"type": "gce_instance", "labels": {"zone": "us-west4-a"}},
    "jsonPayload": {"client": "ci-bot", "status": 429, "path": "/v1/chat/completions"},
}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('labels.tpudeploy_deployment="alpha"', True),
        ('labels.tpudeploy_deployment="beta"', False),
        ('labels.tpudeploy_deployment="ALPHA"', True),  # "String comparisons aren't case sensitive"
        ('timestamp>="2026-12-03T08:00:00Z"', True),
        ('timestamp>="2026-12-03T09:00:00Z"', False),
        ("jsonPayload.status>=400", True),
        ("jsonPayload.status=200", False),
        ('resource.type=("k8s_container" OR "gce_instance")', True),
        ('jsonPayload.client="ci-bot" AND NOT jsonPayload.status=429', False),
        # OR binds tighter than AND: a AND b OR c with a false and c true is a AND (b OR c),
        # false, where the usual precedence, (a AND b) OR c, would be true.
        (
            'labels.tpudeploy_deployment="beta" AND jsonPayload.status=429 OR '
            'resource.type="gce_instance"',
            False,
        ),
        # a lower-case and is a value, not an operator: this entry has no "and" in it
        ('jsonPayload.client="ci-bot" and jsonPayload.status=429', False),
        ('"ci-bot"', True),
        ("", True),
    ],
)
def test_a_filter_matches_by_the_documented_grammar(query: str, expected: bool) -> None:
    assert parse_filter(query)(ENTRY) is expected


@pytest.mark.parametrize(
    "query",
    [
        'labels.tpudeploy_deployment="alpha" AND',
        '(labels.tpudeploy_deployment="alpha"',
        'labels.tpudeploy_deployment="alpha',
        "labels.tpudeploy_deployment=",
        'timestamp>="an hour ago"',
        ")",
        "x" * 20_001,
    ],
)
def test_a_malformed_filter_is_refused(query: str) -> None:
    with pytest.raises(FilterError):
        parse_filter(query)


def test_the_request_shape_is_checked_by_the_discovery_document_and_its_prose() -> None:
    ok = {"resourceNames": [f"projects/{PROJECT}"], "orderBy": "timestamp desc", "pageSize": 10}
    assert request_problems(ok) == []
    assert request_problems({**ok, "resourceNames": []})
    assert request_problems({**ok, "resourceNames": ["my-project"]})
    assert request_problems({**ok, "orderBy": "severity"})
    assert request_problems({**ok, "pageSize": -1})
    assert request_problems({**ok, "limit": 10})  # not a field of ListLogEntriesRequest
    assert request_problems({**ok, "resourceNames": [f"projects/p{i}" for i in range(101)]})


def _list(host: str, body: dict[str, Any]) -> tuple[int, Any]:
    return call(host, "POST", "/v2/entries:list", body)


def test_the_fake_serves_pages_and_answers_400_for_a_bad_filter() -> None:
    with FakeLogging(Inventory()) as fake:
        body: dict[str, Any] = {"resourceNames": [f"projects/{PROJECT}"], "pageSize": 2}
        status, answer = _list(fake.host, body)
        assert status == 403 and "SERVICE_DISABLED" in answer["error"]["message"]
        fake.inventory.enable(PROJECT, "logging.googleapis.com")
        fake.seed(
            [
                {**ENTRY, "timestamp": f"2026-12-03T08:3{i}:00Z", "insertId": str(i)}
                for i in range(5)
            ]
        )
        seen: list[str] = []
        while True:
            status, answer = _list(fake.host, body)
            assert status == 200
            seen += [e["insertId"] for e in answer.get("entries", [])]
            if "nextPageToken" not in answer:
                break
            body = {**body, "pageToken": answer["nextPageToken"]}
        assert seen == ["0", "1", "2", "3", "4"]
        status, answer = _list(fake.host, {**body, "filter": 'logName="x" AND'})
        assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT"
        # a token sent back with other parameters than the call that issued it
        first = {"resourceNames": [f"projects/{PROJECT}"], "pageSize": 2}
        token = _list(fake.host, first)[1]["nextPageToken"]
        assert _list(fake.host, {**first, "pageToken": token})[0] == 200
        assert _list(fake.host, {**first, "pageSize": 3, "pageToken": token})[0] == 400


def test_a_caller_without_the_viewer_role_gets_403() -> None:
    with FakeLogging(Inventory()) as fake:
        fake.inventory.enable(PROJECT, "logging.googleapis.com")
        fake.inventory.tokens["stranger-token"] = "user:stranger@example.com"
        request = urllib.request.Request(
            f"http://{fake.host}/v2/entries:list",
            data=json.dumps({"resourceNames": [f"projects/{PROJECT}"]}).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": "Bearer stranger-token"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)  # noqa: S310 - loopback
        assert refused.value.code == 403
        assert "logging.logEntries.list" in refused.value.read().decode()
