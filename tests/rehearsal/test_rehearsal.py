"""The dress rehearsal (`make rehearse`): the lifecycle passes for each provisioning model, and
fails, at the stage that matters, on each defect it exists to catch.

Every run is a real `python -m tools.rehearsal` (the cdktf CLI, Terraform, the stand-in provider,
the boot sandbox) in its own scratch copy; the module starts the runs its selected tests wait
for at once, three at a time, and each test waits for its own. The breaks are post-synth hooks
(tests/rehearsal_breaks.py) that edit the synthesized JSON after every synth; the product is not
changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.rehearsal.gke import SERVING_KINDS
from tools.rehearsal.lifecycle import PROVISIONING_MODELS
from tools.rehearsal.parallel import Run, Runner

pytestmark = pytest.mark.rehearsal

STAGES = [
    "prepare",
    "deploy-secrets",
    "secret",
    "api-key",
    # Issue 37: the TPU VM's node serves the deployment's one stored certificate.
    "tls-cert",
    "deploy",
    "boot",
    "wait",
    "smoke",
    "accept",
    # Issue 37: keys rotated and revoked under a running stream, the node's poller for real.
    "keys",
    "status",
    "deploy-again",
    "destroy",
    "destroy-all",
    "no-secret-left",
]

# (hook in tests/rehearsal_breaks.py, the stage that must fail, a phrase its report must hold)
BREAKS = {
    "provider": ("bind_to_google_ga", "deploy-secrets", "hashicorp/google"),
    "reference": ("reference_missing_resource", "deploy-secrets", "undeclared resource"),
    "expression": ("invalid_expression", "deploy-secrets", "cdk.tf.json"),
    "escape": ("unescape_boot_script", "deploy", "`make deploy AUTO_APPROVE=1` exited"),
    "destroy": (
        "add_a_queued_resource_without_its_delete",
        "destroy",
        "queuedResources/gemma4-v5e-qr-spare",
    ),
    "no-op": ("label_every_synth_differently", "deploy-again", "not a no-op"),
    "grant": ("grant_viewer_instead_of_accessor", "boot", "may not read secret"),
    # Issue 37: a poller that never reloads nginx; the rotated key is never served.
    "no-reload": ("poller_never_reloads_nginx", "keys", "new key: after"),
}


# Issue 40: the flex-start lifecycle also runs the upstream watch on its own deployment, after
# the watched node's destroy (tools/rehearsal/watch_stage.py).
WATCH_STAGES = ["watch-setup", "watch-killed", "watch", "watch-worse", "watch-destroy-all"]
FLEX_STAGES = [*STAGES[:-2], *WATCH_STAGES, *STAGES[-2:]]

# A spot or on-demand lifecycle also changes a [vllm] setting on the running node (issue 21).
VM_STAGES = [*STAGES[: STAGES.index("deploy-again") + 1], "change-config", *STAGES[-3:]]
# Breaks of a VM deployment: (hook, model, the stage that must fail, a phrase of its report).
VM_BREAKS = {
    "patch-in-place": (
        "patch_the_node_in_place",
        "spot",
        "change-config",
        "did not say the node will be replaced",
    ),
}

# Issue 16's scenarios: (provisioning, scenario) and their stages after `deploy`.
SCENARIO_RUNS = {"preemption": ("spot", "preemption"), "deadline": ("on-demand", "deadline")}
SCENARIO_STAGES = {
    "preemption": [
        "boot",
        "wait",
        "preempt",
        "recover",
        "boot-again",
        "wait-again",
        "deploy-again",
        "destroy",
        "destroy-all",
        "no-secret-left",
    ],
    "deadline": [
        "deadline-job",
        "extend",
        # Issue 38: the warning job 30 minutes ahead ran, and its policy's filter matches it.
        "stops-soon",
        "fire",
        "after-deadline",
        "deploy-after",
        # Issue 36 item 10: the job's cron fires again a year on; its grant has ended.
        "a-year-later",
        "destroy",
        "destroy-all",
        "no-secret-left",
    ],
}


# PLATFORM=gke (issue 25): one lifecycle, no boot (no pod runs: the fake cluster has no nodes).
GKE_STAGES = [
    "prepare",
    "deploy-secrets",
    "secret",
    "api-key",
    "tls-cert",
    "deploy",
    # Issue 36: a second deployment in the same project, VPC and region, then its destroy.
    "neighbour",
    "deploy-again",
    "neighbour-gone",
    "extend",
    "destroy",
    "destroy-all",
    "no-secret-left",
]


# The run each test waits for, from its name and parameters: the fixture starts only the runs
# the selected tests wait for (the whole matrix under `make test-slow`; one run for `-k`).
RUN_OF: dict[str, Callable[[dict[str, Any]], str]] = {
    "test_the_lifecycle_passes": lambda p: str(p["model"]),
    "test_preemption_and_deadline_scenarios_pass": lambda p: f"scenario-{p['label']}",
    "test_the_pipeline_deploy_passes_as_the_deploy_identity": lambda p: "pipeline",
    "test_each_deliberate_break_fails_at_its_stage": lambda p: f"break-{p['label']}",
    "test_a_vm_patched_in_place_fails_the_config_change": lambda p: f"break-{p['label']}",
    "test_the_gke_lifecycle_passes": lambda p: "gke",
    "test_the_gke_pipeline_deploy_passes_as_the_deploy_identity": lambda p: "gke-pipeline",
}


def wanted_runs(items: Iterable[pytest.Item], module: object) -> set[str]:
    """The runs the selected tests of `module` wait for. A test of it that uses the fixture and
    is not in RUN_OF is an error here, not a run that never starts."""
    wanted = set()
    for item in items:
        if getattr(item, "module", None) is not module:
            continue
        if "rehearsals" not in getattr(item, "fixturenames", ()):
            continue
        name = getattr(item, "originalname", item.name)
        if name not in RUN_OF:
            raise pytest.UsageError(f"{name} waits for a rehearsal run: name it in RUN_OF")
        callspec = getattr(item, "callspec", None)
        wanted.add(RUN_OF[name](dict(callspec.params) if callspec else {}))
    return wanted


@pytest.fixture(scope="module")
def rehearsals(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, terraform: str
) -> Iterator[Runner]:
    """The runs the selected tests of this module wait for, started together (three at a time
    on two cores); each test waits for its own."""
    root = tmp_path_factory.mktemp("rehearsals")
    runner = Runner(parallel=3)
    wanted = wanted_runs(request.session.items, request.module)

    def start(label: str, args: list[str], workdir: Path) -> None:
        if label in wanted:
            runner.start(label, args, workdir)

    for model in PROVISIONING_MODELS:
        start(model, ["--provisioning", model], root / model)
    for label, (model, scenario) in SCENARIO_RUNS.items():
        args = ["--provisioning", model, "--scenario", scenario]
        start(f"scenario-{label}", args, root / f"scenario-{label}")
    start("pipeline", ["--provisioning", "spot", "--scenario", "pipeline"], root / "pipeline")
    start("gke", ["--platform", "gke"], root / "gke")
    start("gke-pipeline", ["--platform", "gke", "--scenario", "pipeline"], root / "gke-pipeline")
    for label, (hook, _, _) in BREAKS.items():
        args = ["--provisioning", "flex-start", "--post-synth", f"tests.rehearsal_breaks:{hook}"]
        start(f"break-{label}", args, root / label)
    for label, (hook, model, _, _) in VM_BREAKS.items():
        args = ["--provisioning", model, "--post-synth", f"tests.rehearsal_breaks:{hook}"]
        start(f"break-{label}", args, root / label)
    assert set(runner.runs) == wanted, wanted - set(runner.runs)  # each has a way to start
    yield runner
    runner.wait_all()


def stage_lines(run: Run) -> dict[str, str]:
    found = {}
    for line in run.lines:
        m = re.match(r"^  (\S+)\s+(ok|FAILED)\s+[\d.]+ s  ", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


@pytest.mark.parametrize("model", PROVISIONING_MODELS)
def test_the_lifecycle_passes(rehearsals: Runner, model: str) -> None:
    # The watch deploys <name>-watch 15 times and destroys it 19 times more than the lifecycle
    # alone (Terraform each): flex-start's run is the long one. It took 3,579 s (watch stages
    # 3,305 s) on two cores under a load average of 10-25, synthesizing 47 times in the watch
    # (each deploy twice: `tpudeploy recover`'s synth and the CLI's missed each other's), and
    # 878 s (watch 736 s) at a load of 7 with 8 synths (the cache's context fix and kept copies).
    # Steps with no synth (make accept, wait, the boot record) ran 3.6x slower in the first run:
    # at its load this run would take about 3,200 s; the timeout keeps the 1.5x margin over it.
    run = rehearsals.wait(model, timeout=4800 if model == "flex-start" else 900)
    assert run.returncode == 0, run.output
    # Every stage ran, in the README's order, each with its own timed line.
    expected = FLEX_STAGES if model == "flex-start" else VM_STAGES
    assert list(stage_lines(run)) == expected, run.output
    assert set(stage_lines(run).values()) == {"ok"}
    assert run.lines[-1].startswith(f"rehearsal passed: {model} lifecycle")
    # A pass cleans its scratch copy (state, logs, the fake node's disk) away.
    assert not run.workdir.exists()


@pytest.mark.parametrize("label", SCENARIO_RUNS)
def test_preemption_and_deadline_scenarios_pass(rehearsals: Runner, label: str) -> None:
    """SCENARIO=preemption: PREEMPTED in the fake, make recover, READY again with the same spec
    and a warm boot. SCENARIO=deadline: the job fires and nothing bills afterwards."""
    model, scenario = SCENARIO_RUNS[label]
    run = rehearsals.wait(f"scenario-{label}", timeout=900)
    assert run.returncode == 0, run.output
    assert (
        list(stage_lines(run)) == STAGES[: STAGES.index("deploy") + 1] + SCENARIO_STAGES[scenario]
    ), run.output
    assert set(stage_lines(run).values()) == {"ok"}
    assert run.lines[-1].startswith(f"rehearsal passed: {model} {scenario}")
    if scenario == "deadline":
        # Issue 36 item 10: a year on the job fires again and its account may delete nothing.
        year = next(line for line in run.lines if line.startswith("  a-year-later "))
        assert "DELETE refused (403), the node of that name stays" in year, year


def test_the_pipeline_deploy_passes_as_the_deploy_identity(rehearsals: Runner) -> None:
    """SCENARIO=pipeline (issue 21): the bootstrap's grants in force, both stacks applied with
    the deploy identity's token; every change Terraform made came from it. On d90ced4's grants
    this failed at deploy-secrets (secretmanager.secrets.create, checked on the project) and at
    deploy (compute.networks.updatePolicy, checked on the network)."""
    run = rehearsals.wait("pipeline", timeout=900)
    assert run.returncode == 0, run.output
    expected = [
        "prepare",
        "bootstrap",
        # A spot deployment: its config change reaches the node as a new node (issue 21).
        *VM_STAGES[1:-2],
        "destroy-all",
        "as-deploy-identity",
        "no-secret-left",
    ]
    assert list(stage_lines(run)) == expected, run.output
    assert set(stage_lines(run).values()) == {"ok"}
    assert run.lines[-1].startswith("rehearsal passed: spot pipeline")


@pytest.mark.parametrize("label", BREAKS)
def test_each_deliberate_break_fails_at_its_stage(rehearsals: Runner, label: str) -> None:
    _, stage, phrase = BREAKS[label]
    run = rehearsals.wait(f"break-{label}", timeout=900)
    assert run.returncode == 1, run.output
    stages = stage_lines(run)
    # The stages before it passed; the one that must catch the defect is the one that failed.
    assert list(stages)[-1] == stage, run.output
    assert stages[stage] == "FAILED"
    assert all(result == "ok" for name, result in stages.items() if name != stage)
    report = run.output[run.output.index(f"  {stage} ") :]
    assert phrase in report, report
    assert f"rehearsal FAILED at stage {stage} (flex-start)" in run.output
    # A failed run keeps its logs for whoever reads the report.
    assert any(Path(run.workdir, "logs").iterdir())


@pytest.mark.parametrize("label", VM_BREAKS)
def test_a_vm_patched_in_place_fails_the_config_change(rehearsals: Runner, label: str) -> None:
    """Without the replacement trigger (main before issue 21) the changed config would be
    patched into metadata no boot reads again: the change-config stage must catch it."""
    _, model, stage, phrase = VM_BREAKS[label]
    run = rehearsals.wait(f"break-{label}", timeout=1200)
    assert run.returncode == 1, run.output
    stages = stage_lines(run)
    assert list(stages)[-1] == stage and stages[stage] == "FAILED", run.output
    report = run.output[run.output.index(f"  {stage} ") :]
    assert phrase in report, report
    assert f"rehearsal FAILED at stage {stage} ({model})" in run.output


def check_gke_run(run: Run) -> None:
    """What tests the GKE lifecycle's report (shared with whoever runs it alone)."""
    assert run.returncode == 0, run.output
    assert list(stage_lines(run)) == GKE_STAGES, run.output
    assert set(stage_lines(run).values()) == {"ok"}
    deploy = next(line for line in run.lines if line.startswith("  deploy "))
    # The cluster, its three pools, and every serving object stored by the fake Kubernetes API.
    assert "pools system, tpu-flex, tpu-spot" in deploy, deploy
    # The stage compares the fake API's objects with the synthesized serving stack's; each kind
    # it applies is one object at least (the count grew from 10 to 20 with the metrics adapter).
    stored = re.search(r"; (\d+) objects stored and validated, all (\d+) the serving stack", deploy)
    assert stored and stored[1] == stored[2], deploy
    assert int(stored[1]) >= len(SERVING_KINDS), deploy
    # Issue 36: the neighbour's control plane is not the first's, and one NAT serves them.
    neighbour = next(line for line in run.lines if line.startswith("  neighbour "))
    planes = re.search(r"control planes (\S+)/28, (\S+)/28", neighbour)
    assert planes and planes[1] != planes[2], neighbour
    assert run.lines[-1].startswith("rehearsal passed: gke lifecycle")
    # What went unchecked is in the last line, not only in a stage's detail (issue 36): the
    # SecretProviderClass has no published schema; every other custom resource is checked.
    assert run.lines[-1].endswith(
        "; not checked: secrets-store.csi.x-k8s.io/v1/SecretProviderClass (no published schema)"
    ), run.lines[-1]
    assert not run.workdir.exists()


