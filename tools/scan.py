"""Runs checkov on the synthesized Terraform JSON, with each skipped check justified below."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

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


def skips_for(outdir: Path) -> dict[str, str]:
    """The skips that apply to one synthesized output directory."""
    if (outdir / "stacks" / BOOTSTRAP_STACK).is_dir():
        return {**SKIPS, **BOOTSTRAP_SKIPS}
    return dict(SKIPS)


def prepare(outdir: Path, scan_dir: Path) -> list[Path]:
    """Copy each stack's JSON, dropping terraform.required_version: checkov 3.3.30's
    terraform_json parser crashes on a scalar in the terraform block ("receives only dicts")."""
    copies = []
    for stack_json in sorted(outdir.glob("stacks/*/cdk.tf.json")):
        doc = json.loads(stack_json.read_text())
        doc.get("terraform", {}).pop("required_version", None)
        target = scan_dir / f"{stack_json.parent.name}.tf.json"
        target.write_text(json.dumps(doc, indent=1))
        copies.append(target)
    return copies


def scan(outdir: Path) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as tmp:
        copies = prepare(outdir, Path(tmp))
        if not copies:
            raise SystemExit(f"no synthesized stacks under {outdir}: run `make synth` first")
        checkov = Path(sys.executable).with_name("checkov")
        return subprocess.run(
            [
                str(checkov),
                "-d",
                tmp,
                "--framework",
                "terraform_json",
                "--skip-download",
                "--compact",
                "--quiet",
                "--skip-check",
                ",".join(skips_for(outdir)),
            ],
            capture_output=True,
            text=True,
            check=False,
        )


if __name__ == "__main__":
    result = scan(Path(sys.argv[1] if len(sys.argv) > 1 else "cdktf.out"))
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    sys.exit(result.returncode)
