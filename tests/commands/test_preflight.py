"""`make preflight` (the first step of deploy, diff and destroy): each failure is one line with
its fix, in under two seconds, run as the Makefile runs it: `python -m tpudeploy preflight`."""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import cli_fork
from tests.conftest import REPO_ROOT
from tests.fake_boot_apis import FakeSecretManager
from tools.rehearsal.fakes.resourcemanager import FakeResourceManager
from tpudeploy import facts
from tpudeploy.config import parse_config

PROJECT = "preflight-proj-1"
CFG = parse_config({"project": PROJECT})
HF, KEY, TLS = CFG.hf_token_secret_id, CFG.api_key_secret_id, CFG.tls_secret_id
# The bar: every mistake answered in under two seconds. Measured as the command's own
# CPU time (user + system): wall time on a machine shared by several test runs says more about
# the neighbours than about the command (alone it is about 0.5 s).
BUDGET_S = 2.0


def credentials_file(tmp_path: Path) -> Path:
    """Application Default Credentials as `gcloud auth application-default login` writes them.
    Preflight only reads the file: nothing here is ever sent anywhere."""
    path = tmp_path / "adc.json"
    path.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "preflight-test.apps.googleusercontent.com",
                "client_secret": "not-a-real-client-secret",
                "refresh_token": "not-a-real-refresh-token",
            }
        )
    )
    return path


