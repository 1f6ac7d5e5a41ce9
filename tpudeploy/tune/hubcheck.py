"""The drafts' gated checkpoint checked on Hugging Face before any spend (tpudeploy/hfhub.py).

An arm whose draft the stored token cannot download boots, bills, and fails at the download; a
draft larger than its stated bound (tpudeploy/config/speculative.py) may not fit the node's
HF_HOME tmpfs. So:

- `make tune` reads the token `make secret` stored (Secret Manager, into memory, as `make smoke`
  reads its key) and asks the Hub about every draft of the run before the first deploy; any
  refusal stops the run before a node exists.
- `make tune-plan` does the same when credentials are there, and otherwise says the check was not
  run (it stays offline and free).
- `make secret` checks the base model and every draft the repo's tune arms name with the token
  it just stored, and warns (never fails: the token is stored either way).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TextIO

from tpudeploy import hfhub
from tpudeploy.config import ConfigError, DeployConfig, config_path, require_project
from tpudeploy.config.speculative import DRAFTS, Draft, draft_of
from tpudeploy.gcp import session as gcp_session
from tpudeploy.gcp.apis import SECRET_MANAGER
from tpudeploy.gcp.secretmanager import SecretStore, SecretStoreError
from tpudeploy.tune.arms import ARMS_DIR
from tpudeploy.tune.plan import TunePlan
from tpudeploy.tune.runner import TuneError

NOT_RUN = "Hugging Face check not run"


def _mb(n: int) -> str:
    return f"{math.ceil(n / 10**6):,} MB"


def plan_drafts(plan: TunePlan) -> dict[str, Draft]:
    """The drafts the plan's arms download, each once."""
    out: dict[str, Draft] = {}
    for p in plan.arms:
        found = draft_of(p.arm.config.vllm.speculative_config) if p.arm.config else None
        if found is not None:
            out[found[0]] = found[1]
    return out


def read_token(cfg: DeployConfig) -> str:
    """The latest version of the deployment's token secret, into memory only. SecretStoreError
    (no credentials, no secret, or refused: reading needs roles/secretmanager.secretAccessor on
    it) or ConfigError (no project), each with its fix."""
    require_project(cfg, source=str(config_path()))
    # from_disk_first: a machine without credentials answers at once, never probing the
    # metadata server (tpudeploy/gcp/session.py).
    session, base_url = gcp_session.session(SECRET_MANAGER, SecretStoreError, from_disk_first=True)
    store = SecretStore(cfg.project, session=session, base_url=base_url)
    return store.access_latest(cfg.hf_token_secret_id).strip()


def refusal(cfg: DeployConfig, answer: hfhub.RepoAnswer, bound: int | None) -> str | None:
    """Why booting with this repo would bill and fail, naming the repo, the Hub's answer and
    the fix; None when the token may download it within the stated bound."""
    where = f"the token `make secret` stored ({cfg.hf_token_secret_id})"
    head = f"{answer.repo}: Hugging Face answered {answer.answered} for {where}"
    why = "a boot would bill and then fail at the download"
    if answer.access == hfhub.GATED_NO_ACCESS:
        return (
            f"{head}: gated, and that account has not been granted access; {why}. Accept the "
            f"licence at https://huggingface.co/{answer.repo} with the account whose token "
            "`make secret` stored (or store that account's token: `make secret`)"
        )
    if answer.access in (hfhub.BAD_TOKEN, hfhub.NO_TOKEN):
        return (
            f"{head}: {answer.access}; {why}. Store a valid read token: `make secret` "
            "(huggingface.co/settings/tokens)"
        )
    if answer.access == hfhub.FORBIDDEN:
        return (
            f"{head}: {answer.access}; {why}. Store a token that may read it: a Read token, or a "
            "fine-grained one with read access to this repo (huggingface.co/settings/tokens), "
            "then `make secret`"
        )
    if answer.access == hfhub.NOT_FOUND:
        return (
            f"{head}: {answer.access}; {why}. Check the repo name (tpudeploy/config/"
            "speculative.py, the arm's speculative_config.model) and the token's account"
        )
    size = answer.download_bytes
    if bound is not None and size is not None and size > bound:
        return (
            f"{answer.repo}: measured {_mb(size)} on Hugging Face ({answer.weights_format} "
            "weights and the other files, sizes asked with blobs=true), over the stated bound of "
            f"{_mb(bound)} in tpudeploy/config/speculative.py, which the node's HF_HOME tmpfs "
            "is checked against; the download could fill it after the node bills. Update the "
            f"bound (DRAFTS[{answer.repo!r}].bytes) to at least {size}"
        )
    return None


