"""The GitHub workflows: schema, zizmor (offline), and the GitOps rules they must keep."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
BIN = Path(sys.executable).parent
FILES = sorted(WORKFLOWS.glob("*.yml"))
SHA_PIN = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
# Targets the workflows call; the lead's Makefile must define each of them.
MAKE_TARGETS = {
    "install",
    "lint",
    "test",
    "test-slow",
    "synth",
    "scan",
    "diff",
    "deploy",
    "deploy-secrets",
    "destroy",
    "destroy-cluster",
    "recover",
    "check",
    "watch-check",
    "upstream-watch",
}


def load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    # YAML 1.1 reads the bare key `on` as the boolean True.
    if True in doc:
        doc["on"] = doc.pop(True)
    assert isinstance(doc, dict)
    return doc


def steps(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for job in doc["jobs"].values() for s in job.get("steps", [])]


def test_expected_workflows_exist() -> None:
    names = {p.name for p in FILES}
    assert {
        "checks.yml",
        "pull-request.yml",
        "deploy.yml",
        "destroy.yml",
        "drift.yml",
        "recover.yml",
        "upstream-watch.yml",
    } <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_schema(path: Path) -> None:
    result = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _zizmor(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "zizmor"), "--offline", "--format", "json", "--no-progress", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_zizmor_offline_has_no_findings() -> None:
    result = _zizmor(*FILES)
    findings = json.loads(result.stdout or "[]")
    summary = [(f["ident"], f["locations"][0]["symbolic"]["key"]) for f in findings]
    assert result.returncode == 0 and findings == [], summary or result.stderr


def test_zizmor_catches_an_injection(tmp_path: Path) -> None:
    """The gate above can fail: the same invocation flags a classic template injection."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: pull_request\npermissions: {}\njobs:\n  x:\n    runs-on: ubuntu-24.04\n"
        "    steps:\n      - run: echo ${{ github.event.pull_request.title }}\n",
        encoding="utf-8",
    )
    result = _zizmor(bad)
    assert result.returncode != 0
    assert "template-injection" in {f["ident"] for f in json.loads(result.stdout)}


