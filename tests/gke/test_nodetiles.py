"""GKE's "replicas and TPU nodes by capacity type" tile: valid for the Monitoring API's schema,
reading only a GKE system metric Google documents (with its labels) and vLLM series the pinned
vLLM registers, narrowed to the deployment's own cluster and pools (two deployments never mix),
and on a GKE version that writes the metric."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from tests.conftest import gke_configs
from tools.rehearsal.fakes.monitoring_rules import problems
from tpudeploy import dashboard, facts
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gke import identifiers, nodetiles
from tpudeploy.gke.metrics import published
from tpudeploy.platform import platform_for

_SYSTEM = re.compile(r"\b(kubernetes_io:[a-z_]+)\{([^}]*)\}")
_MATCHER = re.compile(r'([a-z_]+)\s*(?:=~|!~|!=|=)\s*"')


def _configs() -> tuple[DeployConfig, DeployConfig]:
    a, b = gke_configs()
    return parse_config(copy.deepcopy(a)), parse_config(copy.deepcopy(b))


def _queries(cfg: DeployConfig) -> list[str]:
    tiles = platform_for(cfg).dashboard_tiles(cfg)
    return dashboard.queries({"tiles": tiles})


def undocumented(queries: list[str]) -> list[str]:
    """Each system metric or label a query names that no SystemMetric documents."""
    known = {m.promql: m for m in nodetiles.SYSTEM_METRICS}
    out = []
    for q in queries:
        for name, matchers in _SYSTEM.findall(q):
            metric = known.get(name)
            if metric is None:
                out.append(f"{name}: not a documented GKE system metric here")
                continue
            out += [
                f"{name}: label {x}" for x in _MATCHER.findall(matchers) if x not in metric.labels
            ]
    return out


def test_the_tile_is_one_the_dashboard_api_takes() -> None:
    cfg, _ = _configs()
    tiles = platform_for(cfg).dashboard_tiles(cfg)
    assert len(tiles) == 1 and "capacity type" in tiles[0]["title"]
    doc = dashboard.dashboard(cfg, selector=platform_for(cfg).metrics_selector(cfg), extra=tiles)
    assert problems(doc, "Dashboard") == []
    # the TPU VM has one node and one server: no such tile
    vm = parse_config({})
    assert platform_for(vm).dashboard_tiles(vm) == []


def test_it_reads_only_documented_metrics_and_labels() -> None:
    cfg, _ = _configs()
    queries = _queries(cfg)
    assert any(nodetiles.NODE_CONDITION.promql in q for q in queries)
    assert undocumented(queries) == []
    for q in queries:
        for series in dashboard.series_in(q):
            assert published().get(dashboard.registered_name(series)) == "gauge", series
    # a renamed or mislabelled system metric fails the check, not the chart
    renamed = [q.replace("node_status_condition", "node_status_conditions") for q in queries]
    assert any("not a documented" in p for p in undocumented(renamed))
    relabelled = [q.replace("cluster_name=", "cluster=") for q in queries]
    assert any("label cluster" in p for p in undocumented(relabelled))


def test_each_pool_is_its_capacity_type_and_two_deployments_never_mix() -> None:
    a, b = _configs()
    assert identifiers.cluster_name(b).startswith(identifiers.cluster_name(a))
    for mine, theirs in ((a, b), (b, a)):
        # PromQL's label_replace and =~ match the whole value (RE2, anchored)
        pattern = re.compile(nodetiles.capacity_pattern(mine))
        for capacity in mine.gke.capacity_order:
            pool = identifiers.pool_name(capacity)
            node = f"gke-{identifiers.cluster_name(mine)}-{pool}-5b909138-nr65"
            found = pattern.fullmatch(node)
            assert found and found.group(1) == pool
            other = f"gke-{identifiers.cluster_name(theirs)}-{pool}-5b909138-nr65"
            assert not pattern.fullmatch(other), (mine.name, other)
        # the system pool's nodes are no capacity type
        assert not pattern.fullmatch(f"gke-{identifiers.cluster_name(mine)}-system-5b909138-nr65")
        query = nodetiles.nodes_by_capacity_query(mine)
        assert f'cluster_name="{identifiers.cluster_name(mine)}"' in query


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


@pytest.mark.parametrize("metric", nodetiles.SYSTEM_METRICS, ids=lambda m: m.name)
def test_the_default_version_floor_writes_the_metric(metric: Any) -> None:
    # The default floor (flex-start's) is past it; a spot-only cluster may pin a floor as low
    # as the ComputeClass's 1.30.3, where the node series stay empty (docs/see-it-running.md).
    assert _version(facts.GKE_FLEX_START_TPU_MIN_VERSION) >= _version(metric.min_gke)
    assert metric.source.startswith("https://") and metric.name in metric.quote
