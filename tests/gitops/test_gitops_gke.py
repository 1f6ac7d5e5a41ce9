"""GKE files in the GitOps pipeline (issue 41): routing, stacks, job limits, billing, recovery,
and the plan report's three stacks with the replica cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tpudeploy import gitops
from tpudeploy.config import load_config, parse_config
from tpudeploy.gitops import GitopsError
from tpudeploy.gitops.recovery import candidates
from tpudeploy.platform import platform_for, summary_lines


def write(root: Path, rel: str, body: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """One TPU VM and two GKE deployments in one project: each keeps its own stacks."""
    write(
        tmp_path,
        "deployments/staging.toml",
        'name = "staging"\nstate_bucket = "tfstate-x"\npipeline = true\nprovisioning = "spot"\n',
    )
    write(
        tmp_path,
        "deployments/gke-a.toml",
        'name = "gke-a"\nplatform = "gke"\nstate_bucket = "tfstate-x"\npipeline = true\n',
    )
    write(
        tmp_path,
        "deployments/gke-b.toml",
        'name = "gke-b"\nplatform = "gke"\nstate_bucket = "tfstate-x"\npipeline = true\n'
        'max_run_duration = "2h"\n',
    )
    return tmp_path


def by_name(root: Path) -> dict[str, gitops.Deployment]:
    return {d.name: d for d in gitops.pipeline_deployments(root)}


def test_gke_files_join_the_pipeline_with_their_own_stacks(repo: Path) -> None:
    found = by_name(repo)
    assert set(found) == {"staging", "gke-a", "gke-b"}
    entries = {n: d.matrix_entry() for n, d in found.items()}
    assert entries["gke-a"]["platform"] == "gke"
    assert entries["gke-a"]["stacks"].split() == ["gke-a-secrets", "gke-a-gke", "gke-a-serving"]
    assert entries["gke-b"]["stacks"].split() == ["gke-b-secrets", "gke-b-gke", "gke-b-serving"]
    assert entries["staging"]["platform"] == "tpu-vm"
    assert entries["staging"]["stacks"].split() == ["staging-secrets", "staging-node"]
    # Two deployments of one project never share a stack, an environment or a deploy identity.
    for key in ("stacks", "environment", "deploy_account"):
        values = [e[key] for e in entries.values()]
        words = [w for v in values for w in v.split()]
        assert len(words) == len(set(words)), key


def test_a_gke_file_without_remote_state_is_refused_like_a_tpu_vm_file(repo: Path) -> None:
    write(repo, "deployments/gke-c.toml", 'name = "gke-c"\nplatform = "gke"\npipeline = true\n')
    with pytest.raises(GitopsError, match=r"deployments/gke-c.toml: state_bucket is not set"):
        gitops.pipeline_deployments(repo)


def test_an_unknown_platform_is_refused_with_the_file_named(repo: Path) -> None:
    write(
        repo,
        "deployments/x.toml",
        'name = "xx-1"\nplatform = "eks"\nstate_bucket = "b"\npipeline = true\n',
    )
    with pytest.raises(GitopsError, match=r"x.toml: platform = 'eks' is not a platform; use"):
        gitops.pipeline_deployments(repo)


def _shipped() -> list[Path]:
    return [REPO_ROOT / "deploy.toml", *sorted((REPO_ROOT / "deployments").glob("*.toml"))]


@pytest.mark.parametrize("path", _shipped(), ids=lambda p: p.name)
@pytest.mark.parametrize("platform", ["tpu-vm", "gke"])
def test_stack_names_are_the_platforms(path: Path, platform: str, tmp_path: Path) -> None:
    """deployments.py names the stacks from the TOML alone (no pydantic before `make install`);
    tpudeploy.platform is the truth: every shipped file, as either platform."""
    import tomllib

    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["platform"] = platform
    if platform == "tpu-vm":
        data.pop("gke", None)
        data.pop("deadline", None)
    cfg = parse_config(data)
    body = f'name = "{cfg.name}"\nplatform = "{platform}"\n'
    write(tmp_path, "deploy.toml", body)
    (dep,) = gitops.discover(tmp_path)
    assert dep.stacks == platform_for(cfg).stacks(cfg)


def test_the_shipped_gke_example_is_in_the_pipeline() -> None:
    (gke,) = [d for d in gitops.pipeline_deployments(REPO_ROOT) if d.platform == "gke"]
    cfg = load_config(REPO_ROOT / gke.config)
    assert gke.matrix_entry()["stacks"].split() == list(platform_for(cfg).stacks(cfg))
    # The cluster's deadline as tpudeploy.config computes it (the top-level max_run_duration,
    # whose GKE default is spot's), read here without pydantic.
    assert gke.deadline_seconds == cfg.deadline_seconds is not None


@pytest.mark.parametrize(
    "body",
    [
        "",
        'max_run_duration = "3h"\n',
        'max_run_duration = "none"\n',
        'provisioning = "spot"\nmax_run_duration = "none"\n',
        'provisioning = "flex-start"\n',
    ],
)
def test_a_gke_deadline_is_the_configs(tmp_path: Path, body: str) -> None:
    """A GKE cluster's deadline is the top-level max_run_duration whatever `provisioning` says;
    "none" bills with no end."""
    data = 'name = "gke-a"\nplatform = "gke"\n' + body
    write(tmp_path, "deploy.toml", data)
    (dep,) = gitops.discover(tmp_path)
    import tomllib

    cfg = parse_config(tomllib.loads(data))
    assert dep.deadline_seconds == cfg.deadline_seconds
    assert dep.bills_forever == (cfg.deadline_seconds is None)


def test_the_gke_deploy_job_outlasts_terraforms_own_create_timeouts(repo: Path) -> None:
    """No capacity wait in a GKE deploy (the autoscaler provisions TPU nodes after the apply),
    but Terraform's create timeouts along the chain, which the job must outlast so that
    Terraform, not the runner, ends a slow create and records it in state: container API 20,
    cluster 40, node pools 30 (side by side), the serving stack's waiting objects 10 (the
    providers' defaults, read from their source)."""
    found = by_name(repo)
    gke = found["gke-a"]
    assert gke.deploy_timeout_minutes >= 20 + 40 + 30 + 10 + 10
    # The flex-start capacity wait is the TPU VM's: it does not change a GKE job's limit.
    write(
        repo,
        "deployments/gke-a.toml",
        'name = "gke-a"\nplatform = "gke"\nstate_bucket = "b"\npipeline = true\n'
        'flex_start_timeout = "6h"\n',
    )
    assert by_name(repo)["gke-a"].deploy_timeout_minutes == gke.deploy_timeout_minutes
    # Destroy: the serving stack (Service 20, namespace 5), then the cluster stack (pools 30,
    # cluster 40), with make destroy-cluster's own second run.
    assert gke.destroy_timeout_minutes >= 20 + 5 + 30 + 40 + 10
    # GitHub caps a job at 6 hours.
    assert gke.deploy_timeout_minutes < 360 and gke.destroy_timeout_minutes < 360


