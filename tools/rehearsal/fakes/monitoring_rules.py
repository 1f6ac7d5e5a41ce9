"""What Cloud Monitoring refuses in a dashboard or an alert policy, as data with its source.

The shapes are the Monitoring API's own discovery documents (v1: Dashboard; v3: AlertPolicy,
NotificationChannel), vendored in schemas/discovery/ (tools/discovery_subset.py wrote them from
google-api-python-client's discovery cache). The fake Monitoring API (fakes/monitoring.py) and
the tests (tests/shared/test_dashboard.py) judge every document with `problems`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools.rehearsal.fakes.discovery_rules import Rule, walk
from tools.rehearsal.fakes.discovery_rules import check as check
from tools.rehearsal.fakes.logging_rules import FilterError, parse_filter

_SCHEMAS = Path(__file__).resolve().parents[3] / "schemas" / "discovery"


RULES = (
    Rule(
        "a field the message does not have is refused (400), never ignored",
        "https://github.com/GoogleCloudPlatform/monitoring-dashboard-samples/pull/694",
        'Invalid JSON payload received. Unknown name "legacyRows" at '
        "'dashboard.mosaic_layout': Cannot find field.",
    ),
    Rule(
        "an enum field takes only the values its discovery document lists",
        "schemas/discovery/monitoring.v1.Dashboard.json (enum of each field)",
        "enum",
    ),
    Rule(
        "MosaicLayout: a tile lies within the grid's columns",
        "schemas/discovery/monitoring.v1.Dashboard.json, MosaicLayout.columns",
        "The number of columns in the mosaic grid. The number of columns must be between 1 "
        "and 48, inclusive.",
    ),
    Rule(
        "a Widget holds exactly one content (xyChart, scorecard, text, ...)",
        "google/monitoring/dashboard/v1/widget.proto, as generated into Rust bindings (prost) "
        "found in the stored code corpus; the discovery document does not say oneof",
        "Content defines the component used to populate the widget. "
        '#[prost(oneof = "widget::Content", ...)]',
    ),
    Rule(
        "an AlertPolicy has between 1 and 6 conditions",
        "schemas/discovery/monitoring.v3.AlertPolicy.json, AlertPolicy.conditions",
        "A policy can have from one to six conditions.",
    ),
    Rule(
        "a policy with a LogMatch condition (conditionMatchedLog) has no other condition",
        "schemas/discovery/monitoring.v3.AlertPolicy.json, Condition.conditionMatchedLog",
        "A condition that checks for log messages matching given constraints. If set, no "
        "other conditions can be present.",
    ),
    Rule(
        "a policy with a LogMatch condition sets alertStrategy.notificationRateLimit",
        "schemas/discovery/monitoring.v3.AlertPolicy.json, AlertStrategy.notificationRateLimit",
        "Required for log-based alerting policies, i.e. policies with a LogMatch condition.",
    ),
    Rule(
        "a LogMatch condition's filter is required and a valid Logging query",
        "schemas/discovery/monitoring.v3.AlertPolicy.json, LogMatch.filter (checked by the "
        "Logging fake's parser, fakes/logging_rules.py)",
        "Required. A logs-based filter. See Advanced Logs Queries ... for how this filter "
        "should be constructed.",
    ),
    Rule(
        "a Duration is a number of seconds with an s suffix (proto3 JSON)",
        "https://protobuf.dev/programming-guides/json/ (Duration)",
        "Generated output always contains 0, 3, 6, or 9 fractional digits ... followed by the "
        'suffix "s"',
    ),
)
MAX_COLUMNS = 48
MAX_CONDITIONS = 6
# The Widget fields that are its content (one of them): every property but title and the
# layout helpers the schema lists beside them.
_WIDGET_NOT_CONTENT = frozenset({"title", "id", "visibilityCondition"})


def load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((_SCHEMAS / name).read_text(encoding="utf-8"))
    return document


DASHBOARD = load("monitoring.v1.Dashboard.json")
ALERT_POLICY = load("monitoring.v3.AlertPolicy.json")


def _check(schemas: dict[str, Any], schema: dict[str, Any], value: Any, at: str) -> list[str]:
    return walk(schemas, schema, value, at, _extra)


def _extra(name: str, value: Any, at: str) -> list[str]:
    """The rules a discovery document states in prose, for the messages that carry them."""
    if not isinstance(value, dict):
        return []
    out: list[str] = []
    if name == "MosaicLayout":
        columns = value.get("columns", MAX_COLUMNS)
        if not isinstance(columns, int):
            return out  # the type check says so
        if not 1 <= columns <= MAX_COLUMNS:
            out.append(f"{at}.columns: {columns} is not between 1 and {MAX_COLUMNS}")
        for i, tile in enumerate(value.get("tiles", [])):
            x, width = tile.get("xPos", 0), tile.get("width", 0)
            if isinstance(x, int) and isinstance(width, int) and x + width > columns:
                out.append(f"{at}.tiles[{i}]: reaches column {x + width}, past the {columns}")
    if name == "Widget":
        content = [k for k in value if k not in _WIDGET_NOT_CONTENT]
        if len(content) != 1:
            out.append(f"{at}: a widget holds one content, this one {content}")
    if name == "AlertPolicy":
        count = len(value.get("conditions", []))
        if not 1 <= count <= MAX_CONDITIONS:
            out.append(f"{at}.conditions: {count}, not between 1 and {MAX_CONDITIONS}")
        out += _log_match(value, at)
    return out


def _log_match(policy: dict[str, Any], at: str) -> list[str]:
    """The LogMatch rules above (RULES), for a policy with a conditionMatchedLog."""
    conditions = [c for c in policy.get("conditions", []) if isinstance(c, dict)]
    matched = [c["conditionMatchedLog"] for c in conditions if "conditionMatchedLog" in c]
    if not matched:
        return []
    out = []
    if len(conditions) != 1:
        out.append(f"{at}.conditions: a LogMatch condition allows no other condition")
    strategy = policy.get("alertStrategy") or {}
    if not isinstance(strategy, dict) or not strategy.get("notificationRateLimit"):
        out.append(
            f"{at}.alertStrategy.notificationRateLimit: required for a policy with a LogMatch "
            "condition"
        )
    for log in matched:
        text = log.get("filter") if isinstance(log, dict) else None
        if not isinstance(text, str) or not text.strip():
            out.append(f"{at}.conditions[].conditionMatchedLog.filter: required")
            continue
        try:
            parse_filter(text)
        except FilterError as exc:
            out.append(f"{at}.conditions[].conditionMatchedLog.filter: {exc}")
    return out


def problems(document: Any, root: str) -> list[str]:
    """What the Monitoring API would refuse in `document`, a `root` (Dashboard, AlertPolicy,
    NotificationChannel) as JSON; [] when it would take it."""
    source = DASHBOARD if root in DASHBOARD["schemas"] else ALERT_POLICY
    return _check(source["schemas"], {"$ref": root}, document, root)
