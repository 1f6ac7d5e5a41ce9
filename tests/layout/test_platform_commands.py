"""Whether a command exists on a platform is data in one place: each Platform's `commands` (the
commands only one platform has: None where it has one, else why not and what to use instead).
Platform.require refuses by it, and everything else a user reads is tied to it here: what the
command does when run, `make help`'s markers and "GKE:" claims, what `make check` recommends,
docs/scale-out.md's table and its GKE command list, and the platform packages' own messages."""

from __future__ import annotations

import ast
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tpudeploy import cli, errors
from tpudeploy.config import parse_config
from tpudeploy.platform import PLATFORMS, summary_lines
from tpudeploy.tune.__main__ import main as tune_main

MAKEFILE = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
# How `make help` names each platform (the Makefile's "<label> only:" and "<label>:" prose).
LABELS = {"tpu-vm": "TPU VM", "gke": "GKE"}
# A config of each platform, without a project: a command that is not refused first asks for one.
CONFIGS = {"tpu-vm": "", "gke": 'platform = "gke"\n'}
COMMANDS = sorted({c for p in PLATFORMS.values() for c in p.commands})


def help_texts() -> dict[str, str]:
    """`make help`'s description of each target (the `## ` text after its rule)."""
    found = re.findall(r"^([a-zA-Z_-]+):.*?## (.*)$", MAKEFILE, flags=re.M)
    return dict(found)


# The command-line modules a target may run, by `python -m` name.
MAINS = {"tpudeploy": cli.main, "tpudeploy.tune": tune_main}


def tpudeploy_argv(target: str) -> tuple[str, list[str]]:
    """The `python -m tpudeploy[.tune] ...` command `make <target>` runs (its last one): the
    module and its argv."""
    recipe = MAKEFILE.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
    runs = re.findall(r"\$\(PY\) -m (tpudeploy(?:\.tune)?) (.*)$", recipe, flags=re.M)
    assert runs, f"make {target} runs no tpudeploy command"
    module, args = runs[-1]
    # make's own variables, as the target passes them on (a TUNE_ARGS-style list: the config).
    args = re.sub(r"\$\(TUNE_ARGS\)", "--config $(DEPLOY_CONFIG)", args)
    args = args.replace("$$BY", "2h").rstrip(" \\")
    # $(if $(X),--flag $(X)): unset in a plain `make <target>`, so nothing.
    args = re.sub(r"\$\(if (?:[^()]|\$\([^()]*\))*\)", "", args)
    return module, shlex.split(args.replace("$(DEPLOY_CONFIG)", "deploy.toml"))


def has(platform: str, command: str) -> bool:
    return PLATFORMS[platform].commands.get(command) is None


# ---- the data itself ---------------------------------------------------------------------------


