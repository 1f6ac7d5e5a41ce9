"""The ops commands on GKE against loopback fakes of the container API and of the cluster's
Kubernetes API over HTTPS (tools/rehearsal/fakes/k8s_ops.py): `make wait`, `make status`, the
front door's address and pinned certificate for `make endpoint` / `make smoke`, and what
`make destroy` says is left."""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tools.rehearsal.fakes import k8s_ops as k8s
from tpudeploy import facts, tlscert
from tpudeploy.cli import main
from tpudeploy.config import parse_config
from tpudeploy.gcp.apis import CONTAINER
from tpudeploy.gcp.container import ClusterAccess, KubeError
from tpudeploy.gke import kube, ops, pod, replicaplan
from tpudeploy.gke.manifests import labels
from tpudeploy.planner import price_table
from tpudeploy.planner.cost import SEED_BOOT

PROJECT = "gke-ops-1"
CFG = parse_config({"platform": "gke", "project": PROJECT, "zone": "us-west4-a"})
# Each deployment its own namespace (issue 36 item 13): tpudeploy-<name>.
NS = f"tpudeploy-{CFG.name}"
LABELS = labels(CFG)
SPOT = {
    "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
    "cloud.google.com/gke-spot": "true",
}
FLEX = {
    "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
    "cloud.google.com/gke-flex-start": "true",
}


@dataclass
class Cluster:
    kube: k8s.FakeKubernetes
    container: k8s.FakeContainer


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with (
        k8s.FakeKubernetes(tmp_path / "kube") as api,
        k8s.FakeContainer(api, clusters={CFG.name}) as container,
    ):
        monkeypatch.setenv(CONTAINER.emulator_env, container.host)
        yield Cluster(api, container)


def _pod(name: str, **kw: Any) -> dict[str, Any]:
    return k8s.pod(name, NS, labels=LABELS, **kw)


def _wait(
    cluster: Cluster, steps: list[Callable[[], None]], *, timeout: float = 1000
) -> tuple[int, str]:
    """Run `make wait` with step i applied before poll i+1 (each poll 10 s later)."""
    clock = itertools.count(0, 10)
    pending = iter(steps)
    out = io.StringIO()

    def sleep(_s: float) -> None:
        step = next(pending, None)
        if step:
            step()

    rc = ops.wait_ready(
        CFG,
        PROJECT,
        timeout=timeout,
        interval=10,
        out=out,
        clock=lambda: float(next(clock)),
        sleep=sleep,
    )
    return rc, out.getvalue()


def test_wait_follows_each_replica_from_no_node_to_ready(cluster: Cluster) -> None:
    put = cluster.kube.put
    put(k8s.deployment(CFG.name, NS, replicas=2, labels=LABELS))
    put(_pod("r-a", unschedulable="0/1 nodes are available: 1 node(s) had untolerated taint"))
    put(_pod("r-b", unschedulable="0/1 nodes are available"))

    def scheduled() -> None:
        put(
            _pod(
                "r-a",
                node="gke-tpu-spot-1",
                phase="Running",
                containers={"vllm": {}, "frontdoor": {"ready": True}},
            )
        )
        put(_pod("r-b", node="gke-tpu-flex-1", init_running=True))

    def one_ready() -> None:
        put(
            _pod(
                "r-a",
                node="gke-tpu-spot-1",
                phase="Running",
                containers={"vllm": {"ready": True}, "frontdoor": {"ready": True}},
            )
        )
        put(k8s.deployment(CFG.name, NS, replicas=2, ready=1, labels=LABELS))

    def both_ready() -> None:
        put(
            _pod(
                "r-b",
                node="gke-tpu-flex-1",
                phase="Running",
                containers={"vllm": {"ready": True}, "frontdoor": {"ready": True}},
            )
        )
        put(k8s.deployment(CFG.name, NS, replicas=2, ready=2, labels=LABELS))

    rc, out = _wait(cluster, [scheduled, one_ready, both_ready])
    assert rc == 0, out
    # The planner's boot estimate up front, then each replica's phase as it changes.
    assert f"cold {SEED_BOOT.cold_s:g} s" in out and f"warm {SEED_BOOT.warm_s:g} s" in out
    assert str(replicaplan.startup_budget_s()) in out
    assert "r-a: waiting-for-node" in out and "untolerated taint" in out
    assert "r-a: compiling" in out and "on gke-tpu-spot-1" in out
    assert "r-b: starting" in out
    assert out.index("0/2 replica(s) ready") < out.index("1/2 replica(s) ready")
    assert "ready after 40s of waiting: 2 replica(s)" in out and "make accept" in out
    # Every request carried the bearer token and asked for this deployment's pods only.
    pods = [r for r in cluster.kube.requests if "/pods" in r["path"]]
    assert pods and all("labelSelector=app.kubernetes.io%2Finstance%3D" in r["path"] for r in pods)
    assert all(
        r["headers"]["authorization"] == "Bearer emulator-token" for r in cluster.kube.requests
    )


