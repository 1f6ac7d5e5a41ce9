"""The proxy's nginx is the version pinned, in one place (issue 21, defect 5): the boot runs
`nginx -v` in the pulled image and refuses to open a front door of another version."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.boot_sandbox import PROJECT, Node
from tpudeploy import facts
from tpudeploy.config import ConfigError, DeployConfig, parse_config
from tpudeploy.config.proxy import nginx_version


@pytest.fixture(scope="module")
def cfg() -> DeployConfig:
    return parse_config({"project": PROJECT})


def test_the_pin_is_a_release_nginx_history_proves() -> None:
    # nginx/nginx's newest stable tag as stored is release-1.30.4 (2026-07-15); 1.30.5 is in no
    # stored nginx release, so the default must not be it.
    assert parse_config({}).proxy.image == facts.PROXY_IMAGE == "nginx:1.30.4"


# A whole boot under bash with stand-ins: `make mutants` (which lists this file for its pure
# tests) leaves it out, as it does every test of the `boot` fixture (tests/conftest.py).
@pytest.mark.slow
def test_the_boot_checks_the_running_nginx_and_publishes_it(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    node = Node(tmp_path, cfg)
    assert node.run().returncode == 0
    checks = [
        c for c in node.calls("docker") if c["argv"][:2] == ["run", "--rm"] and "-v" in c["argv"]
    ]
    assert [c["argv"][-2:] for c in checks] == [[cfg.proxy.image, "-v"]]
    assert (
        "tpudeploy/proxy-version",
        f"nginx/{facts.PROXY_NGINX_VERSION}",
    ) in node.guest_attributes()


# A whole boot under bash with stand-ins: `make mutants` (which lists this file for its pure
# tests) leaves it out, as it does every test of the `boot` fixture (tests/conftest.py).
@pytest.mark.slow
def test_an_image_that_is_not_its_tags_version_fails_the_boot_with_the_reason(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    node = Node(tmp_path, cfg, nginx_versions={cfg.proxy.image: "1.26.3"})
    assert node.run().returncode != 0
    assert node.phases()[-1] == "failed" and "ready" not in node.phases()
    reason = node.reasons()[-1]
    assert f"runs 'nginx version: nginx/1.26.3', not nginx/{facts.PROXY_NGINX_VERSION}" in reason
    assert "[proxy] image" in reason
    # The front door never opened.
    assert cfg.proxy.container_name not in node.docker_runs()


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("nginx:1.30.4", "1.30.4"),
        ("nginx:1.30.4-alpine", "1.30.4"),
        ("nginx:1.30.4@sha256:" + "e" * 64, "1.30.4"),
        ("nginx:stable", ""),
        ("nginx", ""),
    ],
)
def test_the_version_comes_from_the_tag(image: str, version: str) -> None:
    assert nginx_version(image) == version


def test_an_image_without_a_version_tag_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"proxy": {"image": "nginx:stable"}})
    (problem,) = err.value.problems
    assert problem.startswith("proxy.image = 'nginx:stable': the proxy image must carry")
    assert facts.PROXY_IMAGE in problem
