"""Shared fixtures: hermetic environment and one cdktf synthesis per configuration per session.

Reuse from any test file (flex-start, boot path, GitOps, ...):

    def test_something(synth):
        stacks = synth({"provisioning": "on-demand"})   # {stack name: parsed cdk.tf.json}
        node = stacks["gemma4-v5e-node"]
        outdir = synth.outdir({"provisioning": "on-demand"})  # a cdktf.out-shaped directory

    def test_default(node_stack, secrets_stack): ...     # the default (empty-file) deployment

The default deployment is flex-start (a terraform_data queued resource, no google_tpu_v2_vm);
pass {"provisioning": "spot"} or {"provisioning": "on-demand"} for the google_tpu_v2_vm path.

`overrides` is the raw TOML data (what `tomllib` would give for a config file) and goes through
`parse_config`, so an invalid override raises `ConfigError` like a real file would. Results are
cached by the canonical JSON of the overrides: the first synthesis loads the 33 MB jsii assembly
through Node (~7 s), later ones take well under a second. Each call returns a deep copy, so a
test may mutate what it gets. Keep the number of distinct configurations small.

GOOGLE_CLOUD_PROJECT and DEPLOY_CONFIG are removed from the environment at import, so defaults do
not depend on the developer's shell: configurations that need a project pass `project` explicitly.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Hermetic: the user's shell must not change defaults (GOOGLE_CLOUD_PROJECT fills `project`,
# DEPLOY_CONFIG picks the file). Done at import, before any fixture or subprocess runs.
os.environ.pop("GOOGLE_CLOUD_PROJECT", None)
os.environ.pop("DEPLOY_CONFIG", None)
# jsii prints a Node end-of-life banner on every kernel start; the value silences it only when it
# names the running major version (stacks/__init__.py assumes 20), so ask node which one it is.
_node = shutil.which("node")
_major = ""
if _node:
    _version = subprocess.run([_node, "--version"], capture_output=True, text=True, check=False)
    _major = _version.stdout.strip().lstrip("v").split(".")[0]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", _major or "1")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", _major or "1")
# google-auth probes the metadata server (169.254.169.254, with retries: ~3 s) whenever it finds
# no credentials file. Nothing in the suite may leave loopback, and nothing should wait: its own
# switch, spelled exactly as it reads it ("true"), and a closed loopback port if it probes anyway.
os.environ["NO_GCE_CHECK"] = "true"
os.environ["GCE_METADATA_HOST"] = "127.0.0.1:9"
os.environ["GCE_METADATA_IP"] = "127.0.0.1:9"
# make preflight tests your permissions with Resource Manager: in the suite, a closed loopback
# port unless a test points it at its fake (the check then becomes a note, never a refusal).
os.environ["RESOURCEMANAGER_EMULATOR_HOST"] = "127.0.0.1:9"
# make secret and make tune ask the Hugging Face Hub (tpudeploy/hfhub.py): in the suite, a
# closed loopback port unless a test serves its fake Hub there (tests/hub_fixture.py).
os.environ["HFHUB_FAKE_HOST"] = "127.0.0.1:9"
# No telemetry or version pings from anything cdktf-related.
os.environ.setdefault("CHECKPOINT_DISABLE", "1")
os.environ.setdefault("DISABLE_VERSION_CHECK", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent

Stacks = dict[str, dict[str, Any]]


# Fixtures that synthesize (cdktf, ~7 s for the first) or run Terraform: a test using one is
# marked `slow`, which `make mutants` leaves out (it reruns the fast tests once per mutant). A
# test that synthesizes in a subprocess carries the mark itself.
SLOW_FIXTURES = frozenset(
    {
        "synth",
        "gke_pair",
        "default_stacks",
        "node_stack",
        "secrets_stack",
        "bootstrap_outdir",
        "boot",
        "terraform",
    }
)


# The modules that take longest (junit times of `make test`, 2026-12-01), run first: xdist's
# --dist loadfile hands out whole modules in collection order, so one of these started last
# (they sort late by name) kept one worker busy while the other had nothing left to do.
LONGEST_FIRST = (
    "test_startup_script.py",
    "test_preflight.py",
    "test_no_traceback.py",
    "test_synth.py",
    "test_proxy.py",
    "test_rehearsal_parts.py",
    "test_failure_messages.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    # A stable sort: each module keeps its own order, the rest keep theirs. Every worker
    # computes the same order, as xdist requires.
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def _key(overrides: dict[str, Any] | None) -> str:
    return json.dumps(overrides or {}, sort_keys=True, separators=(",", ":"))


class Synthesizer:
    """`synth(overrides) -> {stack name: cdk.tf.json as a dict}`, synthesized once per config."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._outdirs: dict[str, Path] = {}
        self._stacks: dict[str, Stacks] = {}

    def _synth(self, overrides: dict[str, Any] | None) -> str:
        key = _key(overrides)
        if key not in self._stacks:
            # Imported lazily: only tests that synthesize pay for the jsii assembly load.
            from stacks.app import build_app
            from tpudeploy.config import parse_config

            cfg = parse_config(copy.deepcopy(overrides or {}), source="<test overrides>")
            outdir = self._root / f"config{len(self._outdirs)}"
            build_app(cfg, outdir=str(outdir)).synth()
            self._outdirs[key] = outdir
            self._stacks[key] = {
                p.parent.name: json.loads(p.read_text(encoding="utf-8"))
                for p in sorted(outdir.glob("stacks/*/cdk.tf.json"))
            }
        return key

    def __call__(self, overrides: dict[str, Any] | None = None) -> Stacks:
        return copy.deepcopy(self._stacks[self._synth(overrides)])

    def outdir(self, overrides: dict[str, Any] | None = None) -> Path:
        """The synthesized cdktf.out-shaped directory (stacks/<name>/cdk.tf.json). Read-only:
        other tests share it; copy it before changing anything."""
        return self._outdirs[self._synth(overrides)]


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesizer:
    """Session-wide synthesizer; see the module docstring."""
    return Synthesizer(tmp_path_factory.mktemp("cdktf-out"))