def test_wait_stops_at_a_replica_that_cannot_start(cluster: Cluster) -> None:
    cluster.kube.put(k8s.deployment(CFG.name, NS, replicas=1, labels=LABELS))
    cluster.kube.put(
        _pod(
            "r-a",
            node="n1",
            phase="Running",
            containers={
                "vllm": {
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}
                }
            },
        )
    )
    rc, out = _wait(cluster, [])
    assert rc == 1
    assert "replica r-a failed: vllm: CrashLoopBackOff" in out
    assert f"kubectl -n {NS} logs r-a -c vllm" in out and "get-credentials" in out


def test_wait_times_out_with_what_to_look_at(cluster: Cluster) -> None:
    cluster.kube.put(k8s.deployment(CFG.name, NS, replicas=1, labels=LABELS))
    cluster.kube.put(_pod("r-a", unschedulable="0/1 nodes are available"))
    rc, out = _wait(cluster, [], timeout=30)
    assert rc == 3
    assert "timed out after 30s: 0/1 ready" in out and "make status" in out


def test_wait_without_the_deployment_says_to_deploy(cluster: Cluster) -> None:
    rc, out = _wait(cluster, [])
    assert rc == 1 and "make deploy" in out


def test_a_rollout_the_controller_has_not_seen_is_not_done(cluster: Cluster) -> None:
    """A new spec (generation 2) while status still describes generation 1: ready counts are
    the old replicas', so waiting goes on."""
    cluster.kube.put(
        k8s.deployment(CFG.name, NS, replicas=1, ready=1, generation=2, observed=1, labels=LABELS)
    )
    rc, out = _wait(cluster, [], timeout=20)
    assert rc == 3 and "1/1 ready (of the previous spec" in out


def test_a_rollout_with_an_old_replica_still_up_is_not_done(cluster: Cluster) -> None:
    """Mid-rollout (max surge 1): the new replica is ready, the old one not yet gone. As
    kubectl rollout status, waiting goes on until only updated replicas are left."""
    cluster.kube.put(
        k8s.deployment(CFG.name, NS, replicas=1, updated=1, ready=2, total=2, labels=LABELS)
    )
    rc, _ = _wait(cluster, [], timeout=20)
    assert rc == 3
    cluster.kube.put(k8s.deployment(CFG.name, NS, replicas=1, ready=1, labels=LABELS))
    rc, _ = _wait(cluster, [])
    assert rc == 0