def bin_with(tmp_path: Path, *tools: str) -> str:
    """A PATH holding only the named tools (and nothing else a test did not choose)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found, f"{tool} is not installed"
        (folder / tool).symlink_to(found)
    return str(folder)


def fake_terraform(tmp_path: Path, version: str) -> str:
    folder = tmp_path / "oldbin"
    folder.mkdir()
    script = folder / "terraform"
    script.write_text(f"#!/bin/sh\necho '{json.dumps({'terraform_version': version})}'\n")
    script.chmod(0o755)
    return str(folder)


def run(
    tmp_path: Path,
    purpose: str,
    *,
    path: str,
    credentials: Path | None,
    project: str = PROJECT,
    secret_manager: str = "",
    extra: str = "",
    service_usage: str = "",
    measured: bool = False,
) -> tuple[subprocess.CompletedProcess[str], float]:
    """The preflight's result and, when `measured`, its CPU seconds in a new interpreter, start-up
    and imports included (the budget is the user's); otherwise forked from tests/cli_fork.py's
    server, and the CPU is NaN, which no budget admits."""
    config = tmp_path / "deploy.toml"
    config.write_text((f'project = "{project}"\n' if project else "") + extra)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT")
    }
    env.update(
        PATH=path,
        DEPLOY_CONFIG=str(config),
        # No gcloud configuration of the developer's, no metadata-server probe.
        CLOUDSDK_CONFIG=str(tmp_path / "gcloud"),
        NO_GCE_CHECK="true",
        GCE_METADATA_HOST="127.0.0.1:9",
        SECRETMANAGER_EMULATOR_HOST=secret_manager,
        SERVICEUSAGE_EMULATOR_HOST=service_usage,
    )
    if credentials is not None:
        env["GOOGLE_APPLICATION_CREDENTIALS"] = str(credentials)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Resource Manager's testIamPermissions answers as for a project owner (test_permissions.py
    # covers an account that lacks some).
    with FakeResourceManager() as rm:
        env["RESOURCEMANAGER_EMULATOR_HOST"] = rm.host
        if not measured:
            return cli_fork.run(["preflight", purpose], env=env, timeout=60), math.nan
        result = subprocess.run(
            [sys.executable, "-m", "tpudeploy", "preflight", purpose],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result, cpu


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_without_terraform_one_line_with_the_fix(tmp_path: Path) -> None:
    result, took = run(
        tmp_path,
        "deploy",
        path=bin_with(tmp_path),
        credentials=credentials_file(tmp_path),
        measured=True,
    )
    assert result.returncode == 1
    assert lines(result.stderr) == [
        "preflight: terraform is not on PATH: install Terraform 1.11.4 (the tested version; "
        ">= 1.5.0 works) from developer.hashicorp.com/terraform/install and put it on PATH"
    ]
    assert took < BUDGET_S, took


def test_without_credentials_one_line_with_the_fix(tmp_path: Path) -> None:
    result, took = run(
        tmp_path, "destroy", path=bin_with(tmp_path, "terraform"), credentials=None, measured=True
    )
    assert result.returncode == 1
    (line,) = lines(result.stderr)
    assert line.startswith("preflight: no Google Cloud credentials")
    assert "gcloud auth application-default login" in line
    assert "Traceback" not in result.stderr
    assert took < BUDGET_S, took


def test_a_credentials_path_that_does_not_exist_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"
    result, _ = run(tmp_path, "diff", path=bin_with(tmp_path, "terraform"), credentials=missing)
    (line,) = lines(result.stderr)
    assert f"GOOGLE_APPLICATION_CREDENTIALS={missing} is not a file" in line


def test_every_failure_at_once_each_on_its_line(tmp_path: Path) -> None:
    result, took = run(
        tmp_path, "deploy", path=bin_with(tmp_path), credentials=None, project="", measured=True
    )
    found = lines(result.stderr)
    assert [line.split(":", 2)[1].strip() for line in found] == [
        "terraform is not on PATH",
        "no Google Cloud credentials; run `gcloud auth application-default login` (or set "
        "GOOGLE_APPLICATION_CREDENTIALS to a credentials file), then try again",
        "no project",
    ]
    assert 'set project = "my-project"' in found[2] and "GOOGLE_CLOUD_PROJECT" in found[2]
    assert took < BUDGET_S, took


def test_terraform_older_than_the_stacks_accept(tmp_path: Path) -> None:
    path = fake_terraform(tmp_path, "1.4.6")
    result, _ = run(tmp_path, "destroy", path=path, credentials=credentials_file(tmp_path))
    (line,) = lines(result.stderr)
    assert "Terraform 1.4.6" in line and "older than 1.5.0" in line and "install" in line


@pytest.mark.parametrize(
    ("secrets", "state", "says"),
    [
        pytest.param({}, {}, [f"secret {HF} does not exist", "make deploy-secrets"], id="no-stack"),
        pytest.param(
            {HF: [], KEY: ["k"]}, {}, [f"secret {HF} has no version", "make secret"], id="no-token"
        ),
        pytest.param(
            {HF: ["t"], KEY: []}, {}, [f"secret {KEY} has no version", "make api-key"], id="no-key"
        ),
        # The TPU VM's node reads the deployment's one certificate at boot, as GKE's pods do.
        pytest.param(
            {HF: ["t"], KEY: ["k"], TLS: []},
            {},
            [f"secret {TLS} has no version", "make tls-cert"],
            id="no-certificate",
        ),
        pytest.param(
            {HF: ["t"], KEY: ["k"], TLS: ["c"]},
            {HF: "DISABLED"},
            [f"latest version of {HF} is disabled", "make secret"],
            id="disabled",
        ),
    ],
)
def test_deploy_refuses_until_the_secrets_are_in_place(
    tmp_path: Path, secrets: dict[str, list[str]], state: dict[str, str], says: list[str]
) -> None:
    with FakeSecretManager(secrets, latest_state=state) as sm:
        result, took = run(
            tmp_path,
            "deploy",
            path=bin_with(tmp_path, "terraform"),
            credentials=credentials_file(tmp_path),
            secret_manager=sm.host,
            measured=True,
        )
        # Metadata only: no call reads a secret's value.
        assert all(not r["path"].endswith(":access") for r in sm.requests)
    assert result.returncode == 1, result.stdout
    refusals = lines(result.stderr)
    assert refusals, result.stdout
    for fragment in says:
        assert fragment in refusals[0], refusals
    assert took < BUDGET_S, took


def test_deploy_passes_with_the_secrets_in_place(tmp_path: Path) -> None:
    with FakeSecretManager({HF: ["t"], KEY: ["k"], TLS: ["c"]}) as sm:
        result, took = run(
            tmp_path,
            "deploy",
            path=bin_with(tmp_path, "terraform"),
            credentials=credentials_file(tmp_path),
            secret_manager=sm.host,
            measured=True,
        )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    (line,) = lines(result.stdout)
    assert line.startswith("preflight for deploy: terraform 1.")
    assert f"project {PROJECT}" in line and f"{HF} has a version" in line
    assert took < BUDGET_S, took


def test_a_secret_it_may_not_look_at_is_a_note_not_a_refusal(tmp_path: Path) -> None:
    """A GitOps deploy identity may manage a secret without reading its versions' metadata:
    preflight says what it could not check instead of blocking the pipeline."""
    with FakeSecretManager({HF: ["t"], KEY: ["k"], TLS: ["c"]}, forbidden=frozenset({HF})) as sm:
        result, _ = run(
            tmp_path,
            "deploy",
            path=bin_with(tmp_path, "terraform"),
            credentials=credentials_file(tmp_path),
            secret_manager=sm.host,
        )
    assert result.returncode == 0, result.stderr
    (note,) = lines(result.stderr)
    assert note.startswith(f"preflight: note: cannot tell whether {HF} has a version")
    assert "make secret" in note


@pytest.mark.parametrize("purpose", ["deploy-secrets", "diff", "destroy"])
def test_only_a_deploy_needs_the_secrets(tmp_path: Path, purpose: str) -> None:
    with FakeSecretManager({}) as sm:
        result, _ = run(
            tmp_path,
            purpose,
            path=bin_with(tmp_path, "terraform"),
            credentials=credentials_file(tmp_path),
            secret_manager=sm.host,
        )
        assert sm.requests == []
    assert result.returncode == 0, result.stderr


def test_a_guard_rail_refuses_before_a_deploy_but_never_a_destroy(tmp_path: Path) -> None:
    refused = "[vllm]\ngpu_memory_utilization = 0.95\n"
    path, credentials = bin_with(tmp_path, "terraform"), credentials_file(tmp_path)
    diff, _ = run(tmp_path, "diff", path=path, credentials=credentials, extra=refused)
    assert diff.returncode == 2
    assert "vllm.gpu_memory_utilization = 0.95" in diff.stderr
    destroy, _ = run(tmp_path, "destroy", path=path, credentials=credentials, extra=refused)
    assert destroy.returncode == 0, destroy.stderr


@pytest.mark.parametrize(("switch", "on_gce"), [("true", False), ("True", True), ("", True)])
def test_the_gce_switch_is_read_as_google_auth_reads_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, switch: str, on_gce: bool
) -> None:
    """Preflight's answer is the one google.auth.default() will act on: google-auth 2.63 skips
    the machine's Google check for NO_GCE_CHECK exactly "true" (compute_engine/_metadata.py) and
    goes on to the metadata server for any other spelling, "True" included."""
    from google.auth.compute_engine import _metadata

    from tpudeploy import preflight

    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))  # no ADC file there
    monkeypatch.setenv("NO_GCE_CHECK", switch)
    monkeypatch.setattr(_metadata, "detect_gce_residency_linux", lambda: True)
    check = preflight.check_credentials()
    assert check.ok is on_gce
    if on_gce:
        assert check.line == "credentials from this Google Cloud machine's service account"
    else:
        assert check.line.startswith("no Google Cloud credentials")


def test_a_private_node_without_the_stacks_nat_is_noted(tmp_path: Path) -> None:
    """enable_external_ip = false with nat = false: the egress is the user's (issue 21)."""
    private = "[network]\nenable_external_ip = false\nnat = false\n"
    path = bin_with(tmp_path, "terraform")
    result, _ = run(
        tmp_path,
        "diff",
        path=path,
        credentials=credentials_file(tmp_path),
        extra=private,
    )
    assert result.returncode == 0, result.stderr
    (note,) = lines(result.stderr)
    assert note.startswith("preflight: note: the node has no external address")
    assert "stops at pulling-image" in note
    with_nat, _ = run(
        tmp_path,
        "diff",
        path=path,
        credentials=credentials_file(tmp_path),
        extra="[network]\nenable_external_ip = false\n",
    )
    assert with_nat.returncode == 0 and with_nat.stderr == ""


GKE = parse_config({"project": PROJECT, "platform": "gke"})


@pytest.mark.parametrize("monitoring", [False, True])
def test_a_gke_deploy_needs_monitoring_enabled_and_the_shared_certificate(
    tmp_path: Path, monitoring: bool
) -> None:
    """Issue 25: Managed Prometheus and the HPA's metric need monitoring.googleapis.com; the
    secrets stack enables it since the dashboard (issue 38), so a disabled one is a note, not
    a refusal. The front door's one certificate (`make tls-cert`) is a third secret."""
    from tools.rehearsal.fakes.serviceusage import FakeServiceUsage

    with (
        FakeSecretManager({HF: ["t"], KEY: ["k"], GKE.tls_secret_id: []}) as sm,
        FakeServiceUsage() as su,
    ):
        if monitoring:
            su.inventory.enable(PROJECT, "monitoring.googleapis.com")
        result, _ = run(
            tmp_path,
            "deploy",
            path=bin_with(tmp_path, "terraform"),
            credentials=credentials_file(tmp_path),
            secret_manager=sm.host,
            extra='platform = "gke"\n',
            service_usage=su.host,
        )
        asked = {r["path"].rsplit("/", 1)[1] for r in su.requests}
    assert asked == {"container.googleapis.com", "monitoring.googleapis.com"}
    assert result.returncode == 1
    refusals = [x for x in lines(result.stderr) if "note:" not in x]
    notes = [x for x in lines(result.stderr) if "note:" in x]
    assert len(refusals) == 1 and "make tls-cert" in refusals[0], refusals
    if not monitoring:
        assert any(
            "monitoring.googleapis.com is not enabled yet: the deploy enables it" in n
            for n in notes
        ), notes
    assert GKE.tls_secret_id in refusals[0]
    # The cluster stack enables the container API itself: a note, never a refusal.
    assert any(
        "container.googleapis.com is not enabled yet: the deploy enables it" in n for n in notes
    ), notes


def test_a_gateway_needs_the_network_services_and_certificate_manager_apis() -> None:
    """Issue 36, settled by reading: GKE Inference Gateway asks for the Network Services API
    (deploy-gke-inference-gateway, "Before you begin"), the Gateway's certificate is a Certificate
    Manager one; no stack enables either, so preflight refuses with the command that does."""
    from tpudeploy.preflight import check_apis

    routed = parse_config(
        {
            "project": PROJECT,
            "platform": "gke",
            "gke": {"min_version": facts.GKE_INFERENCE_CRDS_MIN_VERSION},
            "routing": {
                "gateway": True,
                "certificate": "gemma4-gateway",
                "proxy_subnet_cidr": "10.0.32.0/23",
            },
        }
    )
    enabled = {"container.googleapis.com", "monitoring.googleapis.com"}
    checks = check_apis(routed, lambda _p, s: "ENABLED" if s in enabled else "DISABLED")
    refused = sorted(c.line.split(" ")[0] for c in checks if not c.ok)
    assert refused == ["certificatemanager.googleapis.com", "networkservices.googleapis.com"]
    assert not [c for c in check_apis(GKE, lambda _p, s: "ENABLED") if not c.ok]
