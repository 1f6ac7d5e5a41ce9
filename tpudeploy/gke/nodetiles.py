"""GKE's dashboard tile "replicas and TPU nodes by capacity type" (issue 38): the replicas from
vLLM's own series, the nodes from a GKE system metric, narrowed to the deployment's cluster and
split by the pool each node belongs to, one pool per capacity type (identifiers.pool_name).

The vLLM series Managed Prometheus writes carry no node or pool label
(tpudeploy/gke/manifests.pod_monitoring), and each replica takes one TPU node of its own (one
v5e chip), so the nodes by pool are the replicas by capacity type; the tile draws both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tpudeploy.config import DeployConfig
from tpudeploy.dashboard import query
from tpudeploy.gke import identifiers


@dataclass(frozen=True, slots=True)
class SystemMetric:
    """A GKE system metric a query reads, as Google documents it."""

    name: str  # the Cloud Monitoring metric type
    resource: str
    labels: tuple[str, ...]  # the resource's and the metric's labels a query may name
    min_gke: str  # the GKE version that writes it
    source: str
    quote: str

    @property
    def promql(self) -> str:
        """ "Replace the first / with :. Replace all other special characters ... with _"
        (cloud.google.com/monitoring/promql/promql-mapping)."""
        domain, path = self.name.split("/", 1)
        return re.sub(r"[^a-zA-Z0-9_:]", "_", f"{domain}:{path}")


# One series per node and condition; the Ready condition with status True is a node that can
# run a replica. The Google page was read through a third-party guide quoting its table (the
# page itself was not in the stored corpus, searched 2026-12-03); its PromQL examples select
# monitored_resource="k8s_node", cluster_name, node_name, condition and status.
NODE_CONDITION = SystemMetric(
    name="kubernetes.io/node/status_condition",
    resource="k8s_node",
    labels=("monitored_resource", "cluster_name", "node_name", "condition", "status"),
    min_gke="1.32.1-gke.1357001",
    source="https://docs.cloud.google.com/kubernetes-engine/docs/how-to/tpus "
    "(Monitor health metrics for TPU nodes and node pools)",
    quote="kubernetes.io/node/status_condition | k8s_node | Reports node conditions: Ready, "
    "DiskPressure, MemoryPressure. Status: True, False, Unknown.",
)
SYSTEM_METRICS = (NODE_CONDITION,)


def capacity_pattern(cfg: DeployConfig) -> str:
    """The node names of the deployment's TPU pools, the pool captured: GKE names a pool's
    nodes gke-<cluster>-<pool>-<hash>-<suffix> (the form the preemption filter reads too,
    tpudeploy/logsources.py, on the same reading). Names are DNS labels: nothing to escape."""
    pools = "|".join(identifiers.pool_name(c) for c in cfg.gke.capacity_order)
    return f"gke-{identifiers.cluster_name(cfg)}-({pools})-[0-9a-z]+-[0-9a-z]+"


def nodes_by_capacity_query(cfg: DeployConfig) -> str:
    pattern = capacity_pattern(cfg)
    series = (
        f'{NODE_CONDITION.promql}{{monitored_resource="{NODE_CONDITION.resource}",'
        f'cluster_name="{identifiers.cluster_name(cfg)}",condition="Ready",status="True",'
        f'node_name=~"{pattern}"}}'
    )
    return (
        f'count by (capacity) (label_replace({series}, "capacity", "$1", "node_name", "{pattern}"))'
    )


def tiles(cfg: DeployConfig, *, selector: str) -> list[dict[str, Any]]:
    """The widget: replicas serving, and ready TPU nodes per capacity type's pool."""
    return [
        {
            "title": "Replicas serving, and ready TPU nodes by capacity type (pool)",
            "xyChart": {
                "dataSets": [
                    {
                        "timeSeriesQuery": {
                            "prometheusQuery": query(
                                "count(vllm:num_requests_running{sel})", selector
                            ),
                            "unitOverride": "1",
                        },
                        "plotType": "LINE",
                        "legendTemplate": "replicas serving",
                    },
                    {
                        "timeSeriesQuery": {
                            "prometheusQuery": nodes_by_capacity_query(cfg),
                            "unitOverride": "1",
                        },
                        "plotType": "STACKED_BAR",
                        "legendTemplate": "ready nodes: {{capacity}}",
                    },
                ]
            },
        }
    ]