def test_status_shows_replicas_nodes_by_capacity_hpa_and_cost_now(
    cluster: Cluster,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    put = cluster.kube.put
    put(k8s.deployment(CFG.name, NS, replicas=2, ready=1, labels=LABELS))
    put(
        _pod(
            "r-a",
            node="tpu-spot-1",
            phase="Running",
            containers={"vllm": {"ready": True}, "frontdoor": {"ready": True}},
        )
    )
    put(_pod("r-b", node="tpu-flex-1", phase="Running", containers={"vllm": {}}))
    put(k8s.node("tpu-spot-1", labels=SPOT))
    put(k8s.node("tpu-flex-1", labels=FLEX))
    put(k8s.node("system-1", labels={"cloud.google.com/gke-nodepool": "system"}))
    put(
        k8s.hpa(
            CFG.name,
            NS,
            current=2,
            desired=3,
            metric="prometheus.googleapis.com|vllm:num_requests_waiting|gauge",
            average="7",
            more={"prometheus.googleapis.com|vllm:kv_cache_usage_perc|gauge": "412m"},
            conditions=[
                ("AbleToScale", "True", "ReadyForNewScale"),
                ("ScalingLimited", "False", "DesiredWithinRange"),
            ],
        )
    )
    config = tmp_path / "gke.toml"
    config.write_text(f'platform = "gke"\nproject = "{PROJECT}"\nzone = "us-west4-a"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "replicas: 1/2 ready" in out
    assert "r-a: ready" in out and "r-b: compiling" in out
    # Nodes by capacity type, the system pool's node not among the TPU nodes.
    assert "TPU nodes: 1 flex-start (tpu-flex-1), 1 spot (tpu-spot-1)" in out
    assert "system-1" not in out
    waiting = replicaplan.replica_plan(CFG).autoscaling.waiting_target
    assert (
        f"2 -> 3 replica(s) (1..4); vllm:num_requests_waiting 7 waiting per replica, "
        f"target {waiting}" in out
    )
    assert f"vllm:kv_cache_usage_perc 412m per replica, target {pod.hpa_kv_target(CFG)}" in out
    assert "AbleToScale=True (ReadyForNewScale)" in out
    # $/hour now: the idle floor, then each node at its own model's rate plus its NAT share.
    prices = price_table(CFG)
    nat = facts.GKE_IDLE_PRICES["us-west4"][1].per_hour
    idle = sum(rate for _, rate in replicaplan.idle_items(CFG))
    expected = idle + prices.rate("spot") + prices.rate("flex-start") + 2 * nat
    assert f"cost now: ${expected:.4f}/h" in out
    assert "flex-start nodes after" in out and "make destroy-all" in out


def test_the_api_server_refuses_a_request_without_a_token(cluster: Cluster) -> None:
    access = kube.cluster_access(CFG, PROJECT)
    api = kube.KubeApi(ClusterAccess(access.url, access.ca_pem, ""))
    with pytest.raises(KubeError, match=r"HTTP 401: Unauthorized.*roles/container.viewer"):
        api.get("/api/v1/nodes")


def test_a_server_with_another_certificate_is_never_sent_the_token(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The CA comes from clusters.get: an API server that cannot show a certificate it signed
    gets no request (and no token)."""
    access = kube.cluster_access(CFG, PROJECT)
    other = tlscert.make_bundle("impostor").cert_pem
    api = kube.KubeApi(ClusterAccess(access.url, other, access.token))
    before = len(cluster.kube.requests)
    with pytest.raises(KubeError, match="cannot reach the cluster's control plane"):
        api.get("/api/v1/nodes")
    assert len(cluster.kube.requests) == before


def test_no_cluster_says_to_deploy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with k8s.FakeKubernetes(tmp_path) as api, k8s.FakeContainer(api, clusters=set()) as c:
        monkeypatch.setenv(CONTAINER.emulator_env, c.host)
        with pytest.raises(KubeError, match=r"cluster .* does not exist .*make deploy"):
            kube.cluster_access(CFG, PROJECT)
        # make destroy-all ends with the same report: the cluster is gone, so nothing bills
        # (never "the cluster stays").
        out = io.StringIO()
        assert ops.after_destroy(CFG, PROJECT, out=out) == 0
        assert out.getvalue() == f"cluster {CFG.name} does not exist: nothing of it bills.\n"


def test_no_credentials_is_the_one_credentials_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(CONTAINER.emulator_env, raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(KubeError, match="no Google Cloud credentials"):
        kube.cluster_access(CFG, PROJECT)


# --- after make destroy -----------------------------------------------------------------------


def test_after_destroy_names_the_tpu_nodes_still_billing_and_the_cluster(
    cluster: Cluster,
) -> None:
    cluster.kube.put(k8s.node("tpu-spot-1", labels=SPOT))
    out = io.StringIO()
    assert ops.after_destroy(CFG, PROJECT, out=out) == 0
    text = out.getvalue()
    assert "1 TPU node(s) still up" in text and "10 minutes" in text
    assert "make destroy-all" in text and "bills nothing" in text
    cluster.kube.delete(k8s.node("tpu-spot-1", labels=SPOT))
    out = io.StringIO()
    ops.after_destroy(CFG, PROJECT, out=out)
    assert "no TPU node is up" in out.getvalue()


def test_tunnel_and_recover_say_what_to_use_on_gke(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "gke.toml"
    config.write_text(f'platform = "gke"\nproject = "{PROJECT}"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    assert main(["tunnel"]) == 1
    assert "port-forward service/" in capsys.readouterr().err
    # make deploy's first step does nothing on GKE (no TPU API call); make recover says why.
    assert main(["recover"]) == 0
    assert main(["recover", "--apply"]) == 1
    assert "replaces a lost replica by itself" in capsys.readouterr().err
    # make extend applies to the cluster's deadline (tests/stacks/test_terraform_gke_deadline.py):
    # it is
    # not refused, and a BY that is no duration is checked before any API call, as on a TPU VM.
    assert main(["extend", "soon"]) == 1
    err = capsys.readouterr().err
    assert "BY" in err and "soon" in err and "platform" not in err
    assert main(["pin"]) == 1
    assert "image@sha256" in capsys.readouterr().err


def test_the_fake_selects_by_label_as_the_api_documents() -> None:
    node = {"a": "1", "b": "2"}
    assert k8s._selected(node, "a=1,b==2")
    assert not k8s._selected(node, "a=1,b!=2")
    assert k8s._selected(node, "a,!c") and not k8s._selected(node, "!a")


def test_a_failed_gke_deploy_names_the_cluster_and_the_replicas_in_state(tmp_path: Path) -> None:
    """Before, a failed GKE deploy looked for a TPU VM in <name>-node's state (a stack GKE does
    not have) and said no chip bills while a cluster and its replicas did."""
    from tests.commands.test_failure_messages import resource, say, state_file
    from tpudeploy import failures

    state_file(tmp_path, CFG.secrets_stack_name, [resource("google_secret_manager_secret", "t")])
    state_file(tmp_path, CFG.gke_stack_name, [resource("google_container_cluster", "cluster")])
    state_file(tmp_path, CFG.serving_stack_name, [resource("kubernetes_deployment_v1", "d")])
    text = say(failures.after_deploy, cfg=CFG, root=tmp_path)
    idle = sum(rate for _, rate in replicaplan.idle_items(CFG))
    assert f"GKE cluster {CFG.name} with its system node and NAT (${idle:.4f}/h" in text
    assert f"Deployment {CFG.name}: 1 to 4 replica(s)" in text and "make destroy" in text
    assert "no chip bills" not in text
    (tmp_path / f"terraform.{CFG.serving_stack_name}.tfstate").unlink()
    (tmp_path / f"terraform.{CFG.gke_stack_name}.tfstate").unlink()
    text = say(failures.after_destroy, cfg=CFG, terraform_exit=1, cleanup_exit=0, root=tmp_path)
    assert f"no state for {CFG.gke_stack_name}, {CFG.serving_stack_name} here" in text
    assert "queued resource" not in text