def test_four_triggers() -> None:
    assert "pull_request" in load("pull-request.yml")["on"]
    assert load("deploy.yml")["on"]["push"]["branches"] == ["main"]
    dispatch = load("destroy.yml")["on"]["workflow_dispatch"]
    assert dispatch["inputs"]["deployment"]["required"] is True
    assert load("drift.yml")["on"]["schedule"][0]["cron"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_file_wide_rules(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    doc = load(path.name)
    code = "\n".join(
        line.split(" #")[0] for line in text.splitlines() if not line.lstrip().startswith("#")
    )
    assert "pull_request_target" not in doc["on"] and "pull_request_target" not in code
    assert "credentials_json" not in code
    # WIF only: no stored secret of any kind is read by these workflows.
    assert "secrets." not in code
    assert doc["permissions"] == {}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_uses_pinned_to_full_sha_with_version(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    doc = load(path.name)
    refs = [s["uses"] for s in steps(doc) if "uses" in s]
    refs += [j["uses"] for j in doc["jobs"].values() if "uses" in j]
    for ref in refs:
        if ref.startswith("./"):
            continue
        assert SHA_PIN.match(ref), f"{ref} is not pinned to a 40-hex commit"
        assert re.search(re.escape(ref) + r" # v\d+\.\d+\.\d+\b", text), f"{ref}: no version"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_checkout_never_persists_credentials(path: Path) -> None:
    for step in steps(load(path.name)):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_expressions_inside_run_scripts(path: Path) -> None:
    """Event data and inputs reach scripts only through env, never by textual expansion."""
    for step in steps(load(path.name)):
        assert "${{" not in step.get("run", ""), step.get("name", step["run"][:40])


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_cloud_credentials_only_where_declared(path: Path) -> None:
    for name, job in load(path.name)["jobs"].items():
        perms = job.get("permissions", {})
        auth = [
            s for s in job.get("steps", []) if "google-github-actions/auth@" in s.get("uses", "")
        ]
        assert bool(auth) == (perms.get("id-token") == "write"), f"{path.name}:{name}"
        for step in auth:
            assert step["with"]["workload_identity_provider"] == (
                "${{ vars.GCP_WORKLOAD_IDENTITY_PROVIDER }}"
            )
        # The token that writes to the repository never shares a job with cloud credentials.
        assert not (
            "id-token" in perms and any(v == "write" for k, v in perms.items() if k != "id-token")
        )


def test_pull_request_plan_only_for_same_repository() -> None:
    jobs = load("pull-request.yml")["jobs"]
    fork_guard = "github.event.pull_request.head.repo.full_name == github.repository"
    for name, job in jobs.items():
        perms = job.get("permissions", {})
        if perms.get("id-token") == "write" or perms.get("pull-requests") == "write":
            assert fork_guard in job["if"], name
    assert jobs["plan"]["permissions"] == {"contents": "read", "id-token": "write"}
    assert jobs["checks"]["permissions"] == {"contents": "read"}
    # Plans never take the state lock, so cancelling an outdated one is safe.
    assert jobs["plan"]["env"]["TF_CLI_ARGS_plan"] == "-lock=false"
    assert load("pull-request.yml")["concurrency"]["cancel-in-progress"] is True


def test_deploy_is_gated_and_serialized() -> None:
    deploy = load("deploy.yml")["jobs"]["deploy"]
    assert deploy["environment"]["name"] == "${{ matrix.environment }}"
    assert deploy["concurrency"]["cancel-in-progress"] is False
    assert "matrix.name" in deploy["concurrency"]["group"]
    assert set(deploy["needs"]) == {"checks", "changes"}
    destroy = load("destroy.yml")["jobs"]["destroy"]
    assert destroy["concurrency"]["cancel-in-progress"] is False
    assert "environment" in destroy
    # Deploy and destroy of one deployment share a group: never both at once.
    prefix = deploy["concurrency"]["group"].split("${{")[0]
    assert destroy["concurrency"]["group"].startswith(prefix)


def test_recover_is_gated_serialized_and_started_only_when_needed() -> None:
    jobs = load("recover.yml")["jobs"]
    recover, select = jobs["recover"], jobs["select"]
    assert recover["environment"]["name"] == "${{ matrix.environment }}"
    assert recover["concurrency"]["cancel-in-progress"] is False
    # The deploy workflow's group: never during an apply or a destroy of the deployment.
    deploy = load("deploy.yml")["jobs"]["deploy"]
    assert recover["concurrency"]["group"] == deploy["concurrency"]["group"]
    assert recover["needs"] == "select" and "matrix != '[]'" in recover["if"]
    assert "environment" not in select and "concurrency" not in select
    script = "\n".join(s.get("run", "") for s in recover["steps"])
    assert "make recover" in script and "make deploy" not in script
    chooser = "\n".join(s.get("run", "") for s in select["steps"])
    assert "tpudeploy.gitops recover-select" in chooser and "GITHUB_STEP_SUMMARY" in chooser
    assert "schedule" in load("recover.yml")["on"]


def test_destroy_input_goes_through_validation() -> None:
    resolve = load("destroy.yml")["jobs"]["resolve"]
    step = next(s for s in resolve["steps"] if s.get("id") == "resolve")
    assert step["env"]["DEPLOYMENT_INPUT"] == "${{ inputs.deployment }}"
    assert "tpudeploy.gitops resolve" in step["run"]
    assert "permissions" in resolve and "id-token" not in resolve["permissions"]


def test_drift_plan_uses_detailed_exitcode() -> None:
    jobs = load("drift.yml")["jobs"]
    script = "\n".join(s.get("run", "") for s in jobs["plan"]["steps"])
    assert "-detailed-exitcode" in script and '"${code}" -eq 2' in script
    billing = "\n".join(s.get("run", "") for s in jobs["billing"]["steps"])
    assert "tpudeploy.gitops billing-check" in billing


def test_make_targets_exist_in_makefile() -> None:
    used = set()
    for path in FILES:
        for step in steps(load(path.name)):
            used |= set(re.findall(r"\bmake ([a-z][\w-]*)", step.get("run", "")))
    assert used <= MAKE_TARGETS, used - MAKE_TARGETS
    makefile = ROOT / "Makefile"
    if not makefile.exists():
        pytest.skip("no Makefile yet")
    defined = set(re.findall(r"^([a-z][\w-]*)\s*:", makefile.read_text(encoding="utf-8"), re.M))
    assert used <= defined, f"Makefile lacks targets the workflows call: {used - defined}"


def _auth_steps(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, s["with"])
        for name, job in doc["jobs"].items()
        for s in job.get("steps", [])
        if "google-github-actions/auth@" in s.get("uses", "")
    ]


def test_deploy_identities_only_in_the_deploy_workflows() -> None:
    """The bootstrap's federation admits a deploy identity only for environment jobs of these
    files (as committed on main); every other job authenticates as the read-only plan identity."""
    from tpudeploy.bootstrap_config import DEPLOY_WORKFLOWS, WATCH_WORKFLOW

    assert {p.name for p in FILES} >= set(DEPLOY_WORKFLOWS)
    suffix = "@${{ vars.GCP_PROJECT }}.iam.gserviceaccount.com"
    expected = {
        "deploy.yml": "${{ matrix.deploy_account }}" + suffix,
        "destroy.yml": "${{ needs.resolve.outputs.deploy_account }}" + suffix,
        "recover.yml": "${{ matrix.deploy_account }}" + suffix,
    }
    plan = "${{ vars.GCP_PLAN_SERVICE_ACCOUNT }}"
    deploy_jobs = set()
    for path in FILES:
        for job, auth in _auth_steps(load(path.name)):
            gated = "environment" in load(path.name)["jobs"][job]
            if path.name == WATCH_WORKFLOW:
                # The watch's own identity, in its own environment's job only.
                assert gated and job == "watch", job
                assert auth["service_account"] == (
                    "${{ needs.gate.outputs.deploy_account }}" + suffix
                )
            elif path.name in DEPLOY_WORKFLOWS and gated:
                # An environment job: its reviewers and branch rule gate the apply.
                assert auth["service_account"] == expected[path.name], (path.name, job)
                deploy_jobs.add(path.name)
            else:
                assert auth["service_account"] == plan, (path.name, job)
    assert deploy_jobs == set(DEPLOY_WORKFLOWS)
    resolve = load("destroy.yml")["jobs"]["resolve"]["outputs"]
    assert resolve["deploy_account"] == "${{ steps.resolve.outputs.deploy_account }}"


def test_every_workflow_installs_the_terraform_version_the_tests_run() -> None:
    from tests.conftest import TERRAFORM_TESTED_VERSION

    found = {}
    for path in WORKFLOWS.glob("*.yml"):
        for step in (s for job in load(path.name)["jobs"].values() for s in job.get("steps", [])):
            if str(step.get("uses", "")).startswith("hashicorp/setup-terraform@"):
                found[path.name] = step["with"]["terraform_version"]
    assert set(found) >= {"checks.yml", "deploy.yml", "destroy.yml"}, found
    assert set(found.values()) == {TERRAFORM_TESTED_VERSION}, found
    checks = load("checks.yml")["jobs"]["checks"]["steps"]
    test_step = next(s for s in checks if s.get("run") == "make test")
    assert test_step["env"]["CI"] == "true"


def test_deploy_and_destroy_job_limits_come_from_the_deployment() -> None:
    deploy = load("deploy.yml")["jobs"]["deploy"]
    assert deploy["timeout-minutes"] == "${{ fromJSON(matrix.timeout_minutes) }}"
    destroy = load("destroy.yml")["jobs"]
    assert destroy["destroy"]["timeout-minutes"] == (
        "${{ fromJSON(needs.resolve.outputs.destroy_timeout_minutes) }}"
    )
    assert "destroy_timeout_minutes" in destroy["resolve"]["outputs"]


def _recipe(target: str) -> list[str]:
    """The command lines of one Makefile target (its tab-indented lines)."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    body = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)*)", text, re.M)
    assert body, f"no target {target} in the Makefile"
    return [line.strip() for line in body.group(1).splitlines()]


def test_the_modules_run_first_exist() -> None:
    """conftest.LONGEST_FIRST schedules by file name: a renamed module would silently drop out."""
    from tests.conftest import LONGEST_FIRST

    # Test files sit in folders by package (tests/<package>/): the name is found in one of them.
    assert [name for name in LONGEST_FIRST if not list((ROOT / "tests").rglob(name))] == []


def test_the_test_targets_keep_bytecode_caches() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    line = re.search(r"^([\w -]+): export PYTHONDONTWRITEBYTECODE =$", makefile, re.M)
    assert line and set(line[1].split()) >= {"test", "test-slow", "mutants"}


def test_the_slow_tier_is_out_of_make_test_but_never_out_of_ci() -> None:
    """Issue 23, item 9: `make test` runs in minutes without the slow tiers; `.ci/run` and the
    checks workflow run `make test-slow` after it: the rehearsal matrix and the slow_tier tests,
    then the mutation tests (make mutants' own command, so what CI runs is what a developer
    runs)."""
    assert _recipe("test") == ['$(PYTEST) -m "not ($(SLOW_TIER))"']
    assert _recipe("test-slow") == ['$(PYTEST) -m "$(SLOW_TIER)"', "$(MUTANTS)"]
    assert _recipe("mutants") == ["$(MUTANTS)"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^MUTANTS = \$\(PY\) -m tools\.mutants\b", makefile, re.M)
    # Every marker of the slow tier is one pytest knows (pyproject.toml).
    tier = re.search(r"^SLOW_TIER = (.+)$", makefile, re.M)
    assert tier and tier[1] == "rehearsal or lifecycle or slow_tier"
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert {m.split(":")[0] for m in markers["markers"]} >= set(tier[1].split(" or "))
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci.index("make test") < ci.index("make test-slow")
    # The checks job's limit covers every step's minutes with room for a slower runner, and
    # stays well under the 90 minutes CI may take in all. Measured, except the mutation tests
    # (from their CPU time on two shared cores: docs/development.md) and the four scans (a guess).
    minutes = {"install": 3.5, "lint": 1.5, "test": 4, "rehearsal": 18, "mutants": 17, "scan": 6}
    limit = load("checks.yml")["jobs"]["checks"]["timeout-minutes"]
    assert 1.25 * sum(minutes.values()) <= limit < 90
    steps = [s.get("run") for s in load("checks.yml")["jobs"]["checks"]["steps"]]
    assert steps.index("make test") < steps.index("make test-slow")


# ---- GKE deployments in the workflows (issue 41) ----------------------------------------------


def _step(doc: dict[str, Any], job: str, needle: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        s for s in doc["jobs"][job]["steps"] if needle in s.get("run", "")
    ]
    (step,) = found
    return step


def _gke_entry() -> dict[str, str]:
    from tpudeploy import gitops

    (dep,) = [d for d in gitops.pipeline_deployments(ROOT) if d.platform == "gke"]
    return dep.matrix_entry()


def test_drift_plans_every_stack_of_the_matrix_entry(tmp_path: Path) -> None:
    """The drift job's own script, run with a stand-in terraform: a GKE entry's three stacks are
    each planned, in order (it named <name>-secrets and <name>-node before, and failed on GKE)."""
    entry = _gke_entry()
    step = _step(load("drift.yml"), "plan", "-detailed-exitcode")
    log = tmp_path / "terraform.log"
    fake = tmp_path / "bin" / "terraform"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$*" >> {log}\n', encoding="utf-8")
    fake.chmod(0o755)
    for stack in entry["stacks"].split():
        (tmp_path / "cdktf.out/deployments" / entry["name"] / "stacks" / stack).mkdir(parents=True)
    summary = tmp_path / "summary.md"
    env = {
        "PATH": f"{fake.parent}:/usr/bin:/bin",
        "DEPLOYMENT": entry["name"],
        "STACKS": entry["stacks"],
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    result = subprocess.run(
        ["bash", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    planned = [line.split()[0].removeprefix("-chdir=") for line in log.read_text().splitlines()]
    dirs = [f"cdktf.out/deployments/{entry['name']}/stacks/{s}" for s in entry["stacks"].split()]
    assert planned == [d for d in dirs for _ in ("init", "plan")]
    assert summary.read_text().splitlines() == [f"- {s}: in sync" for s in entry["stacks"].split()]
    # A stack the synth did not write fails the check, naming it.
    missing = f"{entry['stacks']} {entry['name']}-extra"
    result = subprocess.run(
        ["bash", "-c", step["run"]],
        cwd=tmp_path,
        env={**env, "STACKS": missing},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and f"{entry['name']}-extra missing after synth" in result.stdout
    assert load("drift.yml")["jobs"]["plan"]["env"]["STACKS"] == "${{ matrix.stacks }}"


def test_destroy_removes_the_cluster_after_the_serving_stack_on_gke_only() -> None:
    doc = load("destroy.yml")
    outputs = doc["jobs"]["resolve"]["outputs"]
    assert outputs["platform"] == "${{ steps.resolve.outputs.platform }}"
    runs = [s.get("run", "") for s in doc["jobs"]["destroy"]["steps"]]
    first = next(i for i, r in enumerate(runs) if r.startswith("make destroy "))
    cluster = next(i for i, r in enumerate(runs) if r.startswith("make destroy-cluster "))
    assert first < cluster
    step = doc["jobs"]["destroy"]["steps"][cluster]
    assert step["if"] == "needs.resolve.outputs.platform == 'gke'"
    # The resolver prints the key the workflow reads (a renamed key would skip the step).
    assert _gke_entry()["platform"] == "gke"


def test_the_plan_report_gets_the_stacks_and_make_checks_cost() -> None:
    doc = load("pull-request.yml")
    script = _step(doc, "plan", "make diff")["run"]
    assert script.index("make check") < script.index("plan-report")
    assert '--stacks "${STACKS}"' in script and "--check-output check.txt" in script
    assert doc["jobs"]["plan"]["env"]["STACKS"] == "${{ matrix.stacks }}"


def _stub_make_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """make with a recording cdktf, no preflight (MAKE=true) and no cloud clean-up: the
    destroy-cluster recipe's own order, without credentials or a network."""
    log = tmp_path / "calls.log"
    cdktf = tmp_path / "cdktf"
    cdktf.write_text(f'#!/bin/sh\necho "cdktf $*" >> {log}\n', encoding="utf-8")
    py = tmp_path / "python"
    py.write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2 $3" = "-m tpudeploy cleanup" ]; then echo cleanup >> {log}; exit 0; fi\n'
        f'exec {ROOT / ".venv/bin/python"} "$@"\n',
        encoding="utf-8",
    )
    for f in (cdktf, py):
        f.chmod(0o755)
    return {"CDKTF": str(cdktf), "PY": str(py), "MAKE": "true"}, log


def test_make_destroy_cluster_lifts_protection_then_destroys_serving_and_cluster(
    tmp_path: Path,
) -> None:
    env, log = _stub_make_env(tmp_path)
    args = [f"{k}={v}" for k, v in env.items()]
    gke = subprocess.run(
        ["make", "-s", "destroy-cluster", "DEPLOY_CONFIG=deployments/gke.toml", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert gke.returncode == 0, gke.stdout + gke.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("cdktf deploy ") and "gemma4-gke-gke " in calls[0]
    assert "--var deletion_protection=false" in calls[0]
    assert calls[1].startswith("cdktf destroy ")
    assert calls[1].split()[-2:] == ["gemma4-gke-serving", "gemma4-gke-gke"]
    assert "gemma4-gke-secrets" not in calls[1]  # the secrets stay
    assert calls[2:] == ["cleanup"]
    log.unlink()
    tpu = subprocess.run(
        ["make", "-s", "destroy-cluster", "DEPLOY_CONFIG=deployments/staging.toml", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert tpu.returncode == 0, tpu.stdout + tpu.stderr
    assert "nothing more to destroy" in tpu.stdout and not log.exists()


# ---- the upstream watch (docs/tuning.md) ----------------------------------------------------


def test_the_upstream_watch_is_off_until_enabled_and_only_its_pr_job_writes() -> None:
    from tpudeploy.bootstrap_config import WATCH_WORKFLOW

    doc = load(WATCH_WORKFLOW)
    jobs = doc["jobs"]
    gate, watch, propose = jobs["gate"], jobs["watch"], jobs["propose"]
    step = next(s for s in gate["steps"] if s.get("id") == "gate")
    assert step["env"]["WATCH_CONFIG"] == "${{ vars.UPSTREAM_WATCH_CONFIG }}"
    assert "python3 -m tpudeploy.upstream.gate" in step["run"]
    assert '--summary "$GITHUB_STEP_SUMMARY"' in step["run"]
    # The gate reads the registry with no credential of any kind.
    assert gate["permissions"] == {"contents": "read"} and not _auth_steps({"jobs": {"g": gate}})
    assert gate["outputs"]["new_build"] == "${{ steps.gate.outputs.new_build }}"
    assert gate["outputs"]["runs_on"] == "${{ steps.gate.outputs.runs_on }}"
    # The paid job: a new build only, and only on the runner the gate names from [watch] runner
    # (a GitHub-hosted runner cannot reach the node: tpudeploy/watchrunner.py).
    assert watch["needs"] == "gate"
    assert watch["if"] == (
        "needs.gate.outputs.new_build == 'true' && needs.gate.outputs.runs_on != '[]'"
    )
    assert watch["runs-on"] == "${{ fromJSON(needs.gate.outputs.runs_on) }}"
    assert watch["environment"]["name"] == "${{ needs.gate.outputs.environment }}"
    assert watch["permissions"] == {"contents": "read", "id-token": "write"}
    assert watch["concurrency"]["cancel-in-progress"] is False
    assert watch["timeout-minutes"] == "${{ fromJSON(needs.gate.outputs.timeout_minutes) }}"
    script = "\n".join(s.get("run", "") for s in watch["steps"])
    assert "make upstream-watch" in script and "make watch-check" in script
    # The budget is checked before the cloud credential exists.
    names = [s.get("name", s.get("uses", "")) for s in watch["steps"]]
    auth = next(i for i, n in enumerate(names) if "google-github-actions/auth@" in n)
    assert names.index("Check the config and the watch's budget") < auth
    upload = next(s for s in watch["steps"] if "upload-artifact@" in s.get("uses", ""))
    assert upload["if"] == "always()"  # the verdict is kept whatever the run concluded
    assert propose["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert propose["if"] == "needs.watch.outputs.proposed == 'true'"
    assert not _auth_steps({"jobs": {"propose": propose}})
    writers = [n for n, j in jobs.items() if "write" in j.get("permissions", {}).values()]
    assert sorted(writers) == ["propose", "watch"]  # watch: id-token only (checked above)


def test_the_upstream_watch_schedule_is_every_watched_deployments() -> None:
    import tomllib

    from tpudeploy.bootstrap_config import WATCH_WORKFLOW
    from tpudeploy.config.watch_table import WatchConfig

    (cron,) = [entry["cron"] for entry in load(WATCH_WORKFLOW)["on"]["schedule"]]
    assert WatchConfig().schedule == cron
    for path in sorted((ROOT / "deployments").glob("*.toml")):
        watch = tomllib.loads(path.read_text(encoding="utf-8")).get("watch")
        if watch is not None:
            assert watch.get("schedule", cron) == cron, path.name


def test_the_watch_workflows_stdlib_steps_run_without_installed_packages(tmp_path: Path) -> None:
    """The gate and the pin writer run before `make install` (python3 -S: no site-packages)."""
    result = subprocess.run(
        [sys.executable, "-S", "-m", "tpudeploy.upstream.gate", "deployments/staging.toml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "enabled=false" in result.stdout.splitlines()
    assert "[watch] enabled is not true" in result.stderr
    result = subprocess.run(
        [sys.executable, "-S", "-m", "tpudeploy.upstream.pinfile", str(tmp_path), "x.toml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1 and "pin.json" in result.stderr, result.stderr
