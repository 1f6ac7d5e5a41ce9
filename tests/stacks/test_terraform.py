"""Terraform tier: every stack the repository ships is loaded by the real Terraform binary.

Assertions on the JSON passed while Terraform refused every stack (a validation condition that
was a literal string) and bound every resource to the unpinned hashicorp/google provider: here
Terraform itself is the judge. Needs no provider binary: `terraform providers` loads and checks
the configuration; an apply of the variables alone evaluates their validation.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, Synthesizer, terraform_env, without_backend
from tpudeploy.bootstrap_config import BOOTSTRAP_STACK

GOOGLE_BETA = "registry.terraform.io/hashicorp/google-beta"
# The bindings' pin (cdktf-cdktf-provider-google-beta 16.12.1 encodes google-beta 6.50.0).
GOOGLE_BETA_VERSION = "6.50.0"
BUILTIN = "terraform.io/builtin/terraform"


def _toml(rel: str) -> dict[str, Any]:
    return tomllib.loads((REPO_ROOT / rel).read_text(encoding="utf-8"))


def shipped_configs() -> dict[str, dict[str, Any]]:
    """Every deployment the repository ships, as raw TOML data: deploy.toml (flex-start by
    default) and its spot and on-demand variants, and each deployments/*.toml."""
    default = _toml("deploy.toml")
    configs = {
        "deploy.toml": default,
        "deploy.toml+spot": {**default, "provisioning": "spot"},
        "deploy.toml+on-demand": {**default, "provisioning": "on-demand"},
    }
    for path in sorted((REPO_ROOT / "deployments").glob("*.toml")):
        configs[f"deployments/{path.name}"] = _toml(f"deployments/{path.name}")
    return configs


CONFIGS = shipped_configs()


def run_terraform(
    terraform: str, args: list[str], cwd: Path, tmp_path: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [terraform, *args],
        cwd=cwd,
        env=terraform_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


_PROVIDER_LINE = re.compile(r"provider\[([^\]]+)\](?: (\S+))?")


def required_providers(terraform: str, doc: dict[str, Any], tmp_path: Path) -> set[str]:
    """What Terraform says the configuration requires: {"source version" or "source"}."""
    folder = tmp_path / "stack"
    folder.mkdir()
    (folder / "main.tf.json").write_text(json.dumps(without_backend(doc)), encoding="utf-8")
    result = run_terraform(terraform, ["providers"], folder, tmp_path)
    assert result.returncode == 0, f"Terraform refuses the stack:\n{result.stderr}"
    return {
        " ".join(part for part in m.groups() if part)
        for m in _PROVIDER_LINE.finditer(result.stdout)
    }


def _stacks_of(synth: Synthesizer, label: str) -> dict[str, dict[str, Any]]:
    return synth(CONFIGS[label])


def _kinds(raw: dict[str, Any]) -> tuple[str, ...]:
    return ("secrets", "gke", "serving") if raw.get("platform") == "gke" else ("secrets", "node")


STACK_CASES = [(label, kind) for label, raw in CONFIGS.items() for kind in _kinds(raw)]
# The serving stack of platform = "gke" also needs the pinned Kubernetes provider (its objects).
KUBERNETES = "registry.terraform.io/hashicorp/kubernetes"
KUBERNETES_VERSION = "2.38.0"


@pytest.mark.parametrize(("label", "kind"), STACK_CASES)
def test_terraform_accepts_every_shipped_stack_with_only_the_pinned_provider(
    terraform: str, synth: Synthesizer, tmp_path: Path, label: str, kind: str
) -> None:
    stacks = _stacks_of(synth, label)
    (name,) = [n for n in stacks if n.endswith(f"-{kind}")]
    found = required_providers(terraform, stacks[name], tmp_path)
    allowed = {f"{GOOGLE_BETA} {GOOGLE_BETA_VERSION}", BUILTIN}
    if kind == "serving":
        allowed.add(f"{KUBERNETES} {KUBERNETES_VERSION}")
        assert f"{KUBERNETES} {KUBERNETES_VERSION}" in found, found
    assert found <= allowed, found
    assert f"{GOOGLE_BETA} {GOOGLE_BETA_VERSION}" in found, found


def test_terraform_accepts_the_bootstrap_with_only_the_pinned_provider(
    terraform: str, bootstrap_outdir: Path, tmp_path: Path
) -> None:
    path = bootstrap_outdir / "stacks" / BOOTSTRAP_STACK / "cdk.tf.json"
    found = required_providers(terraform, json.loads(path.read_text()), tmp_path)
    assert found == {f"{GOOGLE_BETA} {GOOGLE_BETA_VERSION}"}, found


@pytest.mark.parametrize("label", list(CONFIGS))
def test_every_google_resource_names_the_google_beta_provider(
    synth: Synthesizer, label: str
) -> None:
    """The same fact as above, per resource, so a failure names the resource."""
    for name, stack in _stacks_of(synth, label).items():
        for rtype, items in stack.get("resource", {}).items():
            for rid, attrs in items.items():
                if rtype.startswith("google_"):
                    assert attrs.get("provider") == "google-beta", f"{name}: {rtype}.{rid}"


def _variables_only(doc: dict[str, Any]) -> dict[str, Any]:
    """The stack's variables and one output reading the project: what Terraform can apply with
    no provider at all, so the real validation expression is evaluated."""
    return {
        "variable": doc["variable"],
        "output": {"project": {"value": "${var.project}"}},
    }


@pytest.fixture
def variables_folder(synth: Synthesizer, tmp_path: Path, terraform: str) -> Path:
    stacks = synth(CONFIGS["deploy.toml"])
    node = next(doc for n, doc in stacks.items() if n.endswith("-node"))
    folder = tmp_path / "vars"
    folder.mkdir()
    (folder / "main.tf.json").write_text(json.dumps(_variables_only(node)), encoding="utf-8")
    init = run_terraform(terraform, ["init"], folder, tmp_path)
    assert init.returncode == 0, init.stderr
    return folder


def test_an_empty_project_is_refused_by_terraform_with_the_fix(
    terraform: str, variables_folder: Path, tmp_path: Path
) -> None:
    result = run_terraform(
        terraform, ["apply", "-auto-approve", "-var", "project="], variables_folder, tmp_path
    )
    assert result.returncode != 0
    assert "GOOGLE_CLOUD_PROJECT" in result.stderr, result.stderr


def test_a_project_passes_terraforms_validation(
    terraform: str, variables_folder: Path, tmp_path: Path
) -> None:
    result = run_terraform(
        terraform,
        ["apply", "-auto-approve", "-var", "project=my-proj-123"],
        variables_folder,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = run_terraform(terraform, ["output", "-raw", "project"], variables_folder, tmp_path)
    assert out.stdout == "my-proj-123"


# ---- no config string reaches Terraform as an expression --------------------------------------

_INTERPOLATION = re.compile(r"(?<!\$)\$\{([^}]*)\}|(?<!%)%\{")


def _json_strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (str(k), *_json_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _json_strings(v)]
    return [value] if isinstance(value, str) else []


def expressions(doc: dict[str, Any]) -> set[str]:
    """Every Terraform template expression in a stack's strings (escaped `$${` excluded); a
    `%{` directive is reported as itself."""
    found = set()
    for text in _json_strings(doc):
        for m in _INTERPOLATION.finditer(text):
            found.add(m.group(1) if m.group(1) is not None else "%{")
    return found


# The deadline of a spot or on-demand node (stacks/deadline_job.py): computed from the apply's
# time or `make extend`'s variable, and the job's cron line from it. Config strings never enter
# them.
_DEADLINE_EXPRESSIONS = (
    re.compile(
        r'var\.extended_deadline != "" \? var\.extended_deadline : '
        r'formatdate\("YYYY-MM-DD\'T\'hh:mm:00Z", timeadd\(timestamp\(\), "[0-9]+s"\)\)'
    ),
    re.compile(r'var\.extended_deadline == "" \|\| can\(timeadd\(var\.extended_deadline, "0s"\)\)'),
    re.compile(r'formatdate\("m h D M \'\*\'", (terraform_data\.[a-z-]+\.output)\)'),
    # The "stops soon" job's cron line: 30 minutes before the deadline (stacks/deadline_warn.py).
    re.compile(
        r'formatdate\("m h D M \'\*\'", timeadd\((terraform_data\.[a-z-]+\.output), "-[0-9]+m"\)\)'
    ),
    # The stop grant's condition: the deadline plus its margin (stacks/deadline_job.py).
    re.compile(r'timeadd\((terraform_data\.[a-z-]+\.output), "[0-9]+h"\)'),
)


# The GKE cluster's version (stacks/gke/cluster.py): the release channel's default from the
# zone's serverConfig, and the precondition comparing it, as one number, with [gke] min_version.
_CHANNEL_DEFAULT = (
    r"data\.google_container_engine_versions\.versions\.release_channel_default_version"
    r'\["(?:RAPID|REGULAR|STABLE|EXTENDED)"\]'
)
_VERSION_PART = (
    r'element\(regex\("\^\(\[0-9\]\+\)\[\.\]\(\[0-9\]\+\)\[\.\]\(\[0-9\]\+\)'
    r'-gke\[\.\]\(\[0-9\]\+\)\$", ' + _CHANNEL_DEFAULT + r"\), [0-3]\)"
)
_VERSION_EXPRESSIONS = (
    re.compile(_CHANNEL_DEFAULT),
    re.compile(
        r'\(tonumber\(format\("%d%03d%03d%010d", '
        + ", ".join([_VERSION_PART] * 4)
        + r"\)\) >= [0-9]+\)"
    ),
)


def allowed_expression(expr: str, doc: dict[str, Any]) -> bool:
    """var.project (and its validation), self.input (the provisioners), the deadline's own
    expressions, or an attribute of a resource this stack declares."""
    if expr in ("var.project", "self.input", "length(var.project) > 0"):
        return True
    for pattern in _DEADLINE_EXPRESSIONS:
        m = pattern.fullmatch(expr)
        if m:
            return not m.groups() or allowed_expression(m.group(1), doc)
    if expr == "var.deletion_protection":
        return True
    if any(p.fullmatch(expr) for p in _VERSION_EXPRESSIONS):
        return "google_container_engine_versions" in doc.get("data", {})
    # The serving stack's provider: the cluster's CA certificate, decoded.
    m = re.fullmatch(r"base64decode\((.+)\)", expr)
    if m:
        return allowed_expression(m.group(1), doc)
    m = re.fullmatch(r"data\.([a-z0-9_]+)\.([A-Za-z0-9_-]+)\.[a-z0-9_.\[\]]+", expr)
    if m:
        return m.group(2) in doc.get("data", {}).get(m.group(1), {})
    m = re.fullmatch(r"([a-z0-9_]+)\.([A-Za-z0-9_-]+)\.[a-z0-9_.\[\]]+", expr)
    return m is not None and m.group(2) in doc.get("resource", {}).get(m.group(1), {})


# Every string key a user controls, at values the config accepts.
HOSTILE_BUT_VALID: dict[str, Any] = {
    "project": "my-proj-123",
    "provisioning": "spot",
    "labels": {"team": "ml-infra", "cost_center": "x-1"},
    "network": {
        "network": "projects/host-proj-1/global/networks/shared",
        "subnetwork": "projects/host-proj-1/regions/us-west4/subnetworks/tpu",
        "allowed_cidrs": ["203.0.113.0/24"],
    },
    "vllm": {"extra_args": ["--served-model-name", '${file("/etc/passwd")}', "%{ if x }"]},
}


@pytest.mark.parametrize("label", [*CONFIGS, "hostile"])
def test_only_known_expressions_reach_terraform(synth: Synthesizer, label: str) -> None:
    stacks = synth(HOSTILE_BUT_VALID) if label == "hostile" else _stacks_of(synth, label)
    for name, doc in stacks.items():
        bad = sorted(e for e in expressions(doc) if not allowed_expression(e, doc))
        assert not bad, f"{name}: Terraform would evaluate {bad}"


def test_the_binary_is_the_version_the_project_is_tested_with(
    terraform: str, tmp_path: Path
) -> None:
    from tests.conftest import TERRAFORM_TESTED_VERSION

    out = run_terraform(terraform, ["version", "-json"], tmp_path, tmp_path)
    version = json.loads(out.stdout)["terraform_version"]
    if version != TERRAFORM_TESTED_VERSION and not os.environ.get("CI"):
        pytest.skip(
            f"terraform {version} here; the project is tested with {TERRAFORM_TESTED_VERSION}"
        )
    assert version == TERRAFORM_TESTED_VERSION
