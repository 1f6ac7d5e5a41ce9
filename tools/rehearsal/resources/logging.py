"""google_logging_metric (Logging API v2 projects.metrics), over the fake Logging API."""

from __future__ import annotations

from typing import Any

from tools.rehearsal.resources.base import Resource, State, single_block


class LoggingMetric(Resource):
    """What the provider sends (resource_logging_metric.go): the LogMetric's fields camelCased,
    created under projects/P/metrics and addressed by its name; an update is a PUT of the whole
    metric (projects.metrics.update)."""

    type_name = "google_logging_metric"
    api = "logging"
    updatable = frozenset(
        {
            "description",
            "filter",
            "metric_descriptor",
            "label_extractors",
            "value_extractor",
            "bucket_options",
            "disabled",
            "timeouts",
        }
    )

    def body(self, planned: State) -> dict[str, Any]:
        body: dict[str, Any] = {"name": planned["name"], "filter": planned["filter"]}
        if planned.get("description"):
            body["description"] = planned["description"]
        descriptor = single_block(planned, "metric_descriptor")
        if descriptor:
            out: dict[str, Any] = {
                "metricKind": descriptor.get("metric_kind"),
                "valueType": descriptor.get("value_type"),
            }
            if descriptor.get("unit"):
                out["unit"] = descriptor["unit"]
            if descriptor.get("labels"):
                out["labels"] = [
                    {
                        "key": label.get("key"),
                        "valueType": label.get("value_type") or "STRING",
                        **(
                            {"description": label["description"]}
                            if label.get("description")
                            else {}
                        ),
                    }
                    for label in descriptor["labels"]
                ]
            body["metricDescriptor"] = out
        if planned.get("label_extractors"):
            body["labelExtractors"] = planned["label_extractors"]
        if planned.get("value_extractor"):
            body["valueExtractor"] = planned["value_extractor"]
        explicit = single_block(single_block(planned, "bucket_options"), "explicit_buckets")
        if explicit:
            body["bucketOptions"] = {"explicitBuckets": {"bounds": explicit.get("bounds")}}
        return body

    def _path(self, state: State) -> str:
        return f"/v2/projects/{self.project(state)}/metrics/{state['name']}"

    def computed(self, state: State) -> State:
        return {"id": state["name"], "project": self.project(state)}

    def create(self, planned: State) -> State:
        self.client.call(
            "POST", f"/v2/projects/{self.project(planned)}/metrics", self.body(planned)
        )
        return self.computed(planned)

    def read(self, state: State) -> State | None:
        found = self.client.call("GET", self._path(state), missing_ok=True)
        return self.computed(state) if found else None

    def update(self, prior: State, planned: State) -> State:
        self.client.call("PUT", self._path(planned), self.body(planned))
        return self.computed(planned)

    def delete(self, state: State) -> None:
        self.client.call("DELETE", self._path(state), missing_ok=True)
