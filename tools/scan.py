"""Runs checkov on the synthesized Terraform JSON, with each skipped check justified below."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Every skip needs its reason here; nothing else is skipped.
SKIPS = {
    # The seed reaches its node on a public IP. Ingress is closed by the firewall rules instead:
    # the vLLM port only to [network] allowed_cidrs (none by default), SSH only from IAP.
    # With [network] enable_external_ip = false (and Private Google Access) the check passes.
    "CKV2_GCP_32": "TPU v2 is private",
    # The compile-cache bucket (stacks/secrets.py): usage logs are GCS's legacy access log and
    # need a second bucket that would itself be unlogged; writes to the cache are audited by Cloud
    # Audit Logs (Data Access logs for storage.googleapis.com), and only the node's account may
    # write at all.
    "CKV_GCP_62": "cache bucket access is audited with Cloud Audit Logs",
}
# Added only when the scanned output is the GitOps bootstrap (its own output directory, see
# stacks/bootstrap.py), so they never hide a finding in a deployment's stacks.
BOOTSTRAP_STACK = "gitops-bootstrap"
BOOTSTRAP_SKIPS = {
    # Usage logs are GCS's legacy access log and need a second bucket; who read or wrote state is
    # in Cloud Audit Logs (Data Access logs for storage.googleapis.com), which README tells you
    # to enable.
    "CKV_GCP_62": "state bucket access is audited with Cloud Audit Logs",
}


# Added only when the output holds a platform = "gke" deployment (its <name>-serving stack), so
# they never hide a finding in a TPU VM's stacks.
GKE_SKIPS = {
    # The pods run the build log's image by its tag (vllm/vllm-tpu:nightly); [vllm] image takes
    # "repo:tag@sha256:..." to pin a digest, as on the TPU VM. Pulling Always would fetch a new
    # nightly on every restart, and a new build misses the compile cache.
    # The metrics adapter's image is by tag too until its digest is known (tpudeploy/gke/
    # adapter.py DIGEST; tests/gke/test_gke_adapter.py marks it unfinished).
    "CKV_K8S_43": "vLLM pinned by the config's tag (a digest is the user's); adapter: see DIGEST",
    "CKV_K8S_15": "IfNotPresent keeps a replica on the image its compile cache matches",
    # CPU limits throttle vLLM's host threads (scheduling, detokenizing); each pod has a whole
    # ct5lp-hightpu-1t node to itself.
    "CKV_K8S_11": "one pod per TPU node: a CPU limit only throttles the engine",
    # vLLM, JAX and libtpu write under / (temp files, caches) in places not measured here; the
    # front door and the init container do run with read-only roots.
    "CKV_K8S_22": "the vLLM container's writes outside its volumes are unmeasured",
    # /health proves the engine alive through the readiness probe; a liveness restart costs a
    # whole compile (warm 497 s), which a stuck engine's 503 on /health already reports.
    "CKV_K8S_8": "a liveness restart costs a compile; readiness removes a dead engine",
    # Workload Identity's metadata server is set on every node pool (workload_metadata_config
    # GKE_METADATA); checkov reads only the cluster's default node_config, which is removed.
    "CKV_GCP_69": "GKE_METADATA is set on each node pool; the default pool is removed",
    # No [network] allowed_cidrs: the operator's machine must reach the control plane to apply
    # the serving stack (IAM-authenticated); with allowed_cidrs only those ranges may.
    "CKV_GCP_20": "authorized networks follow [network] allowed_cidrs",
    # nginx's master switches to its worker user: CHOWN, SETUID and SETGID after dropping ALL,
    # exactly the TPU VM's `docker run --cap-drop ALL --cap-add CHOWN --cap-add SETUID
    # --cap-add SETGID` (templates/startup.sh.j2); vLLM drops NET_RAW.
    "CKV_K8S_25": "nginx adds back only CHOWN, SETUID, SETGID (its worker user), as on the VM",
    "CKV_K8S_37": "capabilities are dropped (ALL, NET_RAW) and only nginx's three added back",
    # Google Groups for RBAC needs a Workspace domain the project does not know.
    "CKV_GCP_65": "needs a Google Workspace groups domain",
    # The image is Docker Hub's; Binary Authorization needs attestations nobody makes here.
    "CKV_GCP_66": "no attestor for the upstream vLLM image",
    # No NetworkPolicy objects yet: the pod's only listeners are nginx's (key on every API path,
    # /metrics alone on the plain port); vLLM stays on loopback.
    "CKV_GCP_12": "nothing but nginx listens on the pod IP",
}


def skips_for(outdir: Path) -> dict[str, str]:
    """The skips that apply to one synthesized output directory."""
    if (outdir / "stacks" / BOOTSTRAP_STACK).is_dir():
        return {**SKIPS, **BOOTSTRAP_SKIPS}
    if any((outdir / "stacks").glob("*-serving")):
        return {**SKIPS, **GKE_SKIPS}
    return dict(SKIPS)


def prepare(outdir: Path, scan_dir: Path) -> list[Path]:
    """Copy each stack's JSON, dropping terraform.required_version: checkov 3.3.30's
    terraform_json parser crashes on a scalar in the terraform block ("receives only dicts"),
    and on a top-level list, which a pipeline deployment's `removed` blocks are (stacks/secrets.py;
    "removed" declares no resource, so nothing checkov judges is lost)."""
    copies = []
    for stack_json in sorted(outdir.glob("stacks/*/cdk.tf.json")):
        doc = json.loads(stack_json.read_text())
        doc.get("terraform", {}).pop("required_version", None)
        doc.pop("removed", None)
        target = scan_dir / f"{stack_json.parent.name}.tf.json"
        target.write_text(json.dumps(doc, indent=1))
        copies.append(target)
    return copies


@dataclass(frozen=True)
class Finding:
    check_id: str
    check_name: str
    resource: str
    file: str


@dataclass(frozen=True)
class Scan:
    """checkov's verdict on one synthesized output directory, its own skips applied."""

    outdir: Path
    passed: int
    failed: tuple[Finding, ...]
    skipped: int

    @property
    def ok(self) -> bool:
        return not self.failed and self.passed > 0

    def report(self) -> str:
        lines = [
            f"checkov on {self.outdir}: Passed checks: {self.passed}, Failed checks: "
            f"{len(self.failed)}, Skipped checks: {self.skipped} (reasons: tools/scan.py)"
        ]
        lines += [
            f"  FAILED {f.check_id} {f.check_name}: {f.resource} ({f.file})" for f in self.failed
        ]
        if not self.failed and not self.passed:
            # Not ok either (ok needs a passed check): say why, or a reader sees no failure.
            lines.append(
                "  NOT A PASS: no check passed, so nothing was judged (every result skipped, or "
                "none found): check the synthesized stacks and the skips in tools/scan.py"
            )
        return "\n".join(lines)


