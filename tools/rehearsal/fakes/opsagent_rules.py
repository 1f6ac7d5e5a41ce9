"""What the Ops Agent refuses in its config.yaml, as data with its source, and `refusals`.

The agent validates its merged configuration when it starts and does not start on one it
refuses (not quoted: the stored copy of cloud.google.com/monitoring/agent/ops-agent/configuration
gives its opening only, so this rests on the issue's reading and on the agent's source, whose
validators below return errors, never warnings). The Prometheus rules are the agent's own
validation, GoogleCloudPlatform/ops-agent confgenerator/prometheus.go (validatePrometheus).
The rehearsal judges the config its TPU VM's boot wrote (tools/rehearsal/sandbox.py) and the
tests judge the rendered one (tests/tpuvm/test_ops_agent.py) with `refusals`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Rule:
    what: str
    source: str
    quote: str


PROMETHEUS_GO = (
    "https://github.com/GoogleCloudPlatform/ops-agent/blob/master/confgenerator/prometheus.go"
)
RULES = (
    Rule(
        "a Prometheus receiver needs at least one scrape config",
        PROMETHEUS_GO,
        'if len(promConfig.ScrapeConfigs) == 0 { ... errors.New("no Prometheus scrape_configs")',
    ),
    Rule(
        "only static_configs discover targets",
        PROMETHEUS_GO,
        'case discovery.StaticConfig: default: ... "unsupported service discovery config %T"',
    ),
    Rule(
        "honor_labels is refused",
        PROMETHEUS_GO,
        '"honor_labels is not supported"',
    ),
    Rule(
        "remote_write, remote_read, rule_files and alerting are refused",
        PROMETHEUS_GO,
        'unsupportedFeatures = append(unsupportedFeatures, "remote_write") ...',
    ),
    Rule(
        "relabel_configs and metric_relabel_configs may not target location, namespace or "
        "cluster (the prometheus_target resource's labels), nor rename __name__",
        PROMETHEUS_GO,
        '"relabel_configs cannot rename location, namespace or cluster"',
    ),
    Rule(
        "every pipeline names receivers and processors the same section defines",
        "https://cloud.google.com/monitoring/agent/ops-agent/configuration",
        "service: This element links receivers and processors together to create data flows, "
        "called pipelines",
    ),
)

_RESERVED_TARGETS = ("location", "namespace", "cluster")
_UNSUPPORTED = ("remote_write", "remote_read", "rule_files", "alerting")


def _prometheus(name: str, config: dict[str, Any]) -> list[str]:
    out = [f"{name}: {k} is not supported" for k in _UNSUPPORTED if config.get(k)]
    scrapes = config.get("scrape_configs") or []
    if not scrapes:
        out.append(f"{name}: no Prometheus scrape_configs")
    for sc in scrapes:
        job = sc.get("job_name", "?")
        if sc.get("honor_labels"):
            out.append(f"{name} job {job}: honor_labels is not supported")
        for key in sc:
            if key.endswith("_sd_configs"):
                out.append(f"{name} job {job}: unsupported service discovery config {key}")
        for kind in ("relabel_configs", "metric_relabel_configs"):
            for rc in sc.get(kind) or []:
                target = rc.get("target_label")
                renames_name = kind == "metric_relabel_configs" and target == "__name__"
                if target in _RESERVED_TARGETS or renames_name:
                    out.append(f"{name} job {job}: {kind} cannot rename {target}")
    return out


def refusals(config: dict[str, Any]) -> list[str]:
    """Why the agent would not start on `config` (empty: it starts)."""
    out: list[str] = []
    for section in ("logging", "metrics"):
        part = config.get(section) or {}
        receivers = part.get("receivers") or {}
        processors = part.get("processors") or {}
        for name, receiver in receivers.items():
            if receiver.get("type") == "prometheus":
                out += _prometheus(name, receiver.get("config") or {})
        for pipe, spec in ((part.get("service") or {}).get("pipelines") or {}).items():
            for r in spec.get("receivers") or []:
                if r not in receivers:
                    out.append(f"{section} pipeline {pipe}: no receiver {r}")
            for p in spec.get("processors") or []:
                if p not in processors:
                    out.append(f"{section} pipeline {pipe}: no processor {p}")
    return out
