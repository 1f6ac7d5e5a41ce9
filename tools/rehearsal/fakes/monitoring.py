"""Loopback fake of Cloud Monitoring's dashboards (v1), alert policies and notification
channels (v3): google_monitoring_dashboard, _alert_policy, _notification_channel.

Like the real API: the service must be enabled, and a body with a field its discovery document
does not define, an enum value it does not list or a rule its prose states is refused with 400
(fakes/monitoring_rules.py, against the vendored discovery documents in schemas/discovery/).
"""

from __future__ import annotations

import re
from typing import Any

from tools.rehearsal.fakes import iamrules
from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer, api_error
from tools.rehearsal.fakes.iamrules import CHECKED_ON, PROJECT, Checked
from tools.rehearsal.fakes.monitoring_rules import problems

SERVICE = "monitoring.googleapis.com"
# (version, collection, the discovery document's schema, the permission prefix)
COLLECTIONS = (
    ("v1", "dashboards", "Dashboard", "monitoring.dashboards"),
    ("v3", "alertPolicies", "AlertPolicy", "monitoring.alertPolicies"),
    ("v3", "notificationChannels", "NotificationChannel", "monitoring.notificationChannels"),
)
# "This method requires the monitoring.dashboards.create permission on the specified project"
# (monitoring.v1 discovery document, projects.dashboards.create); get, patch and delete name
# "the specified dashboard", which holds no IAM policy of its own: the roles' lowest grantable
# resource is the project (cloud.google.com/iam/docs/roles-permissions/monitoring), so a grant
# reaches them there.
for _version, _collection, _schema, _prefix in COLLECTIONS:
    for _verb in ("create", "get", "update", "delete"):
        CHECKED_ON[f"{_prefix}.{_verb}"] = PROJECT


class FakeMonitoring(ApiFake):
    api = "monitoring"

    def routes(self) -> None:
        for version, collection, schema, prefix in COLLECTIONS:
            parent = rf"/{version}/projects/(?P<project>[^/]+)/{collection}"
            one = parent + r"/(?P<id>[^/:]+)"

            def create(m: re.Match[str], q: dict[str, str], body: Any, who: str,
                       c: str = collection, s: str = schema) -> Answer:  # fmt: skip
                return self._create(m, body, c, s)

            def patch(m: re.Match[str], q: dict[str, str], body: Any, who: str,
                      c: str = collection, s: str = schema) -> Answer:  # fmt: skip
                return self._patch(m, body, c, s)

            def get(m: re.Match[str], q: dict[str, str], body: Any, who: str,
                    c: str = collection) -> Answer:  # fmt: skip
                return self._get(m, c)

            def delete(m: re.Match[str], q: dict[str, str], body: Any, who: str,
                       c: str = collection) -> Answer:  # fmt: skip
                return self._delete(m, c)

            self.route("POST", parent, create, (f"{prefix}.create",))
            self.route("GET", one, get, (f"{prefix}.get",))
            self.route("PATCH", one, patch, (f"{prefix}.update",))
            self.route("DELETE", one, delete, (f"{prefix}.delete",))

    def resources(self, m: re.Match[str], query: dict[str, str], body: Any) -> list[Checked]:
        return [iamrules.project(m["project"])]

    def _key(self, project: str, collection: str, id_: str) -> str:
        return f"projects/{project}/{collection}/{id_}"

    def _refused(self, body: Any, schema: str) -> Answer | None:
        found = problems(body, schema)
        if found:
            return api_error(400, "Invalid JSON payload received. " + "; ".join(found))
        return None

    def _create(self, m: re.Match[str], body: Any, collection: str, schema: str) -> Answer:
        disabled = self.inventory.require_service(m["project"], SERVICE)
        if disabled is not None:
            return disabled
        bad = self._refused(body, schema)
        if bad is not None:
            return bad
        name = self._key(m["project"], collection, str(self.inventory.next_id()))
        stored = {**body, "name": name}
        self.inventory.put("monitoring", name, stored)
        return 200, stored

    def _get(self, m: re.Match[str], collection: str) -> Answer:
        name = self._key(m["project"], collection, m["id"])
        found = self.inventory.get("monitoring", name)
        if found is None:
            return api_error(404, f"Requested entity was not found: {name}")
        return 200, found

    def _patch(self, m: re.Match[str], body: Any, collection: str, schema: str) -> Answer:
        name = self._key(m["project"], collection, m["id"])
        if self.inventory.get("monitoring", name) is None:
            return api_error(404, f"Requested entity was not found: {name}")
        bad = self._refused(body, schema)
        if bad is not None:
            return bad
        stored = {**body, "name": name}
        self.inventory.put("monitoring", name, stored)
        return 200, stored

    def _delete(self, m: re.Match[str], collection: str) -> Answer:
        name = self._key(m["project"], collection, m["id"])
        if self.inventory.delete("monitoring", name) is None:
            return api_error(404, f"Requested entity was not found: {name}")
        return 200, {}
