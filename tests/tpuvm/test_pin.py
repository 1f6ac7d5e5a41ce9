"""`make pin` writes the node's digests into the deployment's TOML (comments and layout kept);
`make check` warns once while an image is a tag; status and wait show the node's build."""

from __future__ import annotations

import datetime
import io
import json
import os
import tomllib
from pathlib import Path

import pytest

from tests import boot_logs, cli_fork
from tests.fake_boot_apis import FakeTpu
from tpudeploy import bootcheck, cli, facts
from tpudeploy.config import parse_config
from tpudeploy.nodebuild import boot_expectations
from tpudeploy.render import compile_cache_key, pinned_cache_object, vllm_serve_args
from tpudeploy.tpuvm.pin import PinError, edit_toml, pin, verified_edit

PROJECT = "pin-proj-1"
VLLM_DIGEST = "vllm/vllm-tpu@sha256:" + "a" * 64
PROXY_DIGEST = "nginx@sha256:" + "b" * 64
# The proxy keeps its version tag beside the digest (the node checks the version it names).
PROXY_PINNED = f"{facts.PROXY_IMAGE}@sha256:" + "b" * 64
TODAY = datetime.date(2026, 12, 1)

TOML = """\
# The deployment. Keep this comment.
project = "pin-proj-1"          # trailing comment
# zone = "us-west4-a"

# [vllm]
# max_model_len = 32768

[vllm]
# the tuned launch
max_model_len = 32768  # the build log's
image = "vllm/vllm-tpu:nightly"   # moving

[load]
expected_clients = 16
"""


def attributes(
    *, phase: str = "ready", vllm: str = VLLM_DIGEST, proxy: str = PROXY_DIGEST
) -> dict[str, str]:
    build = bootcheck.build(
        boot_logs.vllm_log(),
        "vllm/vllm-tpu:nightly",
        vllm,
        json.dumps(boot_logs.IMAGE_VERSIONS),
        facts.PROXY_IMAGE,
        proxy,
        boot_logs.NGINX_V,
    )
    cfg = parse_config({})
    check = bootcheck.report(
        boot_logs.vllm_log(blocks=4500),
        boot_expectations(cfg, vllm_serve_args(cfg.vllm)),
        {"cache": "miss", "pull_s": 40, "restore_s": 0, "vllm_s": 857},
    )
    # What the node would have published, set by bootcheck.build itself.
    build["vllm"]["digest"] = vllm  # type: ignore[index]
    build["proxy"]["digest"] = proxy  # type: ignore[index]
    return {"phase": phase, "build": json.dumps(build), "boot-check": json.dumps(check)}


def test_pin_keeps_every_comment_and_line_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "deploy.toml"
    path.write_text(TOML)
    out = io.StringIO()
    assert pin(parse_config(tomllib.loads(TOML)), attributes(), path, out=out, today=TODAY) == 0
    text = path.read_text()
    data = tomllib.loads(text)
    assert data["vllm"]["image"] == VLLM_DIGEST
    assert data["proxy"]["image"] == PROXY_PINNED
    # Everything else parses to what it was.
    before = tomllib.loads(TOML)
    assert data["vllm"]["max_model_len"] == before["vllm"]["max_model_len"]
    assert data["load"] == before["load"] and data["project"] == before["project"]
    old, new = TOML.splitlines(), text.splitlines()
    changed = [line for line in old if line not in new]
    assert changed == ['image = "vllm/vllm-tpu:nightly"   # moving']
    assert [line for line in new if line not in old] == [
        f'image = "{VLLM_DIGEST}"  # vllm {boot_logs.VERSION}, tpu-inference '
        f"{boot_logs.IMAGE_VERSIONS['tpu-inference']}, jax 0.7.2, jaxlib 0.7.2, libtpu 0.0.21; "
        "make pin 2026-12-01",
        "[proxy]",
        f'image = "{PROXY_PINNED}"  # nginx {facts.PROXY_NGINX_VERSION}; make pin 2026-12-01',
    ]
    # A second pin on the pinned file changes nothing.
    pinned = parse_config(data)
    assert pinned.vllm.image == VLLM_DIGEST
    attrs = attributes()
    for role, ref in (("vllm", VLLM_DIGEST), ("proxy", PROXY_PINNED)):
        build = json.loads(attrs["build"])
        build[role]["image"] = ref
        attrs["build"] = json.dumps(build)
    again = io.StringIO()
    pin(pinned, attrs, path, out=again, today=TODAY)
    assert path.read_text() == text and "already pinned" in again.getvalue()


def test_a_table_without_an_image_line_gets_one_under_its_header() -> None:
    text = "[vllm]  # tuned\nmax_model_len = 16384\n\n[proxy]\nport = 9443\n"
    images = {"vllm": (VLLM_DIGEST, "v"), "proxy": (PROXY_PINNED, "n")}
    result = verified_edit(text, images, source="t.toml")
    assert result.splitlines() == [
        "[vllm]  # tuned",
        f'image = "{VLLM_DIGEST}"  # v',
        "max_model_len = 16384",
        "",
        "[proxy]",
        f'image = "{PROXY_PINNED}"  # n',
        "port = 9443",
    ]


def test_an_inline_table_is_refused_with_the_fix() -> None:
    with pytest.raises(PinError, match=r"vllm is an inline table; write it as a \[vllm\] table"):
        edit_toml("vllm = { max_model_len = 16384 }\n", {"vllm": (VLLM_DIGEST, "v")})


