"""Terraform tier, platform = "gke": `terraform validate` of the synthesized `<name>-gke` and
`<name>-serving` stacks against the stand-in google-beta and kubernetes providers, whose schemas
are generated from the bindings' jsii assemblies (tools/rehearsal/schema.py), installed offline
from the rehearsal's mirror. Terraform itself judges every attribute and block; a misspelt one
fails.

Reuses the session's synth of deployments/gke.toml (tests/stacks/test_gke_synth.py synthesizes the
same raw data), so this file adds Terraform runs, not a synthesis.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, Synthesizer, gke_local_raw, terraform_env, without_backend
from tools.rehearsal import schema
from tools.rehearsal.bindings import GOOGLE_BETA, KUBERNETES
from tools.rehearsal.mirror import lock_file, write_mirror
from tools.rehearsal.provider import VALIDATE_ONLY_ENV
from tools.rehearsal.resources import RESOURCES, VALIDATE_ONLY
from tpudeploy.config import parse_config

RAW = tomllib.loads((REPO_ROOT / "deployments" / "gke.toml").read_text(encoding="utf-8"))
CFG = parse_config(RAW)


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory, terraform: str) -> Iterator[Path]:
    """The mirror with both stand-ins, and a lock file for both, computed offline."""
    root = tmp_path_factory.mktemp("gke-validate")
    config = write_mirror(
        root / "tf",
        python=sys.executable,
        repo=REPO_ROOT,
        # With the validate-only types (tools/rehearsal/resources.VALIDATE_ONLY), if any.
        schema=schema.stand_in_schema(),
        kubernetes_schema=schema.ensure(None, binding=KUBERNETES),
    )
    env = {
        **terraform_env(root),
        "TF_CLI_CONFIG_FILE": str(config),
        "HTTPS_PROXY": "http://127.0.0.1:9",
    }
    lock_file(root / "tf", env=env, bindings=(GOOGLE_BETA, KUBERNETES))
    yield root


def _run(terraform: str, root: Path, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **terraform_env(root),
        "TF_CLI_CONFIG_FILE": str(root / "tf" / "terraform.rc"),
        "HTTPS_PROXY": "http://127.0.0.1:9",
        # Terraform passes its environment to the providers it starts.
        VALIDATE_ONLY_ENV: ",".join(VALIDATE_ONLY),
    }
    return subprocess.run(
        [terraform, *args], cwd=work, env=env, capture_output=True, text=True, timeout=180
    )


def _folder(root: Path, name: str, doc: dict[str, Any]) -> Path:
    work = root / name
    work.mkdir(exist_ok=True)
    lock = root / "tf" / "lock-google-beta-kubernetes" / ".terraform.lock.hcl"
    (work / ".terraform.lock.hcl").write_text(lock.read_text())
    (work / "cdk.tf.json").write_text(json.dumps(without_backend(doc)))
    return work


def _validate(terraform: str, root: Path, work: Path) -> subprocess.CompletedProcess[str]:
    init = _run(terraform, root, work, "init", "-input=false", "-backend=false")
    assert init.returncode == 0, init.stdout + init.stderr
    return _run(terraform, root, work, "validate", "-no-color")


@pytest.mark.parametrize("kind", ["gke", "serving", "serving-local", "secrets-local"])
def test_terraform_validates_the_gke_stacks_against_both_generated_schemas(
    terraform: str, synth: Synthesizer, stand_ins: Path, kind: str
) -> None:
    """The shipped file (a pipeline deployment), and the same file run locally (the session's
    gke_pair synthesis: its stacks declare the dashboard and the alert policies too)."""
    raw = gke_local_raw() if kind.endswith("-local") else RAW
    name = {
        "gke": CFG.gke_stack_name,
        "serving": CFG.serving_stack_name,
        "serving-local": CFG.serving_stack_name,
        "secrets-local": CFG.secrets_stack_name,
    }[kind]
    doc = synth(raw)[name]
    if kind == "serving-local":
        assert "google_monitoring_alert_policy" in doc["resource"]
    if kind == "secrets-local":
        assert "google_monitoring_dashboard" in doc["resource"]
    work = _folder(stand_ins, f"{name}-{kind}", doc)
    done = _validate(terraform, stand_ins, work)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The configuration is valid" in done.stdout


# Slow tier: a second synth (the routed config) and two validations, about 9 s of CPU; CI runs
# it (make test-slow).
@pytest.mark.slow_tier
def test_terraform_validates_the_routed_stacks(
    terraform: str, synth: Synthesizer, stand_ins: Path
) -> None:
    """[routing] gateway = true adds the Gateway API channel to the cluster, the proxy-only
    subnet, the picker's typed objects and the routing manifests: Terraform judges them too."""
    from tests.gke.test_gke_routing import ROUTED

    stacks = synth(ROUTED)
    for name in (CFG.gke_stack_name, CFG.serving_stack_name):
        assert "google_compute_subnetwork" in RESOURCES  # the proxy-only subnet has its fake
        work = _folder(stand_ins, f"{name}-routed", stacks[name])
        done = _validate(terraform, stand_ins, work)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "The configuration is valid" in done.stdout
    serving = stacks[CFG.serving_stack_name]["resource"]
    assert "proxy-only-subnet" in serving["google_compute_subnetwork"]
    (cluster,) = stacks[CFG.gke_stack_name]["resource"]["google_container_cluster"].values()
    assert cluster["gateway_api_config"] == {"channel": "CHANNEL_STANDARD"}


