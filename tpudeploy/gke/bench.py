"""`make bench` on GKE: the TPU VM's sweep (tpudeploy.bench), run in one ready replica's vLLM
container through the Kubernetes API's exec. By default against that container's own vLLM on
127.0.0.1, as the TPU VM's runs in its container: the figures are one chip's, comparable with the
build log's and with a TPU VM's. With ROUTE=gateway the same client sends to the Gateway's
address instead: the whole pool behind the endpoint picker, to compare [routing] scoring's two
settings on the same workload (docs/benchmarking.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tpudeploy.bench.commands import PodTarget
from tpudeploy.bench.sweep import ExecResult, Executor
from tpudeploy.config import DeployConfig
from tpudeploy.gcp.container import KubeError
from tpudeploy.gke import podexec
from tpudeploy.gke.identifiers import namespace
from tpudeploy.gke.kube import KubeApi
from tpudeploy.gke.ops import gateway_address, replica_of, selector, vllm_status
from tpudeploy.gke.pod import VLLM_CONTAINER

# `make bench-plan` prints the commands without asking the cluster which replica is ready.
PLAN_POD = "<a ready replica>"


PLAN_GATEWAY = "https://<the Gateway's address>"
ROUTES = ("replica", "gateway")


def plan_target(cfg: DeployConfig, route: str = "replica") -> PodTarget:
    return PodTarget(
        namespace(cfg),
        PLAN_POD,
        VLLM_CONTAINER,
        "",
        "",
        base_url=PLAN_GATEWAY if route == "gateway" else "",
    )


def ready_replica(cfg: DeployConfig, api: KubeApi) -> PodTarget:
    """The first ready replica by name (a stable choice between runs), its vLLM container, the
    image its status reports, and how many replicas are ready."""
    pods = api.items(f"/api/v1/namespaces/{namespace(cfg)}/pods", selector(cfg))
    ready = sorted(
        (p for p in pods if replica_of(p).phase == "ready"), key=lambda p: p["metadata"]["name"]
    )
    if not ready:
        raise KubeError(
            f"no replica of {cfg.name} is ready ({len(pods)} pod(s)): `make wait` follows them; "
            "`make bench` measures one ready replica"
        )
    chosen = ready[0]
    status = vllm_status(chosen)
    return PodTarget(
        namespace(cfg),
        chosen["metadata"]["name"],
        VLLM_CONTAINER,
        str(status.get("image") or ""),
        str(status.get("imageID") or ""),
        replicas=len(ready),
    )


def pod_executor(api: KubeApi, target: PodTarget) -> Executor:
    def run(argv: Sequence[str], *, stdin: bytes) -> ExecResult:
        done = podexec.exec_in_pod(
            api, target.namespace, target.pod, target.container, argv, stdin=stdin
        )
        return ExecResult(done.returncode, done.stdout, done.stderr)

    return run


def bench_target(
    cfg: DeployConfig, project: str, *, route: str = "replica"
) -> tuple[PodTarget, Executor]:
    if not project:
        # Before any API call: the cluster is found by its project.
        raise KubeError(
            "no project to find the cluster in: set project in the config, or pass --project"
        )
    api = KubeApi.for_deployment(cfg, project)
    target = ready_replica(cfg, api)
    if route == "gateway":
        target = replace(target, base_url=f"https://{gateway_address(cfg, api)}")
    return target, pod_executor(api, target)