def test_the_billing_check_says_what_ends_a_gke_deployments_billing(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        repo,
        "deployments/gke-forever.toml",
        'name = "gke-forever"\nplatform = "gke"\nstate_bucket = "b"\npipeline = true\n'
        'max_run_duration = "none"\n',
    )
    findings = {f.message.split(":")[0]: f for f in gitops.static_billing(gitops.discover(repo))}
    a, b = findings["deployments/gke-a.toml"], findings["deployments/gke-b.toml"]
    assert a.level == b.level == "notice"
    assert "Cloud Scheduler job gke-a-deadline deletes its cluster" in a.message
    assert "8 h after each deploy" in a.message and "2 h after each deploy" in b.message
    # [gke] max_run_duration recycles flex-start nodes; it ends nothing, and the line says so.
    assert "[gke] max_run_duration only recycles a flex-start node" in a.message
    forever = findings["deployments/gke-forever.toml"]
    assert forever.level == "warning" and "nothing deletes its cluster" in forever.message
    # staging is spot with the default deadline: nothing to say.
    assert "deployments/staging.toml" not in findings
    root = ["--root", str(repo)]
    assert gitops.main([*root, "billing-check", "--strict"]) == 1  # the warning
    capsys.readouterr()
    (repo / "deployments/gke-forever.toml").unlink()
    # Notices alone fail nothing, not even --strict.
    assert gitops.main([*root, "billing-check", "--strict"]) == 0
    out = capsys.readouterr().out
    assert "::notice::deployments/gke-a.toml: gke-a runs on GKE" in out
    assert out.rstrip().endswith("no node bills without an end time")


def test_a_gke_deadline_is_no_tpu_node_deadline(repo: Path) -> None:
    """The cloud check matches TPU VMs by name; a GKE deadline deletes a cluster instead."""
    hours = gitops.billing.deadline_hours(gitops.discover(repo))
    assert hours == {"staging": 8.0}


