"""google_container_cluster and _node_pool over the GKE API, and the four data sources the GKE
stacks read (google_container_cluster, google_container_engine_versions, google_client_config,
google_project)."""

from __future__ import annotations

import os
from typing import Any

from tools.rehearsal.resources.base import ApiError, DataSource, Resource, State

# Repeated blocks: their Terraform name -> the API's list field (the rest of a one-element list
# block is one object).
_LISTS = {"taint": "taints", "cidr_blocks": "cidrBlocks", "node_pool": "nodePools"}
# Blocks the provider sends under another API name (its expanders in resource_container_cluster.go:
# monitoring_config.managed_prometheus -> monitoringConfig.managedPrometheusConfig).
_RENAMES = {"managed_prometheus": "managedPrometheusConfig"}
# Terraform-only arguments: the provider reads them, the API never sees them.
_PROVIDER_ONLY = frozenset(
    {
        "deletion_protection",
        "timeouts",
        "project",
        "location",
        "cluster",
        "id",
        "remove_default_node_pool",
    }
)


def api_body(values: Any, key: str = "") -> Any:
    """A block's values in the API's shape: camelCase keys, nulls and empty lists dropped, a
    one-element block list as its object (repeated blocks named in _LISTS stay lists)."""
    if isinstance(values, dict):
        out: dict[str, Any] = {}
        for name, value in values.items():
            if name in _PROVIDER_ONLY or value is None or value == []:
                continue
            head, *rest = name.split("_")
            field = (
                _LISTS.get(name) or _RENAMES.get(name) or head + "".join(w.title() for w in rest)
            )
            out[field] = api_body(value, name)
        return out
    if isinstance(values, list):
        items = [api_body(v, key) for v in values]
        if key not in _LISTS and len(items) == 1 and isinstance(items[0], dict):
            return items[0]
        return items
    return values


def wait(client: Any, op: dict[str, Any] | None, path: str) -> None:
    """GKE's operations, polled as the provider polls them (ContainerOperationWaiter.QueryOp:
    projects.locations.operations.get, as the caller); the fake's are DONE at the first poll."""
    if op and op.get("status") in ("PENDING", "RUNNING"):
        location = path.split("/clusters", 1)[0]
        op = client.call("GET", f"{location}/operations/{op.get('name')}")
    if op and op.get("status") != "DONE":
        raise ApiError(f"operation {op.get('name')} did not finish")
    if op and op.get("error"):
        raise ApiError(f"operation {op.get('name')} failed: {op['error']}")


class ContainerCluster(Resource):
    type_name = "google_container_cluster"
    api = "container"
    # deletion_protection lives in Terraform state only (the provider checks it before a delete).
    updatable = frozenset({"deletion_protection", "timeouts"})

    def _path(self, state: State) -> str:
        return f"/v1beta1/projects/{self.project(state)}/locations/{state['location']}/clusters"

    def create(self, planned: State) -> State:
        body = api_body(planned)
        if planned.get("min_master_version"):
            body["initialClusterVersion"] = planned["min_master_version"]
        op = self.client.call("POST", self._path(planned), {"cluster": body})
        wait(self.client, op, self._path(planned))
        found = self.read(planned)
        if found is None:
            raise ApiError(f"cluster {planned['name']} was created but cannot be read")
        return found

    def read(self, state: State) -> State | None:
        found = self.client.call("GET", f"{self._path(state)}/{state['name']}", missing_ok=True)
        if found is None:
            return None
        project = self.project(state)
        ca = (found.get("masterAuth") or {}).get("clusterCaCertificate")
        return {
            "id": f"projects/{project}/locations/{state['location']}/clusters/{state['name']}",
            "project": project,
            "endpoint": found.get("endpoint"),
            "master_version": found.get("currentMasterVersion"),
            "self_link": found.get("selfLink"),
            "master_auth": [
                {
                    **((state.get("master_auth") or [{}])[0] or {}),
                    "cluster_ca_certificate": ca,
                }
            ],
        }

    def update(self, prior: State, planned: State) -> State:
        return self.read(planned) or {}

    def delete(self, state: State) -> None:
        # resource_container_cluster.go refuses before any API call.
        if state.get("deletion_protection") is not False:
            raise ApiError(
                "Cannot destroy cluster because deletion_protection is set to true. Set it to "
                "false to proceed with cluster deletion."
            )
        op = self.client.call("DELETE", f"{self._path(state)}/{state['name']}")
        wait(self.client, op, self._path(state))


