"""The metric names the HPA and the endpoint picker read, against the pinned vLLM's source and
against live /metrics pages of several fake vLLM replicas on loopback."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from textwrap import dedent
from typing import ClassVar

import pytest

from tools import vllm_metrics
from tools.rehearsal.fakes.base import serving
from tpudeploy.config.serveflags import VLLM_VERSION as FLAGS_VERSION
from tpudeploy.gke import metrics
from tpudeploy.gke.manifests import hpa_kv_metric_name, hpa_metric_name


def test_the_list_is_generated_from_the_vllm_the_flags_were_checked_against() -> None:
    assert metrics.VLLM_VERSION == FLAGS_VERSION
    assert len(metrics.published()) > 40  # the generator found vLLM's registrations


def test_every_read_exists_in_the_pinned_vllm_typed_as_expected() -> None:
    assert metrics.problems(metrics.published(), where=f"vLLM {metrics.VLLM_VERSION}") == []


def test_the_hpa_reads_the_same_names_and_types_through_managed_prometheus() -> None:
    waiting, kv = [r for r in metrics.READS if r.reader == "hpa"]
    assert hpa_metric_name() == f"prometheus.googleapis.com|{waiting.metric}|{waiting.kind}"
    assert hpa_kv_metric_name() == f"prometheus.googleapis.com|{kv.metric}|{kv.kind}"


def _tree(root: Path, kv_name: str) -> Path:
    """A small vLLM-shaped source tree with the registration patterns vLLM uses."""
    loggers = root / "vllm" / "v1" / "metrics" / "loggers.py"
    loggers.parent.mkdir(parents=True)
    loggers.write_text(
        dedent(f'''
        import prometheus_client
        from prometheus_client import Counter, Gauge, Histogram

        class PrometheusStatLogger:
            _gauge_cls = Gauge
            _counter_cls = Counter
            _histogram_cls = Histogram

            def __init__(self):
                self._gauge_cls(name="vllm:num_requests_running", documentation="")
                self._gauge_cls(name="vllm:num_requests_waiting", documentation="")
                self._gauge_cls(name="{kv_name}", documentation="")
                self._counter_cls(name="vllm:prefix_cache_hits", documentation="")
                self._histogram_cls(name="vllm:time_to_first_token_seconds", buckets=[1])
                prometheus_client.Counter(name="vllm:direct_counter", documentation="")

            def log_metrics_info(self, type, config_obj):
                name = None
                if type == "cache_config":
                    name = "vllm:cache_config_info"
                self._gauge_cls(name=name, documentation="")
        '''),
        encoding="utf-8",
    )
    spec = root / "vllm" / "v1" / "spec_decode" / "metrics.py"
    spec.parent.mkdir(parents=True)
    spec.write_text(
        dedent("""
        import prometheus_client

        class SpecDecodingProm:
            _counter_cls = prometheus_client.Counter

            def __init__(self):
                counter_specs = [("vllm:spec_decode_num_drafts", "Number of drafts.")]
                for name, doc in counter_specs:
                    self._counter_cls(name=name, documentation=doc)
        """),
        encoding="utf-8",
    )
    return root


def test_the_generator_reads_each_registration_pattern(tmp_path: Path) -> None:
    found = vllm_metrics.metrics(_tree(tmp_path, "vllm:kv_cache_usage_perc"))
    assert {name: entry["type"] for name, entry in found.items()} == {
        "vllm:cache_config_info": "gauge",
        "vllm:direct_counter": "counter",
        "vllm:kv_cache_usage_perc": "gauge",
        "vllm:num_requests_running": "gauge",
        "vllm:num_requests_waiting": "gauge",
        "vllm:prefix_cache_hits": "counter",
        "vllm:spec_decode_num_drafts": "counter",
        "vllm:time_to_first_token_seconds": "histogram",
    }
    assert metrics.problems({n: e["type"] for n, e in found.items()}, where="the small tree") == []


def test_a_renamed_metric_is_caught_with_the_old_name_beside_it(tmp_path: Path) -> None:
    """vLLM before 0.9 published only vllm:gpu_cache_usage_perc; the HPA and the picker read the
    new name, and each reader is named."""
    old = vllm_metrics.metrics(_tree(tmp_path, "vllm:gpu_cache_usage_perc"))
    found = metrics.problems({n: e["type"] for n, e in old.items()}, where="vLLM 0.8")
    assert [f.split(" reads ")[0] for f in found] == ["the hpa", "the picker"]
    for problem in found:
        assert "reads vllm:kv_cache_usage_perc" in problem
        assert "closest published: vllm:gpu_cache_usage_perc" in problem


def test_a_type_change_is_caught() -> None:
    changed = {**metrics.published(), "vllm:num_requests_waiting": "counter"}
    found = metrics.problems(changed, where="a later vLLM")
    assert len(found) == 2  # the HPA and the picker both read it
    assert all("as a gauge: a later vLLM publishes a counter" in line for line in found)


# ---- several fake vLLM replicas on loopback ---------------------------------------------------


def exposition(kinds: Mapping[str, str], values: Mapping[str, float]) -> str:
    """A /metrics page as prometheus_client's generate_latest writes one (text format 0.0.4):
    a counter's family and sample as <name>_total, a histogram's as _bucket, _count, _sum."""
    labels = 'engine="0",model_name="google/gemma-4-E2B-it"'
    out = []
    for name, kind in sorted(kinds.items()):
        value = values.get(name, 0.0)
        if kind == "counter":
            out += [f"# HELP {name}_total x", f"# TYPE {name}_total counter",
                    f"{name}_total{{{labels}}} {value}"]  # fmt: skip
        elif kind == "histogram":
            out += [f"# HELP {name} x", f"# TYPE {name} histogram",
                    f'{name}_bucket{{{labels},le="+Inf"}} 1.0', f"{name}_count{{{labels}}} 1.0",
                    f"{name}_sum{{{labels}}} {value}"]  # fmt: skip
        else:
            extra = ',block_size="64"' if name == metrics.CACHE_INFO_METRIC else ""
            out += [f"# HELP {name} x", f"# TYPE {name} gauge",
                    f"{name}{{{labels}{extra}}} {value}"]  # fmt: skip
    return "\n".join(out) + "\n"


class _Replica(BaseHTTPRequestHandler):
    pages: ClassVar[dict[int, str]] = {}

    def do_GET(self) -> None:
        if self.path != "/metrics":
            self.send_error(404)
            return
        address = self.server.server_address
        assert isinstance(address, tuple)
        body = self.pages[address[1]].encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def replicas() -> Iterator[list[str]]:
    current = metrics.published()
    old = {k: v for k, v in current.items() if k != metrics.KV_CACHE_METRIC}
    old["vllm:gpu_cache_usage_perc"] = "gauge"
    pages = [
        exposition(current, {metrics.KV_CACHE_METRIC: 0.41, "vllm:num_requests_waiting": 3}),
        exposition(current, {metrics.KV_CACHE_METRIC: 0.0, "vllm:num_requests_running": 30}),
        exposition(old, {"vllm:gpu_cache_usage_perc": 0.5}),  # an image from before the rename
        exposition(current, {metrics.KV_CACHE_METRIC: 41.0}),  # a percentage, not a fraction
    ]
    with ExitStack() as stack:
        servers = [stack.enter_context(serving(_Replica)) for _ in pages]
        for server, page in zip(servers, pages, strict=True):
            _Replica.pages[server.server_address[1]] = page
        yield [f"http://127.0.0.1:{s.server_address[1]}/metrics" for s in servers]


def test_what_the_readers_read_is_on_every_current_replica(replicas: list[str]) -> None:
    good, also_good, renamed, percent = replicas
    for url in (good, also_good):
        assert metrics.check_page(metrics.scrape(url), where=url) == []
    families, samples = metrics.parse_exposition(metrics.scrape(good))
    assert families["vllm:prompt_tokens"] == "counter"  # a counter under its source name
    assert families["vllm:time_to_first_token_seconds"] == "histogram"  # noqa: S105
    assert samples[metrics.KV_CACHE_METRIC] == [0.41]
    old = metrics.check_page(metrics.scrape(renamed), where=renamed)
    assert old == [
        f"the {reader} reads {metrics.KV_CACHE_METRIC} ({why}): {renamed} does not publish it; "
        "closest published: vllm:gpu_cache_usage_perc (renamed upstream?)"
        for reader, why in (
            ("hpa", "KV pool use per replica, from 0 to 1 (issue 26)"),
            ("picker", "kv-cache-utilization-scorer, from 0 to 1"),
        )
    ]
    assert metrics.check_page(metrics.scrape(percent), where=percent) == [
        f"{percent}: {metrics.KV_CACHE_METRIC} = 41.0, outside 0..1 (1 means 100%)"
    ]
