"""The argv of every step: `vllm bench serve` per cell, inside the serving container: on a TPU VM
through IAP SSH and `docker exec`, on GKE in one replica's vLLM container through the Kubernetes
API's exec (tpudeploy.gke.podexec)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from tpudeploy.bench import specmetrics
from tpudeploy.bench.settings import SweepSettings
from tpudeploy.iapssh import ssh_argv

# Inside the container: the serving image ships vLLM's own client, and the container's HF_HOME
# already holds the tokenizer the server loaded, so nothing is downloaded to benchmark.
RESULT_DIR_IN_CONTAINER = "/tmp/tpudeploy-bench"  # noqa: S108 - container-private scratch
# `--metadata KEY=VALUE` pairs land at the top level of the saved result, before vLLM's own keys,
# which overwrite a pair of the same name (vllm/benchmarks/serve.py): hence the prefix. The
# report reads each run's cell and origin from these, never from the file's name.
META_CONTEXT = "tpudeploy_context"
META_CLIENTS = "tpudeploy_clients"
META_REP = "tpudeploy_rep"
META_CONFIG = "tpudeploy_config"
META_IMAGE = "tpudeploy_image"
# The manifest digest (RepoDigest) and vLLM version the node served (issue 24): what `make pin`
# holds a deployment to, so results group by the build a user can deploy again.
META_DIGEST = "tpudeploy_digest"
META_VLLM = "tpudeploy_vllm"
# What a run through the Gateway measured (issue 26): the route ("gateway:<scoring>"; absent, one
# replica's own vLLM), the shared-prefix percent of its prompts, and the replicas ready at start.
META_ROUTE = "tpudeploy_route"
META_SHARED_PREFIX = "tpudeploy_shared_prefix"
META_REPLICAS = "tpudeploy_replicas"


# The script `sh -c` runs inside the container. The API key arrives as the first line of stdin
# (ssh -> docker exec -i) so it is never an argument anywhere; `vllm bench serve` reads
# OPENAI_API_KEY from its environment for the openai backends (endpoint_request_func._get_headers).
# The benchmark's chatter goes to stderr so that stdout carries only the result JSON back.
_IN_CONTAINER_SCRIPT = (
    'result="$1"; shift; IFS= read -r OPENAI_API_KEY; export OPENAI_API_KEY; '
    '"$@" >&2 && cat "$result"'
)
# The same, with the server's spec-decode counters read before and after the run and their
# growth merged into the result (tpudeploy/bench/specmetrics.py); a failed read merges nothing.
_SPEC_SCRIPT = (
    'result="$1"; url="$2"; py="$3"; shift 3; IFS= read -r OPENAI_API_KEY; export OPENAI_API_KEY; '
    'before=$(python3 -c "$py" scrape "$url"); '
    '"$@" >&2 && { python3 -c "$py" merge "$result" "$url" "$before" >&2 || true; } && '
    'cat "$result"'
)


@dataclass(frozen=True)
class Cell:
    """One `vllm bench serve` run: a grid point and its repetition (1-based)."""

    context: int
    clients: int
    rep: int
    seed: int

    @property
    def filename(self) -> str:
        # For people and for resuming a sweep; the report reads the cell from the --metadata
        # pairs inside the file (bench_argv), so renamed files still report correctly.
        return f"ctx{self.context}-c{self.clients}-r{self.rep}.json"

    @property
    def stem(self) -> str:
        return self.filename.removesuffix(".json")


@dataclass(frozen=True)
class NodeTarget:
    """Where the serving container runs, reached through IAP SSH (tpudeploy.iapssh)."""

    name: str
    zone: str
    project: str | None = None


@dataclass(frozen=True)
class PodTarget:
    """One ready GKE replica's vLLM container, as the pod's status names its image: the same
    sweep against 127.0.0.1 inside it measures one chip, as on the TPU VM."""

    namespace: str
    pod: str
    container: str
    image: str  # ContainerStatus.image: the reference the pod was started from
    image_digest: str  # ContainerStatus.imageID: repo@sha256:<manifest digest> (containerd)
    # ROUTE=gateway: the client in this container sends to the Gateway's https URL instead of
    # its own vLLM, and this many replicas were ready when the target was chosen.
    base_url: str = ""
    replicas: int = 1


BenchTarget = NodeTarget | PodTarget


def plan_cells(settings: SweepSettings, *, base_seed: int) -> list[Cell]:
    """Every run of the sweep in order, each with its own `--seed`.

    A repeated seed replays identical prompts and prefix caching would serve them from cache;
    random prompts of the same seed also share prefixes across contexts. So every run gets
    base_seed + its index; with base_seed = the start time in seconds, consecutive sweeps on
    the same server never reuse a seed, since every run lasts longer than one second.
    """
    cells: list[Cell] = []
    for rep in range(1, settings.repetitions + 1):
        for context in settings.contexts:
            for clients in settings.clients:
                cells.append(Cell(context, clients, rep, base_seed + len(cells)))
    return cells


def bench_argv(
    settings: SweepSettings,
    cell: Cell,
    *,
    result_dir: str,
    image_id: str | None = None,
    digest: str | None = None,
    vllm_version: str | None = None,
) -> list[str]:
    """The `vllm bench serve` argv for one cell (runs inside the serving container).

    Every value on it is public: a process list or a log line may show it (no key, no token).
    """
    # max_concurrency alone cannot tell contexts apart, and total_input_tokens / completed is
    # only an estimate: the cell, its repetition and the server measured travel in the result.
    metadata = [f"{META_CONTEXT}={cell.context}", f"{META_CLIENTS}={cell.clients}"]
    metadata.append(f"{META_REP}={cell.rep}")
    if settings.config_hash:
        metadata.append(f"{META_CONFIG}={settings.config_hash}")
    if image_id:
        metadata.append(f"{META_IMAGE}={image_id}")
    if digest:
        metadata.append(f"{META_DIGEST}={digest}")
    if vllm_version:
        metadata.append(f"{META_VLLM}={vllm_version}")
    prefix = settings.shared_prefix_len(cell.context)
    if settings.shared_prefix_percent:
        metadata.append(f"{META_SHARED_PREFIX}={settings.shared_prefix_percent}")
    if settings.base_url:
        metadata.append(f"{META_ROUTE}=gateway:{settings.scoring}")
        metadata.append(f"{META_REPLICAS}={settings.replicas}")
        # The Gateway's certificate names the user's host, not the address its status reports,
        # which is what the client inside the VPC reaches: TLS without the name check, to an
        # address read from the authenticated Kubernetes API (docs/benchmarking.md).
        where = ["--base-url", settings.base_url, "--insecure"]
    else:
        where = ["--host", settings.host, "--port", str(settings.port)]
    argv = [
        "vllm", "bench", "serve",
        "--backend", "openai-chat",
        # The upstream default /v1/completions returns "" on -it models (seed).
        "--endpoint", "/v1/chat/completions",
        *where,
        "--model", settings.model,
        *(["--served-model-name", settings.served_model_name]
          if settings.served_model_name else []),
        "--dataset-name", "random",
        # The total input is the prefix plus the random part (vllm/benchmarks/datasets): the
        # cell's context either way, so cells compare with the build log's.
        "--random-input-len", str(cell.context - prefix),
        *(["--random-prefix-len", str(prefix)] if prefix else []),
        "--random-output-len", str(settings.output_len),
        # Fixed output length per request: tokens/s compare across cells and runs.
        "--ignore-eos",
        "--max-concurrency", str(cell.clients),
        "--num-prompts", str(settings.num_prompts(cell.clients)),
        "--seed", str(cell.seed),
        "--save-result",
        "--result-dir", result_dir,
        "--result-filename", cell.filename,
        "--metadata", *metadata,
        "--disable-tqdm",
    ]  # fmt: skip
    if settings.save_detailed:
        argv.append("--save-detailed")
    return argv


def cell_command(
    settings: SweepSettings,
    cell: Cell,
    *,
    run_id: str,
    target: BenchTarget | None,
    image_id: str | None = None,
    digest: str | None = None,
    vllm_version: str | None = None,
) -> list[str]:
    """The argv that runs one cell and prints its result JSON on stdout: local (ssh) for a TPU
    VM or on it (None), the container's own for a pod (its executor runs it there)."""
    result_dir = f"{RESULT_DIR_IN_CONTAINER}/{run_id}"
    inner = bench_argv(
        settings,
        cell,
        result_dir=result_dir,
        image_id=image_id,
        digest=digest,
        vllm_version=vllm_version,
    )
    result = f"{result_dir}/{cell.filename}"
    in_container = ["sh", "-c", _IN_CONTAINER_SCRIPT, "sh", result, *inner]
    if settings.spec_metrics and not settings.base_url:
        url = specmetrics.metrics_url(settings.host, settings.port)
        in_container = ["sh", "-c", _SPEC_SCRIPT, "sh", result, url, specmetrics.SNIPPET, *inner]
    if isinstance(target, PodTarget):
        return in_container
    return over_ssh(["sudo", "docker", "exec", "-i", settings.container, *in_container], target)


