"""The first hour's small things (issue 23 items 6 and 10): cheap checks before credentials and
downloads, every config problem in one round, and output a newcomer can read."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from google.auth.exceptions import DefaultCredentialsError

from tests import cli_fork
from tests.commands.test_no_traceback import run
from tests.conftest import REPO_ROOT
from tests.layout.test_readme import _user_strings
from tpudeploy import errors, planner, platform
from tpudeploy.config import ConfigError, parse_config

MAKEFILE = REPO_ROOT / "Makefile"


def _make_n(*args: str) -> list[str]:
    """The recipe lines make would run, as if package.json had just changed (so the cdktf
    CLI's install is due, as on a fresh clone); nothing is run."""
    result = subprocess.run(
        ["make", "-n", "-W", "package.json", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.splitlines()


@pytest.mark.parametrize(
    ("target", "purpose"),
    [
        ("deploy", "deploy"),
        ("diff", "diff"),
        ("deploy-secrets", "deploy-secrets"),
        ("destroy", "destroy"),
        ("destroy-all", "destroy"),
    ],
)
def test_preflight_runs_before_the_node_install(target: str, purpose: str) -> None:
    lines = _make_n(target)
    preflight = [i for i, x in enumerate(lines) if f"-m tpudeploy preflight {purpose}" in x]
    install = [i for i, x in enumerate(lines) if x.startswith("npm ci")]
    assert preflight and install, lines
    assert preflight[0] < install[0], lines


def test_extend_needs_no_node_install() -> None:
    assert not [x for x in _make_n("extend", "BY=2h") if x.startswith("npm ")]


@pytest.mark.parametrize(
    ("config", "by", "said"),
    [
        ("", "2h", "provisioning = 'flex-start': the TPU API fixes a run's end"),
        ('provisioning = "spot"\n', "banana", "BY"),
    ],
)
def test_extend_says_it_does_not_apply_before_asking_for_anything(
    tmp_path: Path, config: str, by: str, said: str
) -> None:
    """No project and no credentials: the answer comes from the config and BY alone."""
    result = run_with(tmp_path, config, ["extend", by])
    assert result.returncode == 1, result.stderr
    assert said in result.stderr
    assert "credentials" not in result.stderr and "project" not in result.stderr.lower()


def run_with(tmp_path: Path, config: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    import os

    path = tmp_path / "only.toml"
    path.write_text(config)
    env = {k: v for k, v in os.environ.items() if k not in ("GOOGLE_CLOUD_PROJECT",)}
    env.update(
        DEPLOY_CONFIG=str(path),
        CLOUDSDK_CONFIG=str(tmp_path / "gcloud"),
        GOOGLE_APPLICATION_CREDENTIALS=str(tmp_path / "none.json"),
        GCE_METADATA_HOST="127.0.0.1:9",
        NO_GCE_CHECK="true",
    )
    return cli_fork.run(
        [*args],
        env=env,
        timeout=60,
    )


def test_secret_reads_stdin_before_credentials(tmp_path: Path) -> None:
    result = run(tmp_path, ["secret"], "not-a-token", {}, None)
    assert "not a Hugging Face access token" in result.stdout + result.stderr
    assert "credentials" not in result.stdout + result.stderr


def test_smoke_without_credentials_names_what_lets_it_run(tmp_path: Path) -> None:
    result = run(tmp_path, ["smoke"], "", {"ENDPOINT": "https://127.0.0.1:9"}, None)
    assert result.returncode != 0
    assert errors.CREDENTIALS_FIX in result.stderr
    for variable in ("TLS_SHA256", "VLLM_API_KEY"):
        assert variable in result.stderr, result.stderr


def test_config_problems_come_in_one_round() -> None:
    """Four mistakes (a schema error, an unknown key, a cross-key check, a guard rail): four
    problems, where the first round used to stop at the schema's two."""
    data = {
        "vllm": {"max_model_len": "x", "gpu_memory_utilization": 0.95},
        "allowed_cidrs": ["203.0.113.0/24"],
        "zone": "europe-west4-a",
    }
    with pytest.raises(ConfigError) as caught:
        platform.parse_config(data, source="deploy.toml")
    text = str(caught.value)
    for key in ("vllm.max_model_len", "allowed_cidrs", "zone", "vllm.gpu_memory_utilization"):
        assert re.search(rf"^  - (error: )?{re.escape(key)} = ", text, flags=re.M), key
    assert "4 problem(s)" in text


def test_a_key_outside_its_table_is_pointed_at_its_table() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"allowed_cidrs": ["203.0.113.0/24"]})
    assert "did you mean `[network] allowed_cidrs`?" in str(caught.value)


def test_the_ops_commands_do_not_echo_their_python_lines() -> None:
    lines = MAKEFILE.read_text().splitlines()
    # A line continuing the one before (a trailing backslash) is not a recipe line of its own.
    echoed = [
        line
        for before, line in zip(["", *lines], lines, strict=False)
        if re.match(r"^\t\$\(PY\) -m (tpudeploy|tools\.rehearsal)", line)
        and not before.endswith("\\")
    ]
    assert echoed == []


def test_help_is_sorted_and_aligned() -> None:
    out = subprocess.run(
        ["make", "--no-print-directory", "help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.splitlines()
    names = [line.split()[0] for line in out]
    assert names == sorted(names) and "deploy" in names
    columns = {len(line) - len(line[2:].split(" ", 1)[1].lstrip()) for line in out}
    assert len(columns) == 1, out


def test_google_auth_messages_are_whole_and_never_a_tuple() -> None:
    adc = (
        "Your default credentials were not found. To set up Application Default Credentials, "
        "see https://cloud.google.com/docs/authentication/external/set-up-adc for more "
        "information."
    )
    line, _ = errors.explain(DefaultCredentialsError(adc))  # type: ignore[no-untyped-call]
    assert adc in line and "..." not in line
    bad_file = DefaultCredentialsError(  # type: ignore[no-untyped-call]
        "File /x/key.json is not a valid json file.", ValueError("Expecting value: line 1")
    )
    line, _ = errors.explain(bad_file)
    assert "('" not in line and "ValueError(" not in line
    assert "is not a valid json file.; Expecting value: line 1" in line


def test_no_jargon_in_what_users_read() -> None:
    assert "shared read layers" not in planner.capacity_table(parse_config({}))
    said = [f"{p}:{n}: {s!r}" for p, n, s in _user_strings() if re.search(r"\bQR\b", s)]
    assert said == []
