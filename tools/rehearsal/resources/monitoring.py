"""google_monitoring_dashboard (Monitoring API v1), google_monitoring_alert_policy and
google_monitoring_notification_channel (v3), over the fake Monitoring API."""

from __future__ import annotations

import json
from typing import Any

from tools.rehearsal.resources.base import ApiError, Resource, State, camel, single_block


class _Named(Resource):
    """A resource the API names (projects/P/<collection>/ID): the provider's id is that name."""

    api = "monitoring"
    version = "v1"
    collection = ""

    def body(self, planned: State) -> dict[str, Any]:
        raise NotImplementedError

    def computed(self, found: dict[str, Any], state: State) -> State:
        return {"id": found["name"], "project": self.project(state)}

    def create(self, planned: State) -> State:
        parent = f"/{self.version}/projects/{self.project(planned)}/{self.collection}"
        found = self.client.call("POST", parent, self.body(planned)) or {}
        if "name" not in found:
            raise ApiError(f"{self.type_name}: the API answered without a name")
        return self.computed(found, planned)

    def read(self, state: State) -> State | None:
        found = self.client.call("GET", f"/{self.version}/{state['id']}", missing_ok=True)
        return self.computed(found, state) if found else None

    def update(self, prior: State, planned: State) -> State:
        found = self.client.call("PATCH", f"/{self.version}/{prior['id']}", self.body(planned))
        return self.computed(found or {"name": prior["id"]}, planned)

    def delete(self, state: State) -> None:
        self.client.call("DELETE", f"/{self.version}/{state['id']}", missing_ok=True)


class MonitoringDashboard(_Named):
    """The provider sends dashboard_json as the request body, as it is (resource_monitoring_
    dashboard.go: json.Unmarshal of dashboard_json into the create call's object)."""

    type_name = "google_monitoring_dashboard"
    collection = "dashboards"
    updatable = frozenset({"dashboard_json", "timeouts"})

    def body(self, planned: State) -> dict[str, Any]:
        try:
            doc: dict[str, Any] = json.loads(planned["dashboard_json"])
        except (TypeError, ValueError) as exc:
            raise ApiError(
                f"google_monitoring_dashboard: dashboard_json is not JSON: {exc}"
            ) from None
        return doc


class MonitoringAlertPolicy(_Named):
    type_name = "google_monitoring_alert_policy"
    version = "v3"
    collection = "alertPolicies"
    updatable = frozenset(
        {
            "display_name",
            "combiner",
            "conditions",
            "documentation",
            "notification_channels",
            "user_labels",
            "enabled",
            "severity",
            "alert_strategy",
            "timeouts",
        }
    )

    def body(self, planned: State) -> dict[str, Any]:
        conditions = []
        for condition in planned.get("conditions") or []:
            out: dict[str, Any] = {"displayName": condition.get("display_name")}
            promql = single_block(condition, "condition_prometheus_query_language")
            if promql:
                out["conditionPrometheusQueryLanguage"] = camel(promql)
            matched = single_block(condition, "condition_matched_log")
            if matched:
                # label_extractors' keys are the user's label names: never camel-cased.
                log: dict[str, Any] = {"filter": matched.get("filter")}
                if matched.get("label_extractors"):
                    log["labelExtractors"] = matched["label_extractors"]
                out["conditionMatchedLog"] = log
            conditions.append(out)
        body: dict[str, Any] = {
            "displayName": planned.get("display_name"),
            "combiner": planned.get("combiner"),
            "conditions": conditions,
        }
        strategy = single_block(planned, "alert_strategy")
        if strategy:
            limit = single_block(strategy, "notification_rate_limit")
            out_strategy = camel({"auto_close": strategy.get("auto_close")})
            if limit:
                out_strategy["notificationRateLimit"] = camel(limit)
            if out_strategy:
                body["alertStrategy"] = out_strategy
        doc = single_block(planned, "documentation")
        if doc:
            body["documentation"] = camel(doc)
        for key, value in (
            ("notificationChannels", planned.get("notification_channels")),
            ("userLabels", planned.get("user_labels")),
            ("severity", planned.get("severity")),
        ):
            if value:
                body[key] = value
        return body

    def computed(self, found: dict[str, Any], state: State) -> State:
        return {**super().computed(found, state), "name": found["name"]}


class MonitoringNotificationChannel(_Named):
    type_name = "google_monitoring_notification_channel"
    version = "v3"
    collection = "notificationChannels"
    updatable = frozenset(
        {"display_name", "labels", "user_labels", "description", "enabled", "timeouts"}
    )

    def body(self, planned: State) -> dict[str, Any]:
        body: dict[str, Any] = {"type": planned.get("type")}
        for key, value in (
            ("displayName", planned.get("display_name")),
            ("labels", planned.get("labels")),
            ("userLabels", planned.get("user_labels")),
            ("description", planned.get("description")),
        ):
            if value:
                body[key] = value
        return body

    def computed(self, found: dict[str, Any], state: State) -> State:
        return {**super().computed(found, state), "name": found["name"]}