class ScanError(Exception):
    """checkov did not run to a verdict (a crash, a parse error): never a pass."""


def _results(report: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for verdict in ("passed_checks", "failed_checks"):
        for check in report.get("results", {}).get(verdict, []):
            yield verdict, check


def scan_all(outdirs: Sequence[Path]) -> list[Scan]:
    """One checkov run over several output directories (its start-up, ~5 s of CPU, paid once),
    each judged with its own skips: checkov's --skip-check applies to a whole run, so the skips
    are applied here to each directory's results, which drops exactly what --skip-check would."""
    with tempfile.TemporaryDirectory() as tmp:
        for i, outdir in enumerate(outdirs):
            (Path(tmp) / str(i)).mkdir()
            if not prepare(outdir, Path(tmp) / str(i)):
                raise SystemExit(f"no synthesized stacks under {outdir}: run `make synth` first")
        checkov = Path(sys.executable).with_name("checkov")
        done = subprocess.run(
            [
                *(str(checkov), "-d", tmp, "--framework", "terraform_json", "--skip-download"),
                *("--compact", "--output", "json"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    # checkov exits 1 when a check failed, 0 when none did; anything else is its own failure.
    try:
        parsed = json.loads(done.stdout) if done.returncode in (0, 1) else None
    except json.JSONDecodeError:
        parsed = None
    if parsed is None:
        raise ScanError(f"checkov exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr}")
    reports = parsed if isinstance(parsed, list) else [parsed]
    unparsed = [f for r in reports for f in r.get("results", {}).get("parsing_errors", [])]
    if unparsed or any(r.get("summary", {}).get("parsing_errors") for r in reports):
        names = [f.split("/")[-1] for f in unparsed]
        raise ScanError(f"checkov could not parse {names or 'a stack'}: a synth to repeat")
    return [judge(outdir, f"/{i}/", reports, skips_for(outdir)) for i, outdir in enumerate(outdirs)]


def judge(outdir: Path, prefix: str, reports: list[dict[str, Any]], skips: Iterable[str]) -> Scan:
    """The verdict on the results whose file path starts with `prefix` (one directory of the
    run), without the checks in `skips`."""
    skipped_ids = set(skips)
    passed, failed, skipped = 0, [], 0
    for report in reports:
        for verdict, check in _results(report):
            if not check["file_path"].startswith(prefix):
                continue
            if check["check_id"] in skipped_ids:
                skipped += 1
            elif verdict == "passed_checks":
                passed += 1
            else:
                name = check["file_path"][len(prefix) :]
                failed.append(
                    Finding(check["check_id"], check["check_name"], check["resource"], name)
                )
    return Scan(outdir, passed, tuple(failed), skipped)


def scan(outdir: Path) -> Scan:
    return scan_all([outdir])[0]


if __name__ == "__main__":
    try:
        result = scan(Path(sys.argv[1] if len(sys.argv) > 1 else "cdktf.out"))
    except ScanError as exc:
        sys.exit(f"error: {exc}")
    print(result.report())
    sys.exit(0 if result.ok else 1)
