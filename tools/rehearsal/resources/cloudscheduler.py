"""google_cloud_scheduler_job over Cloud Scheduler v1 (the deadline job of spot and on-demand)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.rehearsal.resources.base import ApiError, Resource, State, camel, single_block


class CloudSchedulerJob(Resource):
    type_name = "google_cloud_scheduler_job"
    api = "cloudscheduler"
    # The real provider patches every job setting in place; name and region replace it.
    updatable = frozenset(
        {
            "description",
            "schedule",
            "time_zone",
            "paused",
            "attempt_deadline",
            "retry_config",
            "http_target",
            "timeouts",
        }
    )

    def _name(self, state: State) -> str:
        region = state.get("region") or self.provider.region
        if not region:
            raise ApiError("google_cloud_scheduler_job: no region: set region or the provider's")
        return f"projects/{self.project(state)}/locations/{region}/jobs/{state['name']}"

    def _body(self, planned: State) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": self._name(planned),
            "schedule": planned.get("schedule"),
            "timeZone": planned.get("time_zone") or "Etc/UTC",
        }
        for key, value in (
            ("description", planned.get("description")),
            ("attemptDeadline", planned.get("attempt_deadline")),
        ):
            if value:
                body[key] = value
        retry = single_block(planned, "retry_config")
        if retry:
            body["retryConfig"] = camel(retry)
        target = single_block(planned, "http_target")
        if target:
            http: dict[str, Any] = {
                "uri": target.get("uri"),
                "httpMethod": target.get("http_method") or "POST",
            }
            oauth = single_block(target, "oauth_token")
            if oauth:
                http["oauthToken"] = camel(oauth)
            body["httpTarget"] = http
        return body

    def _computed(self, job: Mapping[str, Any], state: State) -> State:
        return {
            "id": job["name"],
            "project": self.project(state),
            "region": job["name"].split("/")[3],
            "state": job.get("state"),
            "paused": job.get("state") == "PAUSED",
        }

    def create(self, planned: State) -> State:
        body = self._body(planned)
        parent = body["name"].rsplit("/jobs/", 1)[0]
        job = self.client.call("POST", f"/v1/{parent}/jobs", body) or {}
        if planned.get("paused"):
            job = self.client.call("POST", f"/v1/{body['name']}:pause") or job
        return self._computed(job, planned)

    def read(self, state: State) -> State | None:
        job = self.client.call("GET", f"/v1/{self._name(state)}", missing_ok=True)
        return self._computed(job, state) if job else None

    def update(self, prior: State, planned: State) -> State:
        body = self._body(planned)
        job = self.client.call("PATCH", f"/v1/{body['name']}", body) or {}
        if bool(planned.get("paused")) != (job.get("state") == "PAUSED"):
            verb = "pause" if planned.get("paused") else "resume"
            job = self.client.call("POST", f"/v1/{body['name']}:{verb}") or job
        return self._computed(job, planned)

    def delete(self, state: State) -> None:
        self.client.call("DELETE", f"/v1/{self._name(state)}", missing_ok=True)