@pytest.fixture(scope="session")
def default_config() -> Any:
    """The deployment an empty config file gives (the seed's)."""
    from tpudeploy.config import parse_config

    return parse_config({})


@pytest.fixture(scope="session")
def default_stacks(synth: Synthesizer) -> Stacks:
    return synth({})


# A second GKE deployment beside deployments/gke.toml, in the same project, VPC and region: what
# two deployments must not share (issue 36). Only the name differs.
SECOND_GKE_NAME = "gemma4-gke-b"


def gke_local_raw() -> dict[str, Any]:
    """The shipped deployments/gke.toml as a team runs it from a workstation: without
    `pipeline = true` but with its state_bucket (state shared, `make state-init`), so its stacks
    create their own secrets, accounts, APIs, NAT and stop grant, exactly as with local state.
    That is what the GKE stack tests judge, so every one of them also holds that remote state
    alone changes no resource (issue 37); the file's pipeline mode (the bootstrap's accounts and
    secrets) is tests/gitops's (issue 41)."""
    import tomllib

    raw = tomllib.loads((REPO_ROOT / "deployments" / "gke.toml").read_text(encoding="utf-8"))
    raw.pop("pipeline", None)
    return raw


def gke_configs() -> tuple[dict[str, Any], dict[str, Any]]:
    """The raw data of the shipped GKE deployment (local mode) and of a second one beside it."""
    first = gke_local_raw()
    return first, {**copy.deepcopy(first), "name": SECOND_GKE_NAME}


@pytest.fixture(scope="session")
def gke_pair(synth: Synthesizer) -> tuple[Stacks, Stacks]:
    """Both GKE deployments synthesized (the first is the session's deployments/gke.toml
    synthesis, shared with tests/stacks/test_gke_synth.py): ({stack: cdk.tf.json}, ...)."""
    first, second = gke_configs()
    return synth(first), synth(second)


@pytest.fixture
def secrets_stack(synth: Synthesizer, default_config: Any) -> dict[str, Any]:
    """The default deployment's long-lived stack (`<name>-secrets`), a fresh copy per test."""
    return synth({})[default_config.secrets_stack_name]


