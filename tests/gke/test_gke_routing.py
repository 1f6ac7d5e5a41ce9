"""[routing] gateway = true: the Gateway, HTTPRoute, InferencePool, GKE policies and the endpoint
picker, each against its schema; the picker's metrics and thresholds from their one home; and
the refusals that keep the unfinished parts from being deployed.

One synth for the routing configuration (the shipped deployments/gke.toml with routing on).
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT, Synthesizer, gke_local_raw
from tests.stacks.test_gke_synth import _container
from tools.k8s_manifests import manifests
from tpudeploy import facts, policy
from tpudeploy.config import ConfigError, parse_config
from tpudeploy.config.gke import version_tuple
from tpudeploy.config.secretshape import HF_TOKEN_ERE
from tpudeploy.gke import metrics, picker_interface, pod, routing, scaleplan
from tpudeploy.gke.manifests import labels
from tpudeploy.platform import guard_rails

SCHEMAS = REPO_ROOT / "schemas" / "crds"
# Local mode (no pipeline = true): its stacks declare the subnet and NAT a pipeline deployment gets
# from the bootstrap (tests/gitops/test_gke_pipeline_identities.py).
RAW = gke_local_raw()
ROUTED = {
    **RAW,
    # GKE installs the InferencePool's CRD itself from this version on (facts).
    "gke": {**RAW["gke"], "min_version": facts.GKE_INFERENCE_CRDS_MIN_VERSION},
    "routing": {
        "gateway": True,
        "certificate": "gemma4-gateway",
        "proxy_subnet_cidr": "10.126.0.0/23",
    },
}
CFG = parse_config(ROUTED)
CUSTOM = {
    "gateway": "gateway.networking.k8s.io/gateway_v1.json",
    "http-route": "gateway.networking.k8s.io/httproute_v1.json",
    "inference-pool": "inference.networking.k8s.io/inferencepools.v1.6.0.crd.yaml",
    "pool-health-check": "networking.gke.io/healthcheckpolicy_v1.json",
    "pool-backend-policy": "networking.gke.io/gcpbackendpolicy_v1.json",
}


def _schema(relative: str) -> dict[str, Any]:
    path = SCHEMAS / relative  # vendored (schemas/README.md): absent fails, never skips
    if path.suffix == ".yaml":
        # A whole CRD: its served version's openAPIV3Schema (its CEL rules are not checked).
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
        return schema
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """Structural schemas prune unknown fields; the API server refuses them with
    fieldValidation=Strict (kubectl's default). Closing every object makes jsonschema do so."""
    out = dict(schema)
    if out.get("type") == "object" and "properties" in out:
        out.setdefault("additionalProperties", False)
        out["properties"] = {k: _strict(v) for k, v in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _strict(out["items"])
    if "metadata" in out.get("properties", {}):
        out["properties"]["metadata"] = {"type": "object"}
    return out


@pytest.mark.parametrize("key", list(CUSTOM))
def test_custom_resources_validate_against_their_schema(key: str) -> None:
    import jsonschema  # type: ignore[import-untyped]

    schema = _strict(_schema(CUSTOM[key]))
    body = routing.custom_resources(CFG)[key]
    jsonschema.validate(body, schema)
    broken = json.loads(json.dumps(body))
    broken["spec"]["unknownField"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_the_pool_fails_open_over_the_replicas_to_the_picker() -> None:
    pool = routing.inference_pool(CFG)["spec"]
    assert pool["selector"]["matchLabels"] == labels(CFG)  # the Deployment's pods
    assert pool["endpointPickerRef"]["failureMode"] == "FailOpen"
    assert pool["endpointPickerRef"]["name"] == routing.epp_name(CFG)
    route = routing.http_route(CFG)["spec"]["rules"][0]["backendRefs"][0]
    assert (route["kind"], route["name"]) == ("InferencePool", routing.pool_name(CFG))


def test_the_pool_sends_only_fields_every_ga_crd_has() -> None:
    """Issue 36: GKE installs the InferencePool's CRD and names no release; spec.appProtocol
    first appears in v1.4.0, so the pool sends only what v1.0.0, the first GA release, has."""
    from tools.rehearsal.fakes import k8s_rules

    installed: dict[tuple[str, str], str | None] = {k8s_rules.INFERENCE_POOL: None}
    pool = routing.inference_pool(CFG)
    assert k8s_rules.validate(pool, "1.34.0", installed) is k8s_rules.UNCHECKED
    newer = json.loads(json.dumps(pool))
    newer["spec"]["appProtocol"] = "http"
    newer["spec"]["endpointPickerRef"]["port"]["name"] = "grpc"
    assert k8s_rules.validate(newer, "1.34.0", installed) == (
        "spec.endpointPickerRef.port.name, spec.appProtocol: not in every GA InferencePool CRD "
        f"GKE may install ({k8s_rules.INFERENCE_POOL_GA_SOURCE})"
    )
    # and a cluster older than GKE's own install has no such kind at all
    older = k8s_rules.installed_crds({"currentMasterVersion": "1.33.5-gke.1080000"})
    assert k8s_rules.INFERENCE_POOL not in older
    assert k8s_rules.INFERENCE_POOL in k8s_rules.installed_crds(
        {"currentMasterVersion": facts.GKE_INFERENCE_CRDS_MIN_VERSION}
    )


def test_the_gateway_is_internal_by_default_and_terminates_tls() -> None:
    gw = routing.gateway(CFG)["spec"]
    assert gw["gatewayClassName"] == "gke-l7-rilb"
    (listener,) = gw["listeners"]
    assert (listener["protocol"], listener["tls"]["mode"]) == ("HTTPS", "Terminate")
    assert listener["tls"]["options"] == {routing.CERT_OPTION: "gemma4-gateway"}
    external = parse_config({**ROUTED, "network": {"allowed_cidrs": ["203.0.113.7/32"]}})
    assert routing.gateway(external)["spec"]["gatewayClassName"] == (
        "gke-l7-regional-external-managed"
    )


def _plugin(config: dict[str, Any], kind: str) -> dict[str, Any]:
    (plugin,) = (p for p in config["plugins"] if p["type"] == kind)
    return dict(plugin)


def test_the_picker_reads_the_checked_metric_names() -> None:
    config = routing.picker_config(CFG)
    (engine,) = _plugin(config, "core-metrics-extractor")["parameters"]["engineConfigs"]
    read = {v for k, v in engine.items() if k.endswith("Spec") and v}
    assert read == {r.metric for r in metrics.READS if r.reader == "picker"}
    assert metrics.problems(metrics.published(), where="vLLM") == []
    # The extractor is the one the data layer runs, and it replaces the built-in vllm mapping.
    assert (
        engine["name"] == _plugin(config, "core-metrics-extractor")["parameters"]["defaultEngine"]
    )
    (source,) = config["dataLayer"]["sources"]
    assert source["extractors"] == [{"pluginRef": "core-metrics-extractor"}]
    # vLLM's /metrics is reached through the front door's metrics listener, the only way out
    assert f"--model-server-metrics-port={pod.METRICS_PORT}" in routing.picker_args(CFG)


def test_saturation_thresholds_come_from_the_planner() -> None:
    config = routing.picker_config(CFG)
    assert config["saturationDetector"] == {"pluginRef": "utilization-detector"}
    detector = _plugin(config, "utilization-detector")["parameters"]
    load = CFG.load
    assert load.expected_clients and load.expected_context
    targets = scaleplan.scale_plan(
        CFG, clients=load.expected_clients, context=load.expected_context, ttft_ms=None
    ).targets
    assert detector == {
        "queueDepthThreshold": targets.waiting_per_replica,
        "kvCacheUtilThreshold": targets.kv_cache_usage,
    }
    tight = parse_config({**ROUTED, "load": {**RAW["load"], "target_ttft_ms": 200}})
    tight_detector = _plugin(routing.picker_config(tight), "utilization-detector")
    assert tight_detector["parameters"]["queueDepthThreshold"] == 1


# What this project shipped before picker_interface existed: the v1.4 metric flags and the
# thresholds under saturationDetector. The pinned picker refuses both and stops.
_OLD_ARGS = [
    "--pool-name=x",
    f"--total-queued-requests-metric={metrics.WAITING_METRIC}",
    f"--kv-cache-usage-percentage-metric={metrics.KV_CACHE_METRIC}",
]
_OLD_DETECTOR = {"queueDepthThreshold": 5, "kvCacheUtilThreshold": 0.8}


def test_the_pinned_picker_accepts_its_flags_and_config_and_refused_what_we_shipped() -> None:
    """Issue 26: the picker v1.5.0 stops on a metric flag that v1.4 took and on any field its
    typed config lacks (strict decoding); behind a fail-open pool that is silent."""
    config = routing.picker_config(CFG)
    assert picker_interface.problems(routing.picker_args(CFG), config) == []
    old = picker_interface.problems(_OLD_ARGS, {**config, "saturationDetector": _OLD_DETECTOR})
    assert old == [
        "--total-queued-requests-metric: refused when set; use core-metrics-extractor "
        "engineConfigs queuedRequestsSpec",
        "--kv-cache-usage-percentage-metric: refused when set; use core-metrics-extractor "
        "engineConfigs kvUsageSpec",
        'saturationDetector: unknown field "queueDepthThreshold" (strict decoding refuses it)',
        'saturationDetector: unknown field "kvCacheUtilThreshold" (strict decoding refuses it)',
    ]
    # The v1.5.0 guide's own spelling, `data:`, is not the decoder's `dataLayer`.
    docs_spelling = {k: v for k, v in config.items() if k != "dataLayer"}
    docs_spelling["data"] = config["dataLayer"]
    assert picker_interface.problems([], docs_spelling) == [
        'config: unknown field "data" (strict decoding refuses it)'
    ]


def test_the_picker_check_names_what_the_picker_would_ignore_or_refuse() -> None:
    config = routing.picker_config(CFG)
    misspelt = json.loads(json.dumps(config))
    _plugin(misspelt, "utilization-detector")["parameters"]["kvCacheUtilThresold"] = 0.5
    _plugin(misspelt, "utilization-detector")["parameters"]["queueDepthThreshold"] = 0
    misspelt["featureGates"] = ["flowcontrol"]
    misspelt["saturationDetector"] = {"pluginRef": "concurrency-detector"}
    assert picker_interface.problems(["--no-such-flag=1", "pool"], misspelt) == [
        "--no-such-flag: not a flag of the picker v1.5.0",
        "'pool': not a --flag=value argument",
        "featureGates: 'flowcontrol' is not a registered gate",
        "plugin 'utilization-detector': unknown parameter 'kvCacheUtilThresold' (the picker "
        "would ignore it)",
        "utilization-detector queueDepthThreshold 0: must be an int > 0",
        "pluginRef 'concurrency-detector': no plugin of that name in plugins",
    ]


def test_random_scoring_is_the_same_picker_without_its_scorers() -> None:
    """[routing] scoring = "random": the baseline `make bench ROUTE=gateway` compares against,
    through the same load balancer, pool, data layer and saturation check."""
    scored = routing.picker_config(CFG)
    rand = routing.picker_config(
        parse_config({**ROUTED, "routing": {**ROUTED["routing"], "scoring": "random"}})
    )
    assert picker_interface.problems(routing.picker_args(CFG), rand) == []
    ((profile,),) = [rand["schedulingProfiles"]]
    assert profile["plugins"] == [{"pluginRef": "random-picker"}]
    assert not {p["type"] for p in rand["plugins"]} & set(routing.SCORER_WEIGHTS)
    same = ("saturationDetector", "dataLayer")
    assert {k: rand[k] for k in same} == {k: scored[k] for k in same}
    assert _plugin(rand, "utilization-detector") == _plugin(scored, "utilization-detector")
    with pytest.raises(ConfigError, match=r"routing\.scoring"):
        parse_config({**ROUTED, "routing": {**ROUTED["routing"], "scoring": "round-robin"}})


def test_a_changed_picker_config_rolls_the_picker(synth: Synthesizer) -> None:
    """The picker reads its config once, at start, and a ConfigMap's new content restarts no
    pod: the config's digest on the pod template makes a change roll the Deployment."""
    objects = manifests(synth(ROUTED)[CFG.serving_stack_name])
    template = objects["kubernetes_deployment_v1.epp"]["spec"]["template"]["metadata"]
    text = objects["kubernetes_config_map_v1.epp-config"]["data"][routing.PICKER_CONFIG_FILE]
    digest = template["annotations"][routing.PICKER_CONFIG_DIGEST_ANNOTATION]
    assert digest == hashlib.sha256(text.encode()).hexdigest()
    other = parse_config({**ROUTED, "routing": {**ROUTED["routing"], "scoring": "random"}})
    assert routing.picker_pod_annotations(other) != routing.picker_pod_annotations(CFG)


def test_a_picker_image_of_another_release_is_refused() -> None:
    other = parse_config(
        {
            **ROUTED,
            "routing": {
                **ROUTED["routing"],
                "picker_image": "registry.k8s.io/gateway-api-inference-extension/epp:v1.6.0"
                "@sha256:" + "0" * 64,
            },
        }
    )
    (finding,) = routing.findings(other)
    assert (finding.key, finding.severity) == ("routing.picker_image", "error")
    assert "v1.5.0" in finding.message and "picker_interface.py" in finding.message


def test_prefix_affinity_weighs_most_and_every_scorer_is_in_the_profile() -> None:
    config = routing.picker_config(CFG)
    (profile,) = config["schedulingProfiles"]
    refs = {p["pluginRef"]: p.get("weight") for p in profile["plugins"]}
    assert set(routing.SCORER_WEIGHTS) <= set(refs)
    assert {p["type"] for p in config["plugins"]} >= set(refs)
    assert max(routing.SCORER_WEIGHTS, key=routing.SCORER_WEIGHTS.__getitem__) == (
        "prefix-cache-scorer"
    )


def test_streams_outlive_the_load_balancers_default_and_drain_inside_the_notice() -> None:
    policy_spec = routing.backend_policy(CFG)["spec"]["default"]
    assert policy_spec["timeoutSec"] > 30  # the backend service's default cuts long streams
    assert policy_spec["connectionDraining"]["drainingTimeoutSec"] <= 30  # spot's notice


def test_routing_is_deployable_and_each_missing_part_is_refused_with_the_fix() -> None:
    """Issue 26: routing was refused while the front door had no keyed plain listener for the
    InferencePool (tests/gke/test_gke_frontdoor.py runs that listener under real nginx now)."""
    assert routing.findings(CFG) == []
    policy.enforce(CFG, guard_rails(CFG), source="gke.toml")  # raises on any error finding
    unpinned = parse_config(
        {**ROUTED, "routing": {**ROUTED["routing"], "picker_image": "registry.k8s.io/x/epp:v1"}}
    )
    found = [str(f) for f in routing.findings(unpinned)]
    assert any("routing.picker_image" in f and "not pinned by digest" in f for f in found)
    no_cert = parse_config({**ROUTED, "routing": {"gateway": True}})
    assert any("routing.certificate" in str(f) for f in routing.findings(no_cert))
    assert routing.findings(parse_config(RAW)) == []  # routing off: nothing refused


def test_a_cluster_without_the_inference_pool_kind_is_refused_with_the_version() -> None:
    """GKE installs the InferencePool CRD from 1.34.0-gke.1626000 on; on an older cluster the
    first apply of the pool would fail with no such kind, after the cluster was paid for."""
    with pytest.raises(ConfigError) as raised:
        parse_config({**ROUTED, "gke": RAW["gke"]})
    text = str(raised.value)
    assert f"gke.min_version = {RAW['gke']['min_version']!r}" in text
    assert f'set min_version = "{facts.GKE_INFERENCE_CRDS_MIN_VERSION}" or later' in text
    parse_config({**RAW, "gke": RAW["gke"]})  # routing off: the older version is fine


@pytest.mark.parametrize(
    ("subnet", "refused"),
    [({}, True), ({"proxy_subnet_exists": True}, False), ({"proxy_subnet_cidr": "10.1.0.0/26"},
     False), ({"proxy_subnet_cidr": "10.1.0.0/26", "proxy_subnet_exists": True}, True)],
)  # fmt: skip
def test_the_proxy_only_subnet_is_declared_or_confirmed_never_both(
    subnet: dict[str, Any], refused: bool
) -> None:
    cfg = parse_config({**ROUTED, "routing": {"gateway": True, "certificate": "c", **subnet}})
    keys = [f.key for f in routing.findings(cfg)]
    assert ("routing.proxy_subnet_cidr" in keys) == refused
    # An existing subnet's range is unknown here: the pool port's wider reach is said, not hidden.
    said = [f for f in routing.findings(cfg) if f.key == "routing.proxy_subnet_exists"]
    assert bool(said) == (subnet == {"proxy_subnet_exists": True})
    assert all(f.severity == "warning" and "any source" in f.message for f in said)


@pytest.mark.parametrize(
    ("value", "words"),
    [("10.126.0.0/27", ["at least 64 addresses", '"10.126.0.0/23"']),
     ("10.126.0.1/23", ["not an IPv4 network"]), ("fd00::/64", ["not an IPv4 network"])],
)  # fmt: skip
def test_a_bad_proxy_subnet_range_is_refused_with_the_fix(value: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({**RAW, "routing": {"proxy_subnet_cidr": value}})
    text = str(raised.value)
    assert "routing.proxy_subnet_cidr" in text and all(w in text for w in words)


def test_a_shared_vpc_subnet_is_not_declared_here() -> None:
    shared = parse_config(
        {**ROUTED, "network": {"network": "projects/host-project/global/networks/shared"}}
    )
    found = [str(f) for f in routing.findings(shared)]
    assert any("host project" in f for f in found)


def test_the_default_picker_image_is_pinned_by_digest() -> None:
    assert "@sha256:" in CFG.routing.picker_image
    assert not [f for f in routing.findings(CFG) if f.key == "routing.picker_image"]


# ---- the synthesized objects -------------------------------------------------------------------


@pytest.fixture
def objects(synth: Synthesizer) -> dict[str, dict[str, Any]]:
    return manifests(synth(ROUTED)[CFG.serving_stack_name])


def test_core_objects_validate_for_the_pinned_cluster_minor(
    objects: dict[str, dict[str, Any]],
) -> None:
    import kubernetes_validate  # type: ignore[import-untyped]

    major, minor, _, _ = version_tuple(CFG.gke.min_version)
    picker = {k: v for k, v in objects.items() if k.split(".", 1)[1].startswith("epp")}
    assert len(picker) == 8  # account, 2 roles, 2 bindings, config, deployment, service
    for address, obj in picker.items():
        try:
            kubernetes_validate.validate(obj, f"{major}.{minor}.0", strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{address}: {exc.message} at {list(exc.path)}")
    deployment = objects["kubernetes_deployment_v1.epp"]["spec"]["template"]["spec"]
    (container,) = deployment["containers"]
    assert container["resources"] == routing.EPP_RESOURCES  # not the upstream 8 CPU / 8 GiB
    assert container["args"] == routing.picker_args(CFG)
    config = objects["kubernetes_config_map_v1.epp-config"]["data"][routing.PICKER_CONFIG_FILE]
    assert yaml.safe_load(config) == routing.picker_config(CFG)


def test_the_picker_rolls_out_as_upstreams_chart_does(objects: dict[str, dict[str, Any]]) -> None:
    """Issue 36: upstream's chart (config/charts/epplib/templates/_deployment.yaml, v1.5.0) runs
    one active replica, replaced with Recreate (its prefix cache is per replica: two at once
    split it), and a 130 s grace "to mirror the longest grace period of the pods within the
    pool"; a RollingUpdate would run two pickers side by side on every change."""
    spec = objects["kubernetes_deployment_v1.epp"]["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    grace = spec["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace == 130 and grace >= pod.termination_grace_s()


def test_the_picker_serves_no_pprof(objects: dict[str, dict[str, Any]]) -> None:
    """v1.5.0's --enable-pprof defaults to true (pkg/epp/server/options.go: EnablePprof: true,
    "Defaults to true"): its metrics port would serve /debug/pprof to anyone who reaches it."""
    assert "enable-pprof" in picker_interface.FLAGS
    (container,) = objects["kubernetes_deployment_v1.epp"]["spec"]["template"]["spec"]["containers"]
    assert "--enable-pprof=false" in container["args"]


def test_the_stack_declares_every_custom_resource(objects: dict[str, dict[str, Any]]) -> None:
    for key, body in routing.custom_resources(CFG).items():
        assert objects[f"kubernetes_manifest.{key}"] == body


def test_the_proxy_only_subnet_is_declared_before_the_gateway(synth: Synthesizer) -> None:
    serving = synth(ROUTED)[CFG.serving_stack_name]
    subnet = serving["resource"]["google_compute_subnetwork"]["proxy-only-subnet"]
    assert (subnet["purpose"], subnet["role"]) == ("REGIONAL_MANAGED_PROXY", "ACTIVE")
    assert subnet["ip_cidr_range"] == "10.126.0.0/23"
    assert subnet["region"] == CFG.effective_region
    gateway = serving["resource"]["kubernetes_manifest"]["gateway"]
    assert "google_compute_subnetwork.proxy-only-subnet" in gateway["depends_on"]


def test_no_secret_and_no_kubernetes_secret_in_the_routed_stack(synth: Synthesizer) -> None:
    """The Gateway's TLS key stays in Certificate Manager: no Secret, no key material in state."""
    text = json.dumps(synth(ROUTED)[CFG.serving_stack_name])
    assert "kubernetes_secret" not in text and '"kind": "Secret"' not in text
    assert "certificateRefs" not in text  # a Gateway's Secret-held certificate
    # No PEM block of any kind: a header followed by base64 (the front door's prep script
    # names the headers it splits the stored bundle at, with no block after them).
    assert not re.search(r"-----BEGIN [A-Z ]+-----(\\n|\n)?[A-Za-z0-9+/]{16}", text)
    assert not re.search(HF_TOKEN_ERE.strip("^$"), text)


def test_routing_off_declares_none_of_it(synth: Synthesizer) -> None:
    plain = manifests(synth(RAW)[parse_config(RAW).serving_stack_name])
    assert not [k for k in plain if "epp" in k or k.endswith(tuple(CUSTOM))]
    cluster = synth(RAW)[parse_config(RAW).gke_stack_name]["resource"]["google_container_cluster"]
    assert "gateway_api_config" not in cluster["cluster"]
    door = _container(plain, "frontdoor")
    assert pod.POOL_PORT not in [p["containerPort"] for p in door["ports"]]


def test_the_pool_targets_the_front_doors_keyed_plain_port(
    objects: dict[str, dict[str, Any]],
) -> None:
    """The InferencePool and the load balancer's health check reach the pod on the port the
    front door's nginx listens on with the key check (tests/gke/test_gke_frontdoor.py)."""
    door = _container(objects, "frontdoor")
    assert {"name": "pool", "containerPort": pod.POOL_PORT, "protocol": "TCP"} in door["ports"]
    pool = objects["kubernetes_manifest.inference-pool"]["spec"]
    # No appProtocol: its default, "http", is what the port speaks, and the field is not in
    # every GA CRD GKE may install (test_the_pool_sends_only_fields_every_ga_crd_has).
    assert pool["targetPorts"] == [{"number": pod.POOL_PORT}] and "appProtocol" not in pool
    check = objects["kubernetes_manifest.pool-health-check"]["spec"]["default"]["config"]
    assert check["httpHealthCheck"] == {"requestPath": "/health", "port": pod.POOL_PORT}
    assert f"listen {pod.POOL_PORT};" in pod.scripts(CFG)[pod.NGINX_CONF]


def test_the_pool_port_admits_the_proxy_subnet_and_health_checks_only(
    objects: dict[str, dict[str, Any]],
) -> None:
    """Issue 36: the pool port is plain HTTP behind the key; only the Gateway's Envoy proxies
    (the proxy-only subnet) and Google's health check ranges need it
    (cloud.google.com/load-balancing/docs/firewall-rules), and the picker scrapes the metrics
    port beside the collectors."""
    from tests.stacks.test_gke_synth import _ingress_by_port

    by_port = _ingress_by_port(objects)
    assert by_port[pod.POOL_PORT] == [
        {"ipBlock": {"cidr": c}}
        for c in (CFG.routing.proxy_subnet_cidr, "35.191.0.0/16", "130.211.0.0/22")
    ]
    picker = {"podSelector": {"matchLabels": labels(CFG) | {"app.kubernetes.io/name": "epp"}}}
    assert picker in by_port[pod.METRICS_PORT] and len(by_port[pod.METRICS_PORT]) == 2
    epp = objects["kubernetes_deployment_v1.epp"]["spec"]["template"]["metadata"]["labels"]
    assert epp == picker["podSelector"]["matchLabels"]


def test_the_routed_cluster_enables_gkes_gateway_controller(synth: Synthesizer) -> None:
    cluster = synth(ROUTED)[CFG.gke_stack_name]["resource"]["google_container_cluster"]["cluster"]
    assert cluster["gateway_api_config"] == {"channel": "CHANNEL_STANDARD"}
    # The floor the InferencePool needs is the precondition's (tests/gke/test_gke_vpc.py).
    major, minor, patch, gke = version_tuple(facts.GKE_INFERENCE_CRDS_MIN_VERSION)
    floor = int(f"{major}{minor:03d}{patch:03d}{gke:010d}")
    assert f">= {floor})" in cluster["lifecycle"]["precondition"][0]["condition"]


def test_the_shipped_configs_leave_routing_off() -> None:
    for path in sorted((REPO_ROOT / "deployments").glob("*.toml")):
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        assert not raw.get("routing", {}).get("gateway"), path


def test_terraform_loads_the_routed_stack_with_only_the_pinned_providers(
    terraform: str, synth: Synthesizer, tmp_path: Path
) -> None:
    from tests.stacks.test_terraform import (
        GOOGLE_BETA,
        GOOGLE_BETA_VERSION,
        KUBERNETES,
        KUBERNETES_VERSION,
        required_providers,
    )

    found = required_providers(terraform, synth(ROUTED)[CFG.serving_stack_name], tmp_path)
    assert found == {f"{GOOGLE_BETA} {GOOGLE_BETA_VERSION}", f"{KUBERNETES} {KUBERNETES_VERSION}"}