def check_drafts(
    cfg: DeployConfig, drafts: dict[str, Draft], token: str
) -> tuple[list[str], list[str]]:
    """(what was checked and passed, refusals) for each draft, asked with `token`."""
    passed, refused = [], []
    for name, draft in drafts.items():
        try:
            answer = hfhub.check_repo(name, token)
        except hfhub.HubError as exc:
            refused.append(f"{name}: {exc}")
            continue
        why = refusal(cfg, answer, draft.bytes)
        if why:
            refused.append(why)
        else:
            assert answer.download_bytes is not None
            passed.append(
                f"{name}: checked on Hugging Face ({answer.answered} to the access check, "
                f"gated {answer.gated!r}): this token may download it; {_mb(answer.download_bytes)}"
                f" measured, within the stated {_mb(draft.bytes)}"
            )
    return passed, refused


def plan_lines(plan: TunePlan, base: DeployConfig) -> list[str]:
    """`make tune-plan`'s lines on the drafts: checked with the stored token when credentials
    are there; otherwise that the check was not run and why (the plan stays offline)."""
    drafts = plan_drafts(plan)
    if not drafts:
        return []
    try:
        token = read_token(base)
    except (SecretStoreError, ConfigError) as exc:
        return [
            # The reason last: a config error runs over several lines.
            f"{NOT_RUN} for {', '.join(drafts)} (the size above is the stated bound, the licence "
            f"unchecked; `make tune` runs it before the first boot), because: {exc}"
        ]
    passed, refused = check_drafts(base, drafts, token)
    return [*passed, *(f"REFUSED before spend: {r}" for r in refused)]


def require_before_spend(plan: TunePlan, base: DeployConfig) -> list[str]:
    """`make tune`, before any node: every draft checked with the stored token; TuneError naming
    each refusal (or why the token could not be read). Returns the passed lines."""
    drafts = plan_drafts(plan)
    if not drafts:
        return []
    try:
        token = read_token(base)
    except (SecretStoreError, ConfigError) as exc:
        raise TuneError(
            f"make tune checks that the stored Hugging Face token may download "
            f"{', '.join(drafts)} before any node bills, and could not read the token: {exc}"
        ) from None
    passed, refused = check_drafts(base, drafts, token)
    if refused:
        raise TuneError(
            "not starting: " + "\n  ".join(["a draft would fail after the node bills:", *refused])
        )
    return passed


def arm_drafts(arms_dir: Path = ARMS_DIR) -> list[str]:
    """Every draft the repo's tune arms name (vllm.speculative_config.model), read as TOML."""
    out: list[str] = []
    for path in sorted(arms_dir.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            continue  # make tune-plan says what is wrong with an arm file
        spec = data.get("vllm", {}).get("speculative_config", {})
        name = spec.get("model") if isinstance(spec, dict) else None
        if isinstance(name, str) and name not in out:
            out.append(name)
    return out


def secret_warnings(cfg: DeployConfig, repos: Iterable[str]) -> Callable[[str], list[str]]:
    """For `make secret`: a check of `repos` with the token just stored, as warnings."""

    def check(token: str) -> list[str]:
        lines = []
        for repo in repos:
            try:
                answer = hfhub.check_repo(repo, token)
            except hfhub.HubError as exc:
                lines.append(f"warning: could not check {repo} on Hugging Face: {exc}")
                continue
            bound = DRAFTS[repo].bytes if repo in DRAFTS else None
            why = refusal(cfg, answer, bound)
            lines.append(f"warning: {why}" if why else f"checked: this token may download {repo}")
        return lines

    return check


def store_token(cfg: DeployConfig, stdin: TextIO, out: TextIO) -> int:
    """`make secret`: store the token, then check the base model and the arms' drafts with it."""
    from tpudeploy.gcp import secretmanager

    project = cfg.project
    repos = [cfg.vllm.model, *(d for d in arm_drafts() if d != cfg.vllm.model)]
    return secretmanager.store_hf_token(
        cfg,
        lambda: secretmanager.SecretStore.from_env(project),
        stdin,
        out,
        check=secret_warnings(cfg, repos),
    )
