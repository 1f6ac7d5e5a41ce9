"""`make bench` on GKE: the sweep in one ready replica's vLLM container through the Kubernetes
API's exec (tpudeploy.gke.podexec), against the ops fake's API server, which serves exec over a
WebSocket as the real one does and refuses what it refuses (k8s_exec.EXEC_RULES). The pod's
container is a local process with a stand-in `vllm` on its PATH: the real in-container script
(the key read from stdin, the result printed) runs under sh."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fake_boot_apis import FakeSecretManager
from tools.rehearsal.fakes import k8s_exec
from tools.rehearsal.fakes import k8s_ops as k8s
from tpudeploy import benchcli as bench_cli
from tpudeploy import facts
from tpudeploy.bench.commands import RESULT_DIR_IN_CONTAINER
from tpudeploy.bench.cost_kv import cost_per_million
from tpudeploy.bench.report import build_report
from tpudeploy.config import parse_config
from tpudeploy.gcp.apis import CONTAINER
from tpudeploy.gcp.container import ClusterAccess, KubeError
from tpudeploy.gke import bench, podexec
from tpudeploy.gke.kube import KubeApi
from tpudeploy.gke.manifests import labels

PROJECT = "demo-proj"
CFG = parse_config({"platform": "gke", "project": PROJECT})
# Each deployment its own namespace (issue 36 item 13): tpudeploy-<name>.
NS = f"tpudeploy-{CFG.name}"
DIGEST = "docker.io/vllm/vllm-tpu@sha256:" + "ab" * 32
VERSION = "0.33.0"
# A stand-in vLLM CLI: `--version`, and `bench serve` writing the result file the flags name
# (vllm/benchmarks/serve.py: --result-dir, --result-filename, --metadata K=V at the top level).
FAKE_VLLM = r"""
import hashlib, json, os, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("VERSION")
    sys.exit(0)
assert args[:2] == ["bench", "serve"], args
def value(flag):
    return args[args.index(flag) + 1]
meta = {}
if "--metadata" in args:
    for pair in args[args.index("--metadata") + 1:]:
        if pair.startswith("--"):
            break
        k, _, v = pair.partition("=")
        meta[k] = v
prefix = int(value("--random-prefix-len")) if "--random-prefix-len" in args else 0
clients, context = int(value("--max-concurrency")), int(value("--random-input-len")) + prefix
prompts = int(value("--num-prompts"))
result = dict(meta, date="20261202-000000", backend="openai-chat", model_id=value("--model"),
              completed=prompts, num_prompts=prompts, max_concurrency=clients,
              total_input_tokens=prompts * context, output_throughput=100.0 * clients,
              median_ttft_ms=50.0, median_tpot_ms=8.0,
              saw_key=os.environ.get("OPENAI_API_KEY", ""), saw_prefix=prefix,
              saw_key_sha256=hashlib.sha256(os.environ.get("OPENAI_API_KEY", "").encode())
              .hexdigest(),
              saw_base_url=value("--base-url") if "--base-url" in args else "",
              saw_insecure="--insecure" in args)
os.makedirs(value("--result-dir"), exist_ok=True)
with open(os.path.join(value("--result-dir"), value("--result-filename")), "w") as f:
    json.dump(result, f)