def test_recover_never_picks_a_gke_deployment(repo: Path) -> None:
    """GKE has no `make recover`: a GKE file that asks for auto_recover must not start a job
    (no TPU VM of its name exists, so the look would read it as missing)."""
    write(
        repo,
        "deployments/gke-a.toml",
        'name = "gke-a"\nplatform = "gke"\nstate_bucket = "b"\npipeline = true\n'
        'provisioning = "spot"\n'
        "auto_recover = true\n",
    )
    write(
        repo,
        "deployments/staging.toml",
        'name = "staging"\nstate_bucket = "b"\npipeline = true\n'
        'provisioning = "spot"\nauto_recover = true\n',
    )
    assert [d.name for d in candidates(gitops.pipeline_deployments(repo))] == ["staging"]
    # The cluster's deadline job exists (it was deployed): still nothing to recover on GKE.
    jobs = [{"name": "projects/p/locations/us-west4/jobs/gke-a-deadline", "state": "ENABLED"}]
    write(repo, "jobs.json", json.dumps(jobs))
    args = ["--root", str(repo), "recover-select", "--jobs-json", str(repo / "jobs.json")]
    assert gitops.main(args) == 0


def test_the_plan_report_shows_three_stacks_and_the_replica_cost() -> None:
    cfg = load_config(REPO_ROOT / "deployments/gke.toml")
    stacks = platform_for(cfg).stacks(cfg)
    secrets, cluster, serving = stacks
    # As `make diff` prints it when the serving stack's plan failed: no summary of its own.
    output = (
        f"{secrets}  No changes. Your infrastructure matches the configuration.\n"
        f"{cluster}  Plan: 9 to add, 0 to change, 0 to destroy.\n"
        "Error: Kubernetes cluster unreachable\n"
    )
    check = "\n".join(summary_lines(cfg))
    md = gitops.plan_report(
        name=cfg.name,
        config="deployments/gke.toml",
        exit_code=1,
        output=output,
        stacks=stacks,
        check_output=check,
    )
    bullets = [line for line in md.splitlines() if line.startswith("- ")]
    assert bullets[0].startswith(f"- {secrets}  No changes.")
    assert bullets[1] == f"- {cluster}  Plan: 9 to add, 0 to change, 0 to destroy."
    assert bullets[2].startswith(f"- {serving}: no plan summary in the output")
    assert bullets[3] == "- Error: Kubernetes cluster unreachable"
    # The replica cost summary `make check` prints, line for line, under the plan.
    for prefix in ("replicas:", "cost:", "idle floor:", "$/M output tokens:", "billing stops:"):
        (line,) = [c for c in check.splitlines() if c.startswith(prefix)]
        assert f"- {line}" in bullets, prefix
    assert any(b.startswith("- deadline: Cloud Scheduler job gemma4-gke-deadline") for b in bullets)


def test_the_plan_report_cli_takes_the_stacks_and_the_check_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.txt"
    plan.write_text("g-secrets  No changes.\n", encoding="utf-8")
    check = tmp_path / "check.txt"
    check.write_text("warning: x\ncost: $0.7812/h at 1 replica(s)\n", encoding="utf-8")
    base = ["plan-report", "--name", "g-1", "--config", "deployments/g.toml", "--exit-code", "0"]
    args = [*base, "--stacks", "g-1-secrets g-1-gke g-1-serving", "--check-output", str(check)]
    assert gitops.main(["--root", str(tmp_path), *args, str(plan)]) == 0
    out = capsys.readouterr().out
    assert "- g-1-gke: no plan summary in the output" in out
    assert "- cost: $0.7812/h at 1 replica(s)" in out and "warning: x" not in out.split("<det")[0]
    # A stack of another deployment is refused: the report must not mislabel a plan.
    bad = [*base, "--stacks", "other-serving", str(plan)]
    assert gitops.main(["--root", str(tmp_path), *bad]) == 2
    assert "'other-serving' is not a stack of g-1" in capsys.readouterr().err


def test_a_pipeline_gke_deployments_tls_secret_is_declared(boot: dict[str, object]) -> None:
    import yaml

    from tests.conftest import resources

    cfg = load_config(REPO_ROOT / "deployments/gke.toml")
    bootstrap = {r["secret_id"] for r in resources(boot, "google_secret_manager_secret").values()}
    # The inventory is what tests/stacks/test_inventories.py holds equal to the synthesized
    # pipeline-mode stacks of deployments/gke.toml.
    inventory = yaml.safe_load((REPO_ROOT / "tests/inventories/deployments-gke.yaml").read_text())
    stack = inventory[cfg.secrets_stack_name]["resources"]
    own = {
        v["secret_id"] for k, v in stack.items() if k.startswith("google_secret_manager_secret.")
    }
    assert cfg.tls_secret_id in bootstrap | own
