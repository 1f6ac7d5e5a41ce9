"""The vLLM metrics the autoscaler and the endpoint picker read, against what vLLM publishes.

What vLLM publishes is tpudeploy/gke/vllm_metrics.json, generated from the pinned vLLM's source
by tools/vllm_metrics.py (the same vLLM the `vllm serve` flags were checked against). Upstream
renamed `vllm:gpu_cache_usage_perc` to `vllm:kv_cache_usage_perc` once (deprecated in 0.9, gone
by 0.33.0): a reader configured with a name vLLM no longer publishes gets nothing, silently, so
every name here is checked against that list and against a live /metrics page.
"""

from __future__ import annotations

import difflib
import json
import re
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tpudeploy.gke.metrics_adapter import KV_CACHE_METRIC, WAITING_METRIC

__all__ = [
    "CACHE_INFO_METRIC",
    "KV_CACHE_METRIC",
    "READS",
    "RUNNING_METRIC",
    "WAITING_METRIC",
    "Read",
    "check_page",
    "parse_exposition",
    "problems",
    "published",
    "scrape",
]

# difflib's ratio above which a published name is offered as the likely rename (the
# gpu_/kv_ rename scores 0.88).
_NEAR = 0.75
_PUBLISHED_FILE = Path(__file__).with_name("vllm_metrics.json")
_DOCUMENT = json.loads(_PUBLISHED_FILE.read_text(encoding="utf-8"))
VLLM_VERSION: str = _DOCUMENT["vllm_version"]

RUNNING_METRIC = "vllm:num_requests_running"
# A gauge fixed at 1 whose labels carry the engine's cache config; the picker's prefix-cache
# scorer reads `block_size` from it (gateway-api-inference-extension, model server protocol:
# "[Optional] BlockSize ... Labeled").
CACHE_INFO_METRIC = "vllm:cache_config_info"


@dataclass(frozen=True, slots=True)
class Read:
    reader: str
    metric: str
    kind: str
    why: str


# Each consumer's names and the type it expects. The HPA reads through Managed Prometheus,
# whose metric name carries the type (prometheus.googleapis.com|<name>|gauge): a gauge read as
# anything else is another metric. The picker reads the names its config's core-metrics-extractor
# gives (tpudeploy/gke/routing.picker_config, from these constants; the EPP v1.5.0 refuses its old
# metric flags, tpudeploy/gke/picker_interface.py); the model server protocol requires gauges.
READS: tuple[Read, ...] = (
    Read("hpa", WAITING_METRIC, "gauge", "queue depth per replica (issue 25's HPA)"),
    Read("hpa", KV_CACHE_METRIC, "gauge", "KV pool use per replica, from 0 to 1 (issue 26)"),
    Read("picker", WAITING_METRIC, "gauge", "queue-scorer and the saturation check"),
    Read("picker", RUNNING_METRIC, "gauge", "running requests (the TTFT-planned streams)"),
    Read("picker", KV_CACHE_METRIC, "gauge", "kv-cache-utilization-scorer, from 0 to 1"),
    Read("picker", CACHE_INFO_METRIC, "gauge", "block_size for the prefix-cache scorer"),
)


def published() -> dict[str, str]:
    """{metric: gauge|counter|histogram} that the pinned vLLM registers."""
    return {name: entry["type"] for name, entry in _DOCUMENT["metrics"].items()}


def problems(found: Mapping[str, str], *, where: str, reads: tuple[Read, ...] = READS) -> list[str]:
    """What a consumer reads that `found` lacks or types otherwise, one sentence each."""
    out = []
    for read in reads:
        kind = found.get(read.metric)
        if kind == read.kind:
            continue
        if kind is None:
            near = difflib.get_close_matches(read.metric, list(found), n=1, cutoff=_NEAR)
            hint = f"; closest published: {near[0]} (renamed upstream?)" if near else ""
            out.append(f"the {read.reader} reads {read.metric} ({read.why}): {where} does not "
                       f"publish it{hint}")  # fmt: skip
        else:
            out.append(f"the {read.reader} reads {read.metric} as a {read.kind}: {where} "
                       f"publishes a {kind}")  # fmt: skip
    return out


# Prometheus text format 0.0.4 (prometheus.io/docs/instrumenting/exposition_formats): a
# `# TYPE <family> <type>` line per family, then its samples. prometheus_client (vLLM's
# library) writes a counter's family as <name>_total and a histogram's samples as _bucket,
# _sum and _count (prometheus_client/exposition.py, generate_latest).
_TYPE_LINE = re.compile(r"^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)\s*$")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_exposition(text: str) -> tuple[dict[str, str], dict[str, list[float]]]:
    """Families by name with their type (a counter under its registered name, without
    `_total`, as vLLM's source names it) and each sample's values by sample name."""
    families: dict[str, str] = {}
    samples: dict[str, list[float]] = {}
    for line in text.splitlines():
        typed = _TYPE_LINE.match(line)
        if typed:
            name, kind = typed.groups()
            if kind == "counter" and name.endswith("_total"):
                name = name.removesuffix("_total")
            families[name] = kind
            continue
        sample = _SAMPLE.match(line)
        if sample and not line.startswith("#"):
            samples.setdefault(sample.group(1), []).append(float(sample.group(3)))
    return families, samples


def check_page(text: str, *, where: str, reads: tuple[Read, ...] = READS) -> list[str]:
    """A /metrics page against every read: present, typed as expected, and a gauge's samples
    there (a family with no sample feeds the reader nothing); KV use within 0..1."""
    families, samples = parse_exposition(text)
    out = problems(families, where=where, reads=reads)
    for read in reads:
        if families.get(read.metric) == read.kind == "gauge" and not samples.get(read.metric):
            out.append(f"{where}: {read.metric} has no sample")
    for value in samples.get(KV_CACHE_METRIC, []):
        if not 0 <= value <= 1:
            out.append(f"{where}: {KV_CACHE_METRIC} = {value}, outside 0..1 (1 means 100%)")
    return sorted(set(out))


def scrape(url: str, *, timeout: float = 5.0) -> str:
    """One /metrics page (loopback in tests; a replica's metrics listener on a cluster)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
        body: bytes = response.read()
    return body.decode("utf-8")