class ContainerNodePool(Resource):
    type_name = "google_container_node_pool"
    api = "container"
    updatable = frozenset({"timeouts"})

    def _path(self, state: State) -> str:
        cluster = str(state.get("cluster") or "")
        if not cluster.startswith("projects/"):
            cluster = (
                f"projects/{self.project(state)}/locations/{state['location']}/clusters/{cluster}"
            )
        return f"/v1beta1/{cluster}/nodePools"

    def create(self, planned: State) -> State:
        body = api_body(planned)
        if "nodeConfig" in body:
            body["config"] = body.pop("nodeConfig")
        op = self.client.call("POST", self._path(planned), {"nodePool": body})
        wait(self.client, op, self._path(planned))
        return self.read(planned) or {}

    def read(self, state: State) -> State | None:
        found = self.client.call("GET", f"{self._path(state)}/{state['name']}", missing_ok=True)
        if found is None:
            return None
        return {
            "id": self._path(state).removeprefix("/v1beta1/") + f"/{state['name']}",
            "project": self.project(state),
            "version": found.get("version"),
            "instance_group_urls": [],
            "managed_instance_group_urls": [],
        }

    def delete(self, state: State) -> None:
        op = self.client.call("DELETE", f"{self._path(state)}/{state['name']}", missing_ok=True)
        wait(self.client, op, self._path(state))


class ContainerClusterData(DataSource):
    type_name = "google_container_cluster"
    api = "container"

    def read(self, config: State) -> State:
        project = config.get("project") or self.provider.project
        path = (
            f"/v1beta1/projects/{project}/locations/{config['location']}/clusters/{config['name']}"
        )
        found = self.client.call("GET", path, missing_ok=True)
        if found is None:
            raise ApiError(f"googleapi: Error 404: cluster {config['name']} not found")
        auth = found.get("masterAuth") or {}
        return {
            "id": path.removeprefix("/v1beta1/"),
            "project": project,
            "endpoint": found.get("endpoint"),
            "master_version": found.get("currentMasterVersion"),
            "master_auth": [
                {
                    "cluster_ca_certificate": auth.get("clusterCaCertificate"),
                    "client_certificate": "",
                    "client_key": "",
                    "client_certificate_config": [],
                }
            ],
        }


class EngineVersionsData(DataSource):
    """google_container_engine_versions: projects.locations.getServerConfig of its location,
    as data_source_google_container_engine_versions.go reads it (the valid versions filtered by
    version_prefix; per release channel its default, latest and upgrade-target version)."""

    type_name = "google_container_engine_versions"
    api = "container"

    def read(self, config: State) -> State:
        project = config.get("project") or self.provider.project
        location = config.get("location") or self.provider.zone
        path = f"/v1beta1/projects/{project}/locations/{location}/serverConfig"
        found = self.client.call("GET", path) or {}
        prefix = str(config.get("version_prefix") or "")
        masters = [v for v in found.get("validMasterVersions", []) if v.startswith(prefix)]
        nodes = [v for v in found.get("validNodeVersions", []) if v.startswith(prefix)]
        channels = found.get("channels", [])
        return {
            "id": f"{project}/{location}",
            "project": project,
            "location": location,
            "valid_master_versions": masters,
            "valid_node_versions": nodes,
            "latest_master_version": masters[0] if masters else "",
            "latest_node_version": nodes[0] if nodes else "",
            "default_cluster_version": found.get("defaultClusterVersion", ""),
            "release_channel_default_version": {
                c["channel"]: c.get("defaultVersion", "") for c in channels
            },
            "release_channel_latest_version": {
                c["channel"]: next(
                    (v for v in c.get("validVersions", []) if v.startswith(prefix)), ""
                )
                for c in channels
            },
            "release_channel_upgrade_target_version": {
                c["channel"]: c.get("upgradeTargetVersion", "") for c in channels
            },
        }


class ClientConfigData(DataSource):
    """The provider's own project and zone, and the access token it calls Google with."""

    type_name = "google_client_config"
    api = "container"

    def read(self, config: State) -> State:
        token = os.environ.get("GOOGLE_OAUTH_ACCESS_TOKEN", "").strip()
        if not token:
            raise ApiError("no access token: the rehearsal sets GOOGLE_OAUTH_ACCESS_TOKEN")
        p = self.provider
        return {
            "id": f"projects/{p.project}/regions/{p.region}/zones/{p.zone}",
            "project": p.project,
            "region": p.region,
            "zone": p.zone,
            "access_token": token,
            "default_labels": p.default_labels,
        }


class ProjectData(DataSource):
    type_name = "google_project"
    api = "cloudresourcemanager"

    def read(self, config: State) -> State:
        project = config.get("project_id") or self.provider.project
        found = self.client.call("GET", f"/v1/projects/{project}") or {}
        return {
            "id": f"projects/{project}",
            "project_id": project,
            "number": str(found.get("projectNumber", "")),
            "name": found.get("name"),
        }
