"""What the pinned endpoint picker accepts and refuses: its flags and its EndpointPickerConfig,
kept as data with the source each rule was read from, and the check that applies them.

The picker (EPP) reads its flags and its config file once, at start; a flag or a field it refuses
stops it before it serves, and with the pool's FailOpen the Gateway then balances without it, so a
refused config shows up as "routing does nothing", not as an error anywhere a user looks. Two
refusals of v1.5.0 were in what we shipped until this module existed (four metric flags that
v1.4 took, and the saturation thresholds where v1.5.0 takes only a plugin reference).

Read from kubernetes-sigs/gateway-api-inference-extension at the tag below (the repository's
source, not its docs: the v1.5.0 config guide still says `data:` where the decoder takes
`dataLayer:`). Another release needs this file read again from that release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

RELEASE = "v1.5.0"
COMMIT = "df9f8909fe06fe2dfd4a6fc0bd0c01a0acabf849"
SOURCE = f"github.com/kubernetes-sigs/gateway-api-inference-extension {RELEASE} ({COMMIT[:12]})"

# pkg/epp/server/options.go, Options.AddFlags: every flag the picker defines (the logging
# options add their own; none is used here). An undefined flag stops pflag's parse.
FLAGS = frozenset(
    {
        "grpc-port", "ha-enable-leader-election", "pool-group", "pool-namespace", "pool-name",
        "endpoint-selector", "endpoint-target-ports", "disable-endpoint-subset-filter",
        "model-server-metrics-scheme", "model-server-metrics-path", "model-server-metrics-port",
        "model-server-metrics-https-insecure-skip-verify", "refresh-metrics-interval",
        "refresh-prometheus-metrics-interval", "metrics-staleness-threshold",
        "total-queued-requests-metric", "total-running-requests-metric",
        "kv-cache-usage-percentage-metric", "lora-info-metric", "cache-info-metric", "tracing",
        "health-checking", "metrics-port", "grpc-health-port", "enable-pprof", "cert-path",
        "enable-cert-reload", "secure-serving", "metrics-endpoint-auth", "config-file",
        "config-text",
    }
)  # fmt: skip
# Options.Validate, deprecatedMetricFlags: defined, but setting one stops the picker ("flag %q is
# deprecated and cannot be used; configure metrics via engineConfigs in EndpointPickerConfig").
REFUSED_FLAGS = {
    "total-queued-requests-metric": "core-metrics-extractor engineConfigs queuedRequestsSpec",
    "total-running-requests-metric": "core-metrics-extractor engineConfigs runningRequestsSpec",
    "kv-cache-usage-percentage-metric": "core-metrics-extractor engineConfigs kvUsageSpec",
    "lora-info-metric": "core-metrics-extractor engineConfigs loraSpec",
    "cache-info-metric": "core-metrics-extractor engineConfigs cacheInfoSpec",
}
# MarkDeprecated only: still read, with a warning. The metrics port has no replacement in v1.5.0
# (the metrics-data-source plugin takes scheme and path, not a port; cmd/epp/runner/runner.go
# hands opts.ModelServerMetricsPort to the datastore), so it is the one deprecated flag used.
DEPRECATED_FLAGS = frozenset(
    {
        "model-server-metrics-scheme",
        "model-server-metrics-path",
        "model-server-metrics-port",
        "model-server-metrics-https-insecure-skip-verify",
    }
)
# apix/config/v1alpha1/endpointpickerconfig_types.go, decoded by pkg/epp/config/loader
# decodeRawConfig with serializer.EnableStrict: a field not named here stops the picker, at every
# level of the typed structs. `parameters` is raw JSON, left to each plugin (PLUGINS below).
API_VERSION = "inference.networking.x-k8s.io/v1alpha1"
KIND = "EndpointPickerConfig"
_PLUGIN_SPEC = {"name": None, "type": None, "parameters": "parameters"}
_PROFILE = {"name": None, "plugins": [{"pluginRef": None, "weight": None}]}
_BAND = {
    "priority": None,
    "maxBytes": None,
    "maxRequests": None,
    "fairnessPolicyRef": None,
    "orderingPolicyRef": None,
}
CONFIG_FIELDS: dict[str, Any] = {
    "apiVersion": None,
    "kind": None,
    "featureGates": None,
    "plugins": [_PLUGIN_SPEC],
    "schedulingProfiles": [_PROFILE],
    "saturationDetector": {"pluginRef": None},
    "dataLayer": {"sources": [{"pluginRef": None, "extractors": [{"pluginRef": None}]}]},
    "flowControl": {
        "maxBytes": None,
        "maxRequests": None,
        "defaultRequestTTL": None,
        "defaultPriorityBand": _BAND,
        "priorityBands": [_BAND],
        "usageLimitPolicyPluginRef": None,
    },
    "parser": {"pluginRef": None},
}
# pkg/epp/config/loader validateFeatureGates, against the gates cmd/epp/runner/runner.go
# registers (datalayer's ExperimentalDatalayer and EnableLegacyMetrics, flowcontrol's).
FEATURE_GATES = frozenset({"dataLayer", "enableLegacyMetrics", "flowControl"})
# The plugin types this project configures, each registered in cmd/epp/runner/runner.go, with the
# json names of its parameters' struct. A factory decodes its parameters with plain
# json.Unmarshal, which ignores a name it does not know: a misspelt parameter is silently the
# default, so the check here is stricter than the picker, on purpose.
PLUGINS: dict[str, frozenset[str]] = {
    # scheduling/scorer/queuedepth, kvcacheutilization: no parameters
    "queue-scorer": frozenset(),
    "kv-cache-utilization-scorer": frozenset(),
    # scheduling/scorer/prefix passes its parameters to requestcontrol/dataproducer/
    # approximateprefix (types.go)
    "prefix-cache-scorer": frozenset(
        {
            "autoTune",
            "blockSizeTokens",
            "blockSize",
            "maxPrefixBlocksToMatch",
            "maxPrefixTokensToMatch",
            "lruCapacityPerServer",
        }
    ),
    # scheduling/picker/common.go, scheduling/profile
    "max-score-picker": frozenset({"maxNumOfEndpoints"}),
    "random-picker": frozenset({"maxNumOfEndpoints"}),
    "single-profile-handler": frozenset(),
    # flowcontrol/saturationdetector/utilization/config.go apiConfig
    "utilization-detector": frozenset(
        {"queueDepthThreshold", "kvCacheUtilThreshold", "metricsStalenessThreshold", "headroom"}
    ),
    # datalayer/source/metrics/datasource.go metricsDatasourceParams
    "metrics-data-source": frozenset({"scheme", "path", "insecureSkipVerify"}),
    # datalayer/extractor/metrics/factories.go modelServerExtractorParams
    "core-metrics-extractor": frozenset({"engineLabelKey", "defaultEngine", "engineConfigs"}),
}
# factories.go engineConfigParams: one engine's metric names.
ENGINE_CONFIG_FIELDS = frozenset(
    {
        "name", "queuedRequestsSpec", "runningRequestsSpec", "kvUsageSpec", "loraSpec",
        "cacheInfoSpec", "cacheBlockSizeLabelName", "cacheNumBlocksLabelName",
        "cacheBlockSizeSpec", "cacheNumBlocksSpec",
    }
)  # fmt: skip
# utilization/config.go validateConfig.
QUEUE_DEPTH_MIN_EXCLUSIVE = 0
KV_UTIL_RANGE = (0.0, 1.0)  # (exclusive, inclusive]


def _fields(value: Any, shape: Any, where: str) -> list[str]:
    """Strict decoding: every key of value must be a field of shape, recursively."""
    if shape is None or shape == "parameters":
        return []
    if isinstance(shape, list):
        if not isinstance(value, list):
            return [f"{where}: a list is expected, not {type(value).__name__}"]
        return [p for i, v in enumerate(value) for p in _fields(v, shape[0], f"{where}[{i}]")]
    if not isinstance(value, Mapping):
        return [f"{where}: an object is expected, not {type(value).__name__}"]
    out = []
    for key, sub in value.items():
        if key not in shape:
            out.append(f'{where or "config"}: unknown field "{key}" (strict decoding refuses it)')
        else:
            out += _fields(sub, shape[key], f"{where}.{key}" if where else key)
    return out


def _plugin_problems(plugins: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    for spec in plugins:
        kind = spec.get("type", "")
        if kind not in PLUGINS:
            out.append(f"plugin type {kind!r}: not one this project has read from {RELEASE}")
            continue
        params = spec.get("parameters") or {}
        for name in sorted(set(params) - PLUGINS[kind]):
            out.append(f"plugin {kind!r}: unknown parameter {name!r} (the picker would ignore it)")
        if kind == "utilization-detector":
            q = params.get("queueDepthThreshold")
            if q is not None and (not isinstance(q, int) or q <= QUEUE_DEPTH_MIN_EXCLUSIVE):
                out.append(f"utilization-detector queueDepthThreshold {q!r}: must be an int > 0")
            kv = params.get("kvCacheUtilThreshold")
            if kv is not None and not KV_UTIL_RANGE[0] < kv <= KV_UTIL_RANGE[1]:
                out.append(f"utilization-detector kvCacheUtilThreshold {kv!r}: must be in (0, 1]")
        if kind == "core-metrics-extractor":
            for engine in params.get("engineConfigs", []):
                for name in sorted(set(engine) - ENGINE_CONFIG_FIELDS):
                    out.append(f"core-metrics-extractor engineConfigs: unknown field {name!r}")
    return out


def problems(args: Sequence[str], config: Mapping[str, Any]) -> list[str]:
    """What the pinned picker would refuse (or silently ignore) in these flags and this config."""
    out = []
    for arg in args:
        if not arg.startswith("--"):
            out.append(f"{arg!r}: not a --flag=value argument")
            continue
        name = arg[2:].split("=", 1)[0]
        if name not in FLAGS:
            out.append(f"--{name}: not a flag of the picker {RELEASE}")
        elif name in REFUSED_FLAGS:
            out.append(f"--{name}: refused when set; use {REFUSED_FLAGS[name]}")
    if (config.get("apiVersion"), config.get("kind")) != (API_VERSION, KIND):
        out.append(f"apiVersion/kind: must be {API_VERSION} {KIND}")
    out += _fields(config, CONFIG_FIELDS, "")
    for gate in config.get("featureGates", []):
        if gate not in FEATURE_GATES:
            out.append(f"featureGates: {gate!r} is not a registered gate")
    plugins = config.get("plugins", [])
    names = {p.get("name") or p.get("type") for p in plugins}
    out += _plugin_problems(plugins)
    refs = [ref for prof in config.get("schedulingProfiles", []) for ref in prof.get("plugins", [])]
    refs += [config.get("saturationDetector") or {}, config.get("parser") or {}]
    for source in (config.get("dataLayer") or {}).get("sources", []):
        refs += [source, *source.get("extractors", [])]
    for ref in refs:
        if "pluginRef" in ref and ref["pluginRef"] not in names:
            out.append(f"pluginRef {ref['pluginRef']!r}: no plugin of that name in plugins")
    return out