def _misspell_cluster(doc: dict[str, Any]) -> str:
    (cluster,) = doc["resource"]["google_container_cluster"].values()
    cluster["enable_shielded_node"] = cluster.pop("enable_shielded_nodes")
    return "enable_shielded_node"


def _misspell_container(doc: dict[str, Any]) -> str:
    deployment = doc["resource"]["kubernetes_deployment_v1"]["deployment"]
    container = deployment["spec"]["template"]["spec"]["container"][0]
    container["startup_probes"] = container.pop("startup_probe")
    return "startup_probes"


def _misspell_hpa(doc: dict[str, Any]) -> str:
    (hpa,) = doc["resource"]["kubernetes_horizontal_pod_autoscaler_v2"].values()
    hpa["spec"]["max_replica"] = hpa["spec"].pop("max_replicas")
    return "max_replica"


@pytest.mark.parametrize(
    ("kind", "misspellings"),
    # Both of the serving stack's in one run: Terraform reports every error it finds.
    [("gke", (_misspell_cluster,)), ("serving", (_misspell_container, _misspell_hpa))],
)
def test_a_misspelt_attribute_fails_validation(
    terraform: str, synth: Synthesizer, stand_ins: Path, kind: str, misspellings: Any
) -> None:
    name = {"gke": CFG.gke_stack_name, "serving": CFG.serving_stack_name}[kind]
    doc = synth(RAW)[name]
    wrong = [misspell(doc) for misspell in misspellings]
    work = _folder(stand_ins, f"{name}-misspelt", doc)
    done = _validate(terraform, stand_ins, work)
    assert done.returncode != 0, done.stdout
    for attribute in wrong:
        assert f'"{attribute}"' in done.stderr, done.stderr


def test_the_generated_kubernetes_schema_is_the_real_providers() -> None:
    """Facts of kubernetes 2.38.0 (its docs): kubernetes_manifest's manifest is a required
    dynamic value, a deployment's metadata a required block of one, the provider's exec block."""
    k8s = schema.load(None, binding=KUBERNETES)
    assert k8s["provider_version"] == "2.38.0"
    manifest = k8s["resource_schemas"]["kubernetes_manifest"]["block"]["attributes"]
    assert manifest["manifest"] == {"type": "dynamic", "required": True}
    deployment = k8s["resource_schemas"]["kubernetes_deployment_v1"]["block"]
    assert deployment["block_types"]["metadata"]["min_items"] == 1
    assert deployment["block_types"]["metadata"]["max_items"] == 1
    provider = k8s["provider"]["block"]
    assert {"host", "token", "cluster_ca_certificate"} <= set(provider["attributes"])
    assert "exec" in provider["block_types"]


def test_the_data_sources_the_stacks_read_have_schemas() -> None:
    google = schema.load_stand_in()
    cluster = google["data_source_schemas"]["google_container_cluster"]["block"]["attributes"]
    assert cluster["name"].get("required")
    assert cluster["endpoint"] == {"type": "string", "computed": True}
    token = google["data_source_schemas"]["google_client_config"]["block"]["attributes"]
    assert token["access_token"]["computed"]


def test_every_namespaced_custom_resource_waits_for_its_namespace(synth: Synthesizer) -> None:
    """A kubernetes_manifest names its namespace as a literal: without depends_on Terraform
    creates it beside the namespace, and the API server refuses it (namespace not found). The
    GKE rehearsal's fake Kubernetes API refused the PodMonitoring and the SecretProviderClass so
    on 24029fa."""
    serving = synth(RAW)[CFG.serving_stack_name]
    ns_ids = {
        body["metadata"]["name"]: key
        for key, body in serving["resource"]["kubernetes_namespace_v1"].items()
    }
    namespaced = {
        key: body
        for key, body in serving["resource"]["kubernetes_manifest"].items()
        if body["manifest"].get("metadata", {}).get("namespace")
    }
    assert namespaced  # the PodMonitoring and the SecretProviderClass
    for key, body in namespaced.items():
        ns_id = ns_ids[body["manifest"]["metadata"]["namespace"]]
        assert f"kubernetes_namespace_v1.{ns_id}" in body.get("depends_on", []), key