def test_a_config_blob_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deploy.toml"
    path.write_text(TOML)
    blob = "sha256:" + "c" * 64
    with pytest.raises(PinError) as refused:
        pin(parse_config(tomllib.loads(TOML)), attributes(vllm=blob), path, out=io.StringIO())
    message = str(refused.value)
    assert message.startswith(f"vllm.image: the node reported '{blob}', a bare sha256")
    assert "unexpected media type" in message and "RepoDigest" in message
    assert path.read_text() == TOML  # untouched


def test_a_node_that_is_not_ready_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deploy.toml"
    path.write_text(TOML)
    with pytest.raises(PinError, match=r"not ready \(phase starting-vllm\).*make wait"):
        pin(parse_config({}), attributes(phase="starting-vllm"), path, out=io.StringIO())
    assert path.read_text() == TOML


def test_a_digest_of_another_repository_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deploy.toml"
    path.write_text(TOML)
    other = "mirror.example/vllm-tpu@sha256:" + "a" * 64
    with pytest.raises(PinError, match=r"the node's digest is for 'mirror\.example/vllm-tpu'"):
        pin(parse_config({}), attributes(vllm=other), path, out=io.StringIO())


def test_make_pin_reads_the_running_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deploy.toml"
    path.write_text(TOML)
    monkeypatch.setenv("DEPLOY_CONFIG", str(path))
    attrs = attributes()
    phase = attrs.pop("phase")
    with FakeTpu([(phase, "")], attributes=attrs) as fake:
        monkeypatch.setenv("TPU_EMULATOR_HOST", fake.host)
        assert cli.main(["pin"]) == 0
    assert tomllib.loads(path.read_text())["vllm"]["image"] == VLLM_DIGEST
    assert f"vllm.image = '{VLLM_DIGEST}'" in capsys.readouterr().out
    # Refused: one line, the file unchanged.
    path.write_text(TOML)
    with FakeTpu([("pulling-image", "")]) as fake:
        monkeypatch.setenv("TPU_EMULATOR_HOST", fake.host)
        assert cli.main(["pin"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the node is not ready (phase pulling-image)")
    assert "Traceback" not in err and path.read_text() == TOML


def check_output(tmp_path: Path, text: str) -> str:
    config = tmp_path / "deploy.toml"
    config.write_text(text)
    result = cli_fork.run(
        ["check"],
        env={**os.environ, "DEPLOY_CONFIG": str(config)},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_make_check_warns_once_while_an_image_is_a_tag(tmp_path: Path) -> None:
    out = check_output(tmp_path, "")
    warned = [line for line in out.splitlines() if "a tag, not a digest" in line]
    assert len(warned) == 1 and out.count("make pin") == 1
    assert warned[0].startswith("warning: vllm.image = 'vllm/vllm-tpu:nightly'")
    assert f"proxy.image = {facts.PROXY_IMAGE!r} too" in warned[0]
    pinned = f'[vllm]\nimage = "{VLLM_DIGEST}"\n[proxy]\nimage = "{PROXY_PINNED}"\n'
    assert "a tag, not a digest" not in check_output(tmp_path, pinned)


def test_the_pinned_cache_object_is_named_before_the_boot() -> None:
    assert pinned_cache_object(parse_config({})) is None
    cfg = parse_config({"vllm": {"image": VLLM_DIGEST}})
    # Pinning keeps the compile-cache key (the repository, not the tag, enters it).
    assert compile_cache_key(cfg) == compile_cache_key(parse_config({}))
    assert pinned_cache_object(cfg) == f"xla/{compile_cache_key(cfg)}/{'a' * 64}.tar.gz"


def test_status_and_wait_show_the_build_and_the_boot_checks_warnings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tpudeploy.tpuvm import guestattributes
    from tpudeploy.tpuvm.queued_resource import TpuApi
    from tpudeploy.tpuvm.wait import wait_ready

    cfg = parse_config({"project": PROJECT})
    attrs = attributes()
    phase = attrs.pop("phase")
    with FakeTpu([(phase, "")], attributes=attrs) as fake:
        monkeypatch.setenv("TPU_EMULATOR_HOST", fake.host)
        status = "\n".join(
            guestattributes.status_lines(cfg, PROJECT, api=TpuApi(log=io.StringIO()))
        )
        out = io.StringIO()
        rc = wait_ready(cfg, PROJECT, api=TpuApi(log=io.StringIO()), out=out, sleep=lambda _: None)
    assert f"vllm image vllm/vllm-tpu:nightly\n  digest {VLLM_DIGEST}" in status
    assert f"reports vllm {boot_logs.VERSION}" in status
    version = facts.PROXY_NGINX_VERSION
    assert f"proxy image nginx:{version}" in status and f"nginx {version}" in status
    assert "boot check: 1 warning(s), 0 open win(s) reached" in status
    assert "  warning: KV pool 4,500 blocks x 64 = 288,000 tokens" in status
    assert "  ok: memory cap 14.49 GiB" in status  # status shows every finding
    assert rc == 0
    waited = out.getvalue()
    assert "  warning: KV pool 4,500 blocks" in waited and "safe concurrency" in waited
    assert "ok: memory cap" not in waited  # wait shows warnings and wins only
