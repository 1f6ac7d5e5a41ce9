"""tpudeploy.gitops: deployment discovery, change selection, input validation, billing checks."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tpudeploy import gitops
from tpudeploy.config import parse_config
from tpudeploy.gitops import GitopsError

NOW = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


def write(root: Path, rel: str, body: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write(tmp_path, "deploy.toml", 'name = "gemma"\n')
    write(
        tmp_path,
        "deployments/staging.toml",
        'name = "staging"\nstate_bucket = "tfstate-x"\npipeline = true\nprovisioning = "spot"\n'
        'project = "my-project-1"\nzone = "us-central1-a"\n',
    )
    write(
        tmp_path,
        "deployments/production.toml",
        'name = "production"\nstate_bucket = "tfstate-x"\npipeline = true\n'
        'provisioning = "flex-start"\n',
    )
    return tmp_path


def test_discover_lists_default_then_sorted_deployments(repo: Path) -> None:
    found = gitops.discover(repo)
    assert [d.config for d in found] == [
        "deploy.toml",
        "deployments/production.toml",
        "deployments/staging.toml",
    ]
    staging = found[2]
    assert (staging.provisioning, staging.project, staging.zone) == (
        "spot",
        "my-project-1",
        "us-central1-a",
    )
    assert found[1].provisioning == "flex-start"
    # Unset keys take tpudeploy.config's defaults.
    assert (found[0].name, found[0].zone) == ("gemma", "us-west4-a")


def _one(tmp_path: Path, body: str) -> gitops.Deployment:
    write(tmp_path, "deploy.toml", body)
    (dep,) = gitops.discover(tmp_path)
    return dep


def test_defaults_match_the_config_model(tmp_path: Path) -> None:
    """gitops reads TOML without pydantic (it runs before `make install`); same defaults."""
    from tpudeploy.config import DeployConfig

    fields = DeployConfig.model_fields
    assert fields["name"].default == gitops.DEFAULT_NAME
    assert fields["provisioning"].default == gitops.DEFAULT_PROVISIONING
    assert fields["zone"].default == gitops.DEFAULT_ZONE
    assert fields["flex_start_timeout"].default == gitops.DEFAULT_FLEX_START_TIMEOUT
    assert fields[gitops.KEY_PIPELINE].default is False
    assert gitops.NAME_RE.fullmatch(gitops.DEFAULT_NAME)
    for model in ("spot", "on-demand", "flex-start"):
        body = f'provisioning = "{model}"\n'
        assert (
            _one(tmp_path, body).deadline_seconds
            == parse_config({"provisioning": model}).deadline_seconds
        )
    for model in ("spot", "on-demand"):
        body = f'provisioning = "{model}"\nmax_run_duration = "none"\nauto_recover = true\n'
        dep = _one(tmp_path, body)
        assert dep.deadline_seconds is None and dep.bills_forever and dep.auto_recover


def test_deploy_account_ids_fit_and_never_collide() -> None:
    """Service-account ids are 6-30 characters; every deployment name (3-24) must fit, and no
    deployment's deploy identity may share an id with another's node account."""
    from tpudeploy.config import parse_config

    longest = "a" * 23 + "b"
    for name in ("abc", longest):
        cfg = parse_config({"name": name})
        assert cfg.deploy_account_id == gitops.deploy_account_id(name)
        assert 6 <= len(cfg.deploy_account_id) <= 30, cfg.deploy_account_id
        assert re.fullmatch(r"[a-z][a-z0-9-]{4,28}[a-z0-9]", cfg.deploy_account_id)
    # "x-apply" (deploy identity of x) vs "<y>-node" (node account of y): the endings differ.
    names = ["gemma4", "gemma4-apply", "gemma4-node", "apply-node"]
    deploy_ids = {gitops.deploy_account_id(n) for n in names}
    node_ids = {parse_config({"name": n}).service_account_id for n in names}
    assert not deploy_ids & node_ids


def test_unnamed_files_share_the_default_name(tmp_path: Path) -> None:
    write(tmp_path, "deploy.toml", "# all defaults\n")
    write(tmp_path, "deployments/a.toml", 'state_bucket = "b"\npipeline = true\n')
    with pytest.raises(GitopsError, match=r"'gemma4-v5e' is already used by deploy\.toml"):
        gitops.discover(tmp_path)


def test_pipeline_takes_the_local_default_only_with_the_pipeline_key(repo: Path) -> None:
    assert [d.name for d in gitops.pipeline_deployments(repo)] == ["production", "staging"]
    # Issue 37: remote state alone is a teammate's local use (make state-init), not the
    # pipeline's: its stacks declare the node account and secrets the bootstrap would make.
    write(repo, "deploy.toml", 'name = "gemma"\nstate_bucket = "b"\npipeline = false\n')
    assert [d.name for d in gitops.pipeline_deployments(repo)] == ["production", "staging"]
    # Without the key it is ambiguous: state_bucket alone made it a pipeline deployment before
    # the key existed, and silently leaving it out would have the bootstrap plan to destroy the
    # node account and secrets it made. The file must say which.
    write(repo, "deploy.toml", 'name = "gemma"\nstate_bucket = "b"\n')
    with pytest.raises(GitopsError) as err:
        gitops.pipeline_deployments(repo)
    assert str(err.value).startswith("deploy.toml: pipeline is not set to true")
    assert "write pipeline = false" in str(err.value)
    write(repo, "deploy.toml", 'name = "gemma"\n')
    assert [d.name for d in gitops.pipeline_deployments(repo)] == ["production", "staging"]
    write(repo, "deploy.toml", 'name = "gemma"\nstate_bucket = "b"\npipeline = true\n')
    assert next(d.name for d in gitops.pipeline_deployments(repo)) == "gemma"


def test_pipeline_refuses_deployment_without_remote_state(repo: Path) -> None:
    write(repo, "deployments/dev.toml", 'name = "dev"\npipeline = true\n')
    with pytest.raises(GitopsError, match=r"deployments/dev.toml: state_bucket is not set"):
        gitops.pipeline_deployments(repo)


@pytest.mark.parametrize("body", ['name = "dev"\nstate_bucket = "b"\n', 'name = "dev"\n'])
def test_pipeline_refuses_a_deployments_file_without_the_pipeline_key(
    repo: Path, body: str
) -> None:
    """Issue 37: before, state_bucket alone made a file the pipeline's; now a file in
    deployments/ that does not say pipeline = true is named, with the key and the fix, rather
    than applied as local use (whose stacks would re-create what the bootstrap made)."""
    write(repo, "deployments/dev.toml", body)
    with pytest.raises(GitopsError) as err:
        gitops.pipeline_deployments(repo)
    said = str(err.value)
    assert said.startswith("deployments/dev.toml: pipeline is not set to true")
    assert "Add pipeline = true to deployments/dev.toml" in said
    assert "move the file out of deployments/" in said


def test_the_pipeline_key_must_be_a_boolean(repo: Path) -> None:
    write(repo, "deployments/dev.toml", 'name = "dev"\nstate_bucket = "b"\npipeline = "yes"\n')
    with pytest.raises(GitopsError, match=r"dev.toml: pipeline = 'yes' is not true or false"):
        gitops.discover(repo)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ('name = "staging"\n', "already used by deployments/staging.toml"),
        ('name = "Bad_Name"\n', "not a deployment name"),
        ('name = "x"\n', "not a deployment name"),
        ("name = \n", "not valid TOML"),
        ('name = "okay"\nproject = "X"\n', "not a Google Cloud project id"),
        ('name = "okay"\nzone = "us-west4-a; rm -rf /"\n', "not a zone"),
    ],
)
def test_bad_files_are_refused_with_the_file_named(repo: Path, body: str, match: str) -> None:
    write(repo, "deployments/zz.toml", body)
    with pytest.raises(GitopsError, match=match) as err:
        gitops.discover(repo)
    assert "deployments/zz.toml" in str(err.value)


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        (["deployments/staging.toml"], ["staging"]),
        (["deployments/staging.toml", "README.md", "tests/test_x.py"], ["staging"]),
        (["README.md", "docs/guide.md"], []),
        (["tpudeploy/config.py"], ["production", "staging"]),
        (["templates/startup.sh.j2", "deployments/staging.toml"], ["production", "staging"]),
        # deploy.toml without pipeline = true is not in the pipeline: nothing to plan.
        (["deploy.toml"], []),
        # A removed deployment has no file left to plan from.
        (["deployments/old.toml"], []),
        (["", "  "], []),
    ],
)
def test_changed_deployments(repo: Path, changed: list[str], expected: list[str]) -> None:
    deployments = gitops.pipeline_deployments(repo)
    assert gitops.changed_deployments(deployments, changed) == expected


def test_removed_deployment_files_are_reported(repo: Path) -> None:
    changed = ["deployments/old.toml", "deployments/staging.toml", "main.py"]
    assert gitops.removed_deployment_files(repo, changed) == ["deployments/old.toml"]


@pytest.mark.parametrize(
    "text", ["staging", "staging.toml", "deployments/staging.toml", "  staging\n"]
)
def test_resolve_accepts_name_or_file(repo: Path, text: str) -> None:
    dep = gitops.resolve_input(repo, text)
    assert (dep.name, dep.config) == ("staging", "deployments/staging.toml")


@pytest.mark.parametrize(
    "text",
    [
        "../staging",
        "deployments/../deploy.toml",
        "/etc/passwd",
        "staging; rm -rf /",
        "$(id)",
        "staging`id`",
        "deployments/staging.toml\nproduction",
        "",
        "Staging",
    ],
)
def test_resolve_refuses_traversal_and_metacharacters(repo: Path, text: str) -> None:
    with pytest.raises(GitopsError, match="not a deployment name"):
        gitops.resolve_input(repo, text)


def test_resolve_refuses_unknown_and_non_pipeline(repo: Path) -> None:
    with pytest.raises(GitopsError, match="'nope' not found; pipeline deployments: production"):
        gitops.resolve_input(repo, "nope")
    # deploy.toml has no remote state: the pipeline cannot destroy what it never tracked.
    with pytest.raises(GitopsError, match="not found"):
        gitops.resolve_input(repo, "gemma")


def test_static_billing_flags_only_nodes_that_opted_out_of_a_deadline(repo: Path) -> None:
    write(
        repo,
        "deployments/ondemand.toml",
        'name = "ondemand"\nstate_bucket = "b"\npipeline = true\nprovisioning = "on-demand"\n'
        'max_run_duration = "none"\n',
    )
    findings = gitops.static_billing(gitops.discover(repo))
    assert {f.level for f in findings} == {"warning"}
    # deploy.toml is flex-start (ends on its own); staging is spot with the default deadline.
    assert [f.message.split(":")[0] for f in findings] == ["deployments/ondemand.toml"]
    assert "ondemand uses provisioning = 'on-demand' with max_run_duration = 'none'" in (
        findings[0].message
    )


def test_a_node_with_a_deadline_is_an_error_only_once_it_outlived_it() -> None:
    deadlines = {"n-ready-7": 8.0, "n-ready-10": 8.0}
    nodes = [node("READY", hours=7), node("READY", hours=10)]
    findings = gitops.cloud_billing(nodes, [], now=NOW, max_age_hours=12, deadlines=deadlines)
    assert [(f.level, f.message.split(" is ")[0]) for f in findings] == [
        ("error", "TPU node n-ready-10")
    ]
    assert "past its deadline" in findings[0].message


def node(state: str, *, hours: float, ends: bool = False, spot: bool = True) -> dict[str, object]:
    scheduling: dict[str, object] = {"spot": spot}
    if ends:
        scheduling["terminationTimestamp"] = (NOW + timedelta(hours=2)).isoformat()
    return {
        "name": f"projects/p/locations/us-west4-a/nodes/n-{state.lower()}-{hours}",
        "state": state,
        "createTime": (NOW - timedelta(hours=hours)).isoformat().replace("+00:00", "Z"),
        "schedulingConfig": scheduling,
    }


def test_cloud_billing_judges_each_node() -> None:
    nodes = [
        node("READY", hours=30),  # forgotten: fails
        node("READY", hours=1),  # young: a warning only
        node("READY", hours=30, ends=True),  # flex-start: ends on its own
        node("PREEMPTED", hours=3),  # dead spot node holding quota: drift
        node("DELETING", hours=40),  # on its way out
    ]
    queued: list[dict[str, object]] = [
        {"name": "projects/p/locations/z/queuedResources/qr-a", "state": {"state": "SUSPENDED"}},
        {"name": "projects/p/locations/z/queuedResources/qr-b", "state": {"state": "ACTIVE"}},
    ]
    findings = gitops.cloud_billing(nodes, queued, now=NOW, max_age_hours=12)
    summary = [(f.level, f.message.split(":")[0]) for f in findings]
    assert summary == [
        ("error", "TPU node n-ready-30 is READY with no termination time and has run 30.0 h"),
        ("warning", "TPU node n-ready-1 is READY with no termination time and has run 1.0 h"),
        ("error", "TPU node n-preempted-3 is PREEMPTED"),
        ("error", "queued resource qr-a is SUSPENDED"),
    ]


def test_cloud_billing_unknown_age_counts_as_old() -> None:
    bare: dict[str, object] = {"name": "n", "state": "READY"}
    (finding,) = gitops.cloud_billing([bare], [], now=NOW, max_age_hours=12)
    assert finding.level == "error" and "an unknown time" in finding.message


def test_billing_check_cli(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = ["--root", str(repo)]
    write(
        repo,
        "deployments/forever.toml",
        'name = "forever"\nstate_bucket = "b"\npipeline = true\n'
        'provisioning = "spot"\nmax_run_duration = "none"\n',
    )
    assert gitops.main([*root, "billing-check"]) == 0
    assert "::warning::deployments/forever.toml: forever uses provisioning = 'spot'" in (
        capsys.readouterr().out
    )
    assert gitops.main([*root, "billing-check", "--strict"]) == 1
    nodes = repo / "nodes.json"
    nodes.write_text(json.dumps([node("PREEMPTED", hours=1)]), encoding="utf-8")
    assert gitops.main([*root, "billing-check", "--nodes-json", str(nodes)]) == 1
    assert "::error::TPU node n-preempted-1 is PREEMPTED" in capsys.readouterr().out


def test_billing_check_cli_all_flex_start_is_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "deployments/a.toml", 'name = "alpha"\nprovisioning = "flex-start"\n')
    empty = tmp_path / "empty.json"
    empty.write_text("[]", encoding="utf-8")
    args = ["--root", str(tmp_path), "billing-check", "--nodes-json", str(empty)]
    assert gitops.main(args) == 0
    assert capsys.readouterr().out == "no node bills without an end time\n"


def test_matrix_and_resolve_cli(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    changed = repo / "changed.txt"
    changed.write_text("deployments/staging.toml\nREADME.md\n", encoding="utf-8")
    assert gitops.main(["--root", str(repo), "matrix", "--changed-from", str(changed)]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {
            "name": "staging",
            "config": "deployments/staging.toml",
            "environment": "staging",
            # The deployment's own deploy identity, which the bootstrap creates (docs/gitops.md).
            "deploy_account": "staging-apply",
            # What the drift and destroy jobs loop over (tests/gitops/test_gitops_gke.py: GKE).
            "platform": "tpu-vm",
            "stacks": "staging-secrets staging-node",
            # Default flex_start_timeout 1h + 15 min clean-up + 25 min of install and plans.
            "timeout_minutes": "100",
            # Two delete waits of 30 min (destroy provisioner, then clean-up) + 20 min.
            "destroy_timeout_minutes": "80",
        }
    ]
    assert gitops.main(["--root", str(repo), "resolve", "deployments/production.toml"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "name=production",
        "config=deployments/production.toml",
        "environment=production",
        "deploy_account=production-apply",
        "platform=tpu-vm",
        "stacks=production-secrets production-node",
        "timeout_minutes=100",
        "destroy_timeout_minutes=80",
    ]
    assert gitops.main(["--root", str(repo), "resolve", "../x"]) == 2
    assert capsys.readouterr().err.startswith("::error::deployment input '../x'")


def test_zones_cli_uses_default_project(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gitops.main(["--root", str(repo), "zones", "--default-project", "fallback-1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "fallback-1 us-west4-a",
        "my-project-1 us-central1-a",
    ]
    assert gitops.main(["--root", str(repo), "zones"]) == 2


def test_plan_report() -> None:
    output = (
        "\x1b[1mgemma-node\x1b[0m  Plan: 2 to add, 0 to change, 0 to destroy.\n"
        "gemma-secrets  No changes. Your infrastructure matches the configuration.\n"
        'desc = "```"\n'
    )
    md = gitops.plan_report(name="gemma", config="deploy.toml", exit_code=0, output=output)
    assert md.startswith("### `gemma` (deploy.toml): plan succeeded\n")
    assert "- gemma-node  Plan: 2 to add, 0 to change, 0 to destroy." in md
    assert "- gemma-secrets  No changes." in md
    assert "\x1b" not in md
    # Only the report's own two fences: the plan cannot close the code block early.
    assert md.count("```") == 2


def test_plan_report_failure_and_truncation() -> None:
    output = "Error: googleapi: 403\n" + "x" * (gitops.PLAN_DETAIL_LIMIT + 10)
    md = gitops.plan_report(name="s", config="deployments/s.toml", exit_code=1, output=output)
    assert "plan FAILED (exit 1)" in md
    assert "- Error: googleapi: 403" in md
    assert "truncated: the full plan is in the job log" in md
    assert len(md) < gitops.PLAN_DETAIL_LIMIT + 1000


def test_repository_deployment_files_parse() -> None:
    """The real deploy.toml / deployments/*.toml carry what the pipeline reads."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "deploy.toml").exists() and not (root / "deployments").is_dir():
        pytest.skip("no deployment files in the repository yet")
    assert gitops.discover(root)
    gitops.pipeline_deployments(root)


def test_deploy_job_outlasts_the_capacity_wait_and_its_clean_up(repo: Path) -> None:
    """A deploy job killed while the create waits for capacity leaves the queued resource to
    `make destroy`: the job's limit is derived from the deployment's own flex_start_timeout."""
    from tpudeploy.tpuvm.queued_resource import DEFAULT_CLEANUP_TIMEOUT

    write(
        repo,
        "deployments/slow.toml",
        'name = "slow"\nstate_bucket = "b"\npipeline = true\nflex_start_timeout = "3h"\n',
    )
    (slow,) = [d for d in gitops.pipeline_deployments(repo) if d.name == "slow"]
    assert slow.flex_start_timeout_seconds == 3 * 3600
    assert slow.deploy_timeout_minutes * 60 >= 3 * 3600 + DEFAULT_CLEANUP_TIMEOUT + 10 * 60
    write(
        repo,
        "deployments/slow.toml",
        'name = "slow"\nstate_bucket = "b"\npipeline = true\nflex_start_timeout = "soon"\n',
    )
    with pytest.raises(GitopsError, match="flex_start_timeout"):
        gitops.pipeline_deployments(repo)


def test_the_repositorys_deployments_agree_with_the_config_model() -> None:
    """gitops reads the TOML itself; the timeout it derives from must be the config's."""
    from tpudeploy.config import load_config

    for dep in gitops.pipeline_deployments(REPO_ROOT):
        cfg = load_config(REPO_ROOT / dep.config)
        assert dep.flex_start_timeout_seconds == cfg.flex_start_timeout_seconds, dep.config
        # What the pipeline applies is what the stacks leave to the bootstrap (issue 37).
        assert dep.pipeline and cfg.gitops_managed, dep.config


def test_destroy_workflows_own_input_examples_resolve() -> None:
    """The input's description gives examples; each must be accepted by the resolver."""
    import yaml

    doc = yaml.safe_load((REPO_ROOT / ".github/workflows/destroy.yml").read_text())
    description = doc[True]["workflow_dispatch"]["inputs"]["deployment"]["description"]
    examples = re.findall(r"\(([^)]+)\)", description)
    assert examples, description
    for example in examples:
        assert gitops.resolve_input(REPO_ROOT, example).config.startswith("deployments/")


# Captured from Terraform 1.11.4 (`terraform plan -no-color`) for a terraform_data whose
# jsonencode()d input carries the startup script, as the flex-start queued resource's does.
IMAGE_PLAN = """\
-/+ resource "terraform_data" "qr" {
      ~ input            = jsonencode(
          ~ {
              ~ node = {
                  ~ metadata = {
                      ~ startup-script = <<-EOT
                            #!/usr/bin/env bash
                            readonly CONTAINER=vllm-gemma4
                          - readonly IMAGE=vllm/vllm-tpu:nightly
                          + readonly IMAGE=vllm/vllm-tpu@sha256:{digest}
                            readonly PROXY_IMAGE=nginx:1.30.5
                            echo hi
                        EOT
                    }
                }
            }
        )
      ~ output           = jsonencode(
            {
              - node = {
                  - metadata = {
                      - startup-script = <<-EOT
                            readonly IMAGE=vllm/vllm-tpu:nightly
                        EOT
Plan: 1 to add, 0 to change, 1 to destroy.
"""


def test_plan_report_shows_an_image_change_as_a_version_change() -> None:
    from tpudeploy.gitops.plan_report import pinned_versions

    digest = "a" * 64
    pinned = f"vllm/vllm-tpu@sha256:{digest}"
    toml = (
        "# deployment\n[vllm]\n"
        f'image = "{pinned}"  # vllm 0.26.1rc1.dev125+ga7a204cc6; make pin 2026-12-01\n'
    )
    versions = pinned_versions(toml)
    assert versions == {pinned: "vllm 0.26.1rc1.dev125+ga7a204cc6; make pin 2026-12-01"}
    md = gitops.plan_report(
        name="gemma",
        config="deploy.toml",
        exit_code=0,
        output=IMAGE_PLAN.replace("{digest}", digest),
        versions=versions,
    )
    (line,) = [row for row in md.splitlines() if row.startswith("- vLLM image")]
    assert line.startswith(f"- vLLM image: `vllm/vllm-tpu:nightly` -> `{pinned}` (vllm 0.26.1rc1")
    assert "a different build" in line and "make status" in line
    # The output block's lone "-" line is no change of its own; the proxy did not change.
    assert md.count("- vLLM image") == 1 and "proxy image" not in md
    assert "- Plan: 1 to add, 0 to change, 1 to destroy." in md