def version_command() -> list[str]:
    """In a pod's container: the vLLM version alone (its image and digest are in the pod's
    status, which the Kubernetes API reports)."""
    return ["vllm", "--version"]


def image_info_command(settings: SweepSettings, target: NodeTarget | None) -> list[str]:
    """The argv printing image ref, image id, repo digests and vLLM version of the container."""
    c = shlex.quote(settings.container)
    # The seed: `docker images`' sha256 is a config-blob id, not a pullable manifest digest,
    # and the vLLM version string embeds the git SHA the build shipped; record all three.
    script = (
        f"sudo docker inspect --format '{{{{.Config.Image}}}}' {c} && "
        f"id=$(sudo docker inspect --format '{{{{.Image}}}}' {c}) && echo \"$id\" && "
        "sudo docker image inspect --format '{{json .RepoDigests}}' \"$id\" && "
        f"sudo docker exec {c} vllm --version"
    )
    return over_ssh(["sh", "-c", script], target)


def over_ssh(command: Sequence[str], target: NodeTarget | None) -> list[str]:
    """Wrap a node-side argv in the IAP SSH of tpudeploy.iapssh (None: on the node)."""
    if target is None:
        return list(command)
    return [
        *ssh_argv(target.name, target.zone, target.project),
        "--quiet",
        # No pseudo-terminal: a remote tty would echo the key read from stdin into the output.
        "--ssh-flag=-T",
        "--command",
        shlex.join(command),
    ]