def test_the_gke_lifecycle_passes(rehearsals: Runner) -> None:
    """make rehearse PLATFORM=gke: deploy-secrets to destroy-all through the cdktf CLI and
    Terraform, the stand-in google-beta and kubernetes providers, the fake GKE and Kubernetes
    APIs. On 24029fa make deploy failed (recover looked for the TPU VM's node stack), then the
    namespaced custom resources were refused (created before their namespace)."""
    check_gke_run(rehearsals.wait("gke", timeout=1200))


# SCENARIO=pipeline on GKE (issue 41): the three stacks as the deploy identity, then what it and
# two neighbours' identities must not reach.
GKE_PIPELINE_STAGES = [
    "prepare",
    "bootstrap",
    "deploy-secrets",
    "secret",
    "api-key",
    "tls-cert",
    "deploy",
    "deploy-again",
    "plan",
    "cross-deployment",
    "destroy",
    "destroy-all",
    "as-deploy-identity",
    "no-secret-left",
]


def test_the_gke_pipeline_deploy_passes_as_the_deploy_identity(rehearsals: Runner) -> None:
    """make rehearse PLATFORM=gke SCENARIO=pipeline: every change Terraform made, the serving
    stack's Kubernetes objects included, came from the deployment's deploy identity, and the
    cross-deployment stage saw every ask for another deployment's resources refused. With the
    shared grants alone (no GKE part: what a deploy identity held before issue 41) it failed at
    deploy: 403 on container.clusters.list (google_container_engine_versions) and on
    resourcemanager.projects.get (the project's number); with the fakes before issue 41 the
    cross-deployment stage failed: another deployment's identity read the cluster and its
    ConfigMap (200)."""
    run = rehearsals.wait("gke-pipeline", timeout=1200)
    assert run.returncode == 0, run.output
    assert list(stage_lines(run)) == GKE_PIPELINE_STAGES, run.output
    assert set(stage_lines(run).values()) == {"ok"}
    # The read-only plan identity's make diff: no change, no write, no 403.
    plan = next(line for line in run.lines if line.startswith("  plan "))
    assert "no change in the 3 stacks" in plan and "no write, no 403" in plan, plan
    cross = next(line for line in run.lines if line.startswith("  cross-deployment "))
    assert re.search(r"\b1[0-9] asks across gemma4-gke-c \(GKE\), gemma4-vm-d \(TPU VM\)", cross)
    assert run.lines[-1].startswith("rehearsal passed: gke pipeline"), run.lines[-1]