@pytest.fixture
def node_stack(synth: Synthesizer, default_config: Any) -> dict[str, Any]:
    """The default deployment's billing stack (`<name>-node`), a fresh copy per test."""
    return synth({})[default_config.node_stack_name]


@pytest.fixture(scope="session")
def bootstrap() -> Any:
    """The committed gitops.toml with the committed deployments/*.toml
    (tpudeploy.bootstrap_config)."""
    from tpudeploy.bootstrap_config import load_bootstrap

    return load_bootstrap(REPO_ROOT / "gitops.toml", root=REPO_ROOT)


@pytest.fixture(scope="session")
def bootstrap_cfg(bootstrap: Any) -> Any:
    """The repository's own gitops.toml, validated (tpudeploy.bootstrap_config.BootstrapConfig)."""
    return bootstrap.config


@pytest.fixture(scope="session")
def bootstrap_outdir(
    synth: Synthesizer, bootstrap: Any, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The bootstrap synthesized once per session, as `make bootstrap-synth` does on a fresh
    clone: into cdktf.out/bootstrap of a folder with no cdktf.out yet."""
    from stacks.bootstrap import synth_bootstrap

    synth({})  # shares the session's jsii load with the other synth tests
    outdir = tmp_path_factory.mktemp("fresh-clone") / "cdktf.out" / "bootstrap"
    synth_bootstrap(bootstrap, outdir=str(outdir))
    return outdir


@pytest.fixture
def boot(bootstrap_outdir: Path) -> dict[str, Any]:
    """The bootstrap's cdk.tf.json, a fresh copy per test."""
    from tpudeploy.bootstrap_config import BOOTSTRAP_STACK

    path = bootstrap_outdir / "stacks" / BOOTSTRAP_STACK / "cdk.tf.json"
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def run_main(
    tmp_path: Path, config_text: str, *, timeout: float = 120
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run `python main.py` (what `make synth` and `cdktf synth` run) on a config file written to
    tmp_path; return the result and the output directory it would synthesize into."""
    config = tmp_path / "deploy.toml"
    config.write_text(config_text)
    outdir = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "main.py"],
        cwd=REPO_ROOT,
        env={**os.environ, "DEPLOY_CONFIG": str(config), "CDKTF_OUTDIR": str(outdir)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return result, outdir


def resources(stack: dict[str, Any], rtype: str) -> dict[str, dict[str, Any]]:
    """`{construct id: attributes}` of one resource type in a synthesized stack ({} if none)."""
    return dict(stack.get("resource", {}).get(rtype, {}))


# ---- Terraform itself ------------------------------------------------------------------------

# The version the project is tested with (docs/deploying.md); the workflows install the same one.
TERRAFORM_TESTED_VERSION = "1.11.4"


@pytest.fixture(scope="session")
def terraform() -> str:
    """The real Terraform binary. Skipped with a reason on a machine without it; under CI
    (CI=true, as .ci/run runs) its absence fails, so CI never silently runs a weaker suite."""
    path = shutil.which("terraform")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(
                "terraform is not on PATH: CI requires Terraform " + TERRAFORM_TESTED_VERSION
            )
        pytest.skip("terraform is not on PATH: the Terraform tier needs the real binary")
    return path


def terraform_env(tmp_path: Path) -> dict[str, str]:
    """Environment for a test's Terraform: an empty CLI config of its own (never the user's
    ~/.terraformrc, whose mirrors or overrides would change what is tested), no telemetry."""
    cli_config = tmp_path / "terraformrc"
    cli_config.touch()
    return {
        **os.environ,
        "TF_CLI_CONFIG_FILE": str(cli_config),
        "CHECKPOINT_DISABLE": "1",
        "TF_IN_AUTOMATION": "1",
        "TF_INPUT": "0",
        "NO_COLOR": "1",
    }


def without_backend(doc: dict[str, Any]) -> dict[str, Any]:
    """A stack's JSON without its backend block: a GCS backend needs `terraform init` (and a
    cloud) before any other command; everything else is loaded as it is."""
    doc = copy.deepcopy(doc)
    doc.get("terraform", {}).pop("backend", None)
    return doc