print("bench chatter on stdout goes to stderr", flush=True)
""".replace("VERSION", VERSION)


@dataclass
class Cluster:
    kube: k8s.FakeKubernetes
    container: k8s.FakeContainer
    bin: Path


def _replica(name: str, *, ready: bool = True, phase: str = "Running") -> dict[str, Any]:
    return k8s.pod(
        name,
        NS,
        labels=labels(CFG),
        node="gke-tpu-spot-1",
        phase=phase,
        containers={
            "vllm": {"ready": ready, "image": "vllm/vllm-tpu:nightly", "imageID": DIGEST},
            "frontdoor": {"ready": ready},
        },
    )


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "vllm"
    script.write_text(f"#!{os.path.realpath(sys.executable)} -S\n{FAKE_VLLM}")
    script.chmod(0o755)
    with (
        k8s.FakeKubernetes(tmp_path / "kube") as api,
        k8s.FakeContainer(api, clusters={CFG.name}) as container,
    ):
        monkeypatch.setenv(CONTAINER.emulator_env, container.host)
        yield Cluster(api, container, bin_dir)


def _api(cluster: Cluster, token: str = "t") -> KubeApi:  # noqa: S107 - the fake's
    return KubeApi(ClusterAccess(f"https://{cluster.kube.host}", cluster.kube.ca_pem, token))


def _env(cluster: Cluster, pod: str) -> None:
    cluster.kube.exec_env[(pod, "vllm")] = {"PATH": f"{cluster.bin}:/usr/bin:/bin"}


# ---- the exec transport ------------------------------------------------------------------------


def test_exec_returns_stdout_stderr_and_the_exit_code_and_takes_stdin(cluster: Cluster) -> None:
    cluster.kube.put(_replica("r-a"))
    _env(cluster, "r-a")
    script = 'IFS= read -r line; echo "got:$line"; echo oops >&2; exit 3'
    done = podexec.exec_in_pod(
        _api(cluster), NS, "r-a", "vllm", ["sh", "-c", script], stdin=b"hello\n"
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, b"got:hello\n", b"oops\n")
    ok = podexec.exec_in_pod(_api(cluster), NS, "r-a", "vllm", ["sh", "-c", "exit 0"])
    assert ok.returncode == 0
    # What went in the URL is the argv only; stdin (a key, when there is one) never does.
    assert cluster.kube.execs[0]["command"] == ["sh", "-c", script]
    assert "hello" not in json.dumps(cluster.kube.requests)


@pytest.mark.parametrize(
    ("pod", "container", "token", "words"),
    [
        ("r-a", "vllm", "", ["HTTP 401", "container.pods.exec"]),
        ("gone", "vllm", "t", ["no such pod", "make status"]),
        ("r-a", "sidecar", "t", ["HTTP 400", "not running", "make status"]),
        ("r-pending", "vllm", "t", ["HTTP 400", "not running", "make status"]),
    ],
    ids=["no-token", "no-pod", "no-container", "not-running"],
)
def test_exec_refusals_say_what_and_what_to_do(
    cluster: Cluster, pod: str, container: str, token: str, words: list[str]
) -> None:
    cluster.kube.put(_replica("r-a"))
    cluster.kube.put(
        k8s.pod("r-pending", NS, labels=labels(CFG), containers={"vllm": {"state": {}}})
    )
    with pytest.raises(KubeError) as raised:
        podexec.exec_in_pod(_api(cluster, token), NS, pod, container, ["true"])
    assert all(w in str(raised.value) for w in words), str(raised.value)
    assert not [e for e in cluster.kube.execs if e.get("ran")]  # refused before anything ran


def test_the_exit_status_follows_the_documented_status_shapes() -> None:
    assert podexec.exit_code(k8s_exec.exec_status(0)) == 0
    assert podexec.exit_code(k8s_exec.exec_status(7)) == 7
    with pytest.raises(KubeError, match="did not run"):
        podexec.exit_code({"status": "Failure", "reason": "InternalError", "message": "boom"})


def test_the_fake_refuses_a_client_that_offers_only_protocols_it_lacks(cluster: Cluster) -> None:
    import urllib.request

    cluster.kube.put(_replica("r-a"))
    request = urllib.request.Request(
        f"https://{cluster.kube.host}{podexec.exec_path(NS, 'r-a', 'vllm', ['true'])}",
        headers={
            "Authorization": "Bearer t",
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Protocol": "v1.channel.k8s.io",
        },
    )
    import ssl

    context = ssl.create_default_context(cadata=cluster.kube.ca_pem)
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, context=context, timeout=10)  # noqa: S310
    assert raised.value.code == 400
    assert k8s_exec.accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


# ---- make bench on GKE -------------------------------------------------------------------------


def test_bench_runs_the_sweep_in_a_ready_replica_and_records_its_image(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.kube.put(_replica("r-b"))
    cluster.kube.put(_replica("r-a"))
    cluster.kube.put(_replica("r-0", ready=False))  # compiling: never chosen
    for name in ("r-a", "r-b", "r-0"):
        _env(cluster, name)
    config = tmp_path / "gke.toml"
    config.write_text(f'platform = "gke"\nproject = "{PROJECT}"\n')
    out = tmp_path / f"gke-bench-{uuid.uuid4().hex[:12]}"
    try:
        rc = bench_cli.main(
            ["run", "--config", str(config), "--profile", "quick", "--out", str(out)]
        )
    finally:
        shutil.rmtree(f"{RESULT_DIR_IN_CONTAINER}/{out.name}", ignore_errors=True)
    assert rc == 0, capsys.readouterr().err
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["node"]["pod"] == "r-a"  # the first ready replica by name
    assert meta["image"]["digest"] == DIGEST and meta["image"]["vllm_version"] == VERSION
    results = sorted(out.glob("ctx*.json"))
    assert len(results) == len(meta["cells"]) == 4
    for path in results:
        saved = json.loads(path.read_text())
        assert saved["tpudeploy_digest"] == DIGEST and saved["saw_key"] == ""
    assert {e["pod"] for e in cluster.kube.execs} == {"r-a"}
    assert all(e["container"] == "vllm" for e in cluster.kube.execs)


def test_bench_says_so_when_no_replica_is_ready(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.kube.put(_replica("r-a", ready=False))
    config = tmp_path / "gke.toml"
    config.write_text(f'platform = "gke"\nproject = "{PROJECT}"\n')
    assert bench_cli.main(["run", "--config", str(config), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no replica of" in err and "make wait" in err
    assert not cluster.kube.execs


def test_bench_plan_on_gke_prints_the_in_container_commands_and_asks_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONTAINER.emulator_env, raising=False)
    config = tmp_path / "gke.toml"
    config.write_text(f'platform = "gke"\nproject = "{PROJECT}"\n')
    assert bench_cli.main(["plan", "--config", str(config), "--profile", "quick"]) == 0
    out = capsys.readouterr().out
    assert bench.PLAN_POD in out and "Kubernetes API's exec" in out
    commands = [line for line in out.splitlines() if not line.startswith("#")]
    assert commands and all(line.startswith("sh -c ") for line in commands)
    assert "gcloud" not in out and "docker" not in out


def test_bench_without_a_project_says_so_before_any_api_call(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "gke.toml"
    config.write_text('platform = "gke"\n')
    assert bench_cli.main(["run", "--config", str(config), "--out", str(tmp_path / "o")]) == 2
    assert "no project to find the cluster in" in capsys.readouterr().err
    assert not cluster.container.requests and not cluster.kube.requests


# ---- make bench ROUTE=gateway: the pool through the Gateway (issue 26) --------------------------

GATEWAY_ADDRESS = "10.128.0.40"
ROUTED_TOML = f"""platform = "gke"
project = "{PROJECT}"
[gke]
min_version = "{facts.GKE_INFERENCE_CRDS_MIN_VERSION}"
[routing]
gateway = true
certificate = "gemma4-gateway"
proxy_subnet_cidr = "10.126.0.0/23"
scoring = "random"
"""
API_KEY = "pool-key-" + "q" * 40


def test_bench_through_the_gateway_sends_the_pool_a_shared_prefix_with_the_key(
    cluster: Cluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("r-a", "r-b"):
        cluster.kube.put(_replica(name))
        _env(cluster, name)
    cluster.kube.put(k8s.gateway(CFG.name, NS, address=GATEWAY_ADDRESS))
    config = tmp_path / "routed.toml"
    config.write_text(ROUTED_TOML)
    cfg = parse_config(tomllib.loads(ROUTED_TOML))
    out = tmp_path / f"gke-gateway-{uuid.uuid4().hex[:12]}"
    args = ["run", "--config", str(config), "--profile", "quick", "--out", str(out)]
    args += ["--route", "gateway", "--shared-prefix-percent", "75"]
    with FakeSecretManager({cfg.api_key_secret_id: [API_KEY]}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        try:
            rc = bench_cli.main(args)
        finally:
            shutil.rmtree(f"{RESULT_DIR_IN_CONTAINER}/{out.name}", ignore_errors=True)
    assert rc == 0, capsys.readouterr().err
    results = [json.loads(p.read_text()) for p in sorted(out.glob("ctx*.json"))]
    assert len(results) == 4
    for saved in results:
        context = int(saved["tpudeploy_context"])
        # The client in the replica sends to the Gateway, not its own vLLM, with the key.
        assert saved["saw_base_url"] == f"https://{GATEWAY_ADDRESS}" and saved["saw_insecure"]
        # The key reached the client (its digest), and the sweep scrubbed it from the result.
        assert saved["saw_key_sha256"] == hashlib.sha256(API_KEY.encode()).hexdigest()
        assert saved["saw_key"] == "<redacted>"
        assert saved["saw_prefix"] == context * 75 // 100 and saved["total_input_tokens"] == (
            context * saved["num_prompts"]
        )
        assert saved["tpudeploy_route"] == "gateway:random"
        assert (saved["tpudeploy_replicas"], saved["tpudeploy_shared_prefix"]) == ("2", "75")
    # The key went on stdin: never in an exec URL's argv.
    assert API_KEY not in json.dumps(cluster.kube.requests)
    assert API_KEY not in (out / "metadata.json").read_text()

    report = build_report(out, prices={"spot": 1.0})
    assert "through the Gateway (scoring `random`), 75% of each prompt shared" in report.markdown
    assert "these are the pool's figures" in report.markdown
    # Two replicas bill two chips: the cost per token is twice one chip's at the same tok/s.
    tok_s = 100.0 * 16  # the stand-in's aggregate at 16 clients
    row = next(line for line in report.markdown.splitlines() if line.startswith("| 1,024 | 16 |"))
    assert row.endswith(f"| 2 | ${cost_per_million(tok_s, 2.0):.3f} |"), row


def test_bench_through_the_gateway_needs_routing_and_an_address(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.kube.put(_replica("r-a"))
    plain = tmp_path / "gke.toml"
    plain.write_text(f'platform = "gke"\nproject = "{PROJECT}"\n')
    args = ["run", "--out", str(tmp_path / "o"), "--route", "gateway"]
    assert bench_cli.main([*args, "--config", str(plain)]) == 2
    err = capsys.readouterr().err
    assert "ROUTE=gateway" in err and "[routing] gateway = true" in err
    assert not cluster.kube.requests  # refused before any API call

    routed = tmp_path / "routed.toml"
    routed.write_text(ROUTED_TOML)
    cluster.kube.put(k8s.gateway(CFG.name, NS, message="waiting for the load balancer"))
    assert bench_cli.main([*args, "--config", str(routed)]) == 2
    err = capsys.readouterr().err
    assert "has no address yet (waiting for the load balancer)" in err
    assert not cluster.kube.execs
    bad = [*args, "--config", str(routed), "--shared-prefix-percent", "95"]
    assert bench_cli.main(bad) == 2
    assert "SHARED_PREFIX=95" in capsys.readouterr().err