def test_every_platform_answers_for_the_same_commands_and_each_is_a_make_target() -> None:
    keys = [set(p.commands) for p in PLATFORMS.values()]
    assert all(k == keys[0] for k in keys), "each platform says yes or no to every command"
    parser = cli.build_parser()
    for command in COMMANDS:
        assert command in help_texts(), f"{command} is no make target"
        # The target's own tpudeploy command line parses (argparse exits on an unknown one).
        module, argv = tpudeploy_argv(command)
        if module == "tpudeploy":
            assert parser.parse_args(argv).command == command
        else:  # make tune: python -m tpudeploy.tune run ...
            assert argv[0] == "run" and command == "tune", (module, argv)
        owners = [name for name in PLATFORMS if has(name, command)]
        # Listed means one platform lacks it; a command no platform has would be dead.
        assert 0 < len(owners) < len(PLATFORMS), (command, owners)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_the_command_does_what_the_data_says(
    platform: str,
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`make <command>`'s own tpudeploy command, on each platform: refused with the data's words
    before anything else is asked for (the config has no project), or not refused at all."""
    config = tmp_path / "deploy.toml"
    config.write_text(CONFIGS[platform], encoding="utf-8")
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    module, argv = tpudeploy_argv(command)
    if module != "tpudeploy":  # as its `if __name__ == "__main__"` runs it: one line, exit 1
        argv = [a if a != "deploy.toml" else str(config) for a in argv]
    rc = errors.run(lambda: MAINS[module](argv))
    err = capsys.readouterr().err
    cfg = parse_config(tomllib.loads(CONFIGS[platform]))
    instead = PLATFORMS[platform].commands[command]
    if instead is None:
        assert "does not apply to platform" not in err, err
        return
    expected = errors.NotOnThisPlatform(
        command, platform, instead.format(name=cfg.name, port=cfg.proxy.port)
    ).line()
    assert rc == 1
    assert err.strip().splitlines() == [expected]
    assert f'make {command} does not apply to platform = "{platform}"' in expected
    assert "{" not in expected


# ---- make help ---------------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_make_help_marks_each_command_with_the_platform_that_has_it(command: str) -> None:
    (owner,) = [name for name in PLATFORMS if has(name, command)]
    text = help_texts()[command]
    assert text.startswith(f"{LABELS[owner]} only: "), (command, text)


def test_make_help_marks_nothing_else_as_one_platforms() -> None:
    marked = {t for t, text in help_texts().items() if re.match(r"[\w ]+ only: ", text)}
    assert marked == set(COMMANDS)


def test_every_gke_claim_in_make_help_is_a_command_gke_has() -> None:
    """ "(GKE: the cluster's)", "GKE: the rollout": each names what the command does on GKE, so
    GKE must have it (the claim `make extend` made while GKE refused it)."""
    claims = {t: text for t, text in help_texts().items() if re.search(r"\bGKE( only)?:", text)}
    assert {"extend", "status", "wait", "destroy"} <= set(claims)
    for target in claims:
        assert has("gke", target), f"make help says what {target} does on GKE; GKE refuses it"


def test_tpu_vm_only_targets_make_no_claim_about_gke() -> None:
    for command in COMMANDS:
        if not has("gke", command):
            assert "GKE" not in help_texts()[command].replace("TPU VM only: ", "")


# ---- what make check recommends ----------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"provisioning": "spot"},
        {"platform": "gke"},
        {"platform": "gke", "max_run_duration": "none"},
        {"platform": "gke", "vllm": {"image": "vllm/vllm-tpu@sha256:" + "0" * 64}},
    ],
)
def test_make_check_recommends_no_command_its_platform_lacks(data: dict[str, object]) -> None:
    cfg = parse_config(data)
    platform = PLATFORMS[cfg.platform]
    text = "\n".join(summary_lines(cfg))
    for command, instead in platform.commands.items():
        if instead is None:
            continue
        for m in re.finditer(rf"\bmake {re.escape(command)}\b`?", text):
            # The one mention allowed: saying it does not apply, with the data's own words.
            assert text[m.end() :].startswith(" does not apply here: " + instead), text


def test_the_moving_tag_warning_gives_each_platform_its_own_fix() -> None:
    vm = "\n".join(summary_lines(parse_config({})))
    gke = "\n".join(summary_lines(parse_config({"platform": "gke"})))
    assert "After a boot, `make pin` writes the digests the node pulled" in vm
    pin = PLATFORMS["gke"].commands["pin"]
    assert pin is not None and f"`make pin` does not apply here: {pin}" in gke
    assert "After a boot, `make pin`" not in gke


# ---- the docs ----------------------------------------------------------------------------------


def test_scale_out_lists_only_commands_gke_has_to_run() -> None:
    """docs/scale-out.md's "How to deploy" block is what a GKE user types: every make target in
    it is one GKE has (the table of the rest is generated from the data, tools/readme.py)."""
    text = (REPO_ROOT / "docs" / "scale-out.md").read_text(encoding="utf-8")
    block = text.split("### How to deploy", 1)[1].split("```", 2)[1]
    targets = set(re.findall(r"\bmake ([a-z][a-z-]*)", block))
    assert {"deploy", "tls-cert", "status", "destroy"} <= targets
    for target in targets:
        assert target in help_texts(), target
        assert has("gke", target), f"docs/scale-out.md tells a GKE user to run make {target}"


def test_scale_out_table_is_the_data() -> None:
    from tools import readme

    text = readme.SCALE_OUT.read_text(encoding="utf-8")
    section = readme.platform_commands_section()
    assert section in text
    for command in COMMANDS:
        assert f"| `make {command}` |" in section


# ---- the platform packages' own messages -------------------------------------------------------


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that a user can read (docstrings left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_a_platform_package_tells_users_to_run_only_its_own_commands(platform: str) -> None:
    """Outside its `commands` data, a platform's messages never send its user to a command it
    refuses (GKE's code once said `make extend BY=2h moves it` while GKE refused extend)."""
    package = REPO_ROOT / "tpudeploy" / platform.replace("-", "")
    home = package / "platform.py"
    lacking = [c for c, instead in PLATFORMS[platform].commands.items() if instead is not None]
    found = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {text!r:.80}"
        for path in sorted(package.rglob("*.py"))
        if path != home
        for line, text in _strings(path)
        for command in lacking
        if re.search(rf"\bmake {re.escape(command)}\b", text)
    ]
    assert found == []
