"""The README and docs/ stay true: generated sections match the code, the commands exist, the
README stays a first page that reaches `make rehearse` and the first paid deploy."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tools import readme
from tpudeploy import facts

ROOT = Path(__file__).resolve().parents[2]


def test_generated_sections_match_the_code() -> None:
    for path, sections in readme.FILES.items():
        text = path.read_text()
        assert readme.render(text, sections) == text, f"{path.name} is stale: run `make readme`"


def test_generated_section_holds_the_seed_figures() -> None:
    section = readme.capacity_cost_section()
    for figure in ("18,432 B", "$0.107", "$0.111", "$0.223", "6.2 h", "3.6 h", "3.94 ms"):
        assert figure in section


def test_quick_start_commands_are_make_targets() -> None:
    text = readme.README.read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^make (\S+)", quick, flags=re.M)
    assert commands == ["synth", "test", "rehearse"]
    makefile = (ROOT / "Makefile").read_text()
    for target in commands:
        assert re.search(rf"^{target}:", makefile, flags=re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    # What `make test` needs beyond the venv, named where the command is, with the installer.
    assert "nginx" in quick and "curl" in quick and ".ci/system-packages" in quick
    for package in ("nginx", "curl"):
        assert package in (ROOT / ".ci" / "system-packages").read_text()


def test_the_first_screen_reaches_the_rehearsal_and_the_first_paid_deploy() -> None:
    """Issue 23 item 8: `make rehearse` sat at line 756 of a 10,600-word README."""
    text = readme.README.read_text()
    first_screen = "\n".join(text.splitlines()[:40])
    assert "make rehearse" in first_screen
    assert _sections(text)[:2] == [
        "Quick start (no cloud account, no credentials)",
        "Your first paid deploy",
    ]
    # A page read in ten minutes: at most ~2,000 words at a slow 200 words a minute.
    assert len(text.split()) < 2000, len(text.split())


def test_every_docs_page_is_linked_from_the_readme() -> None:
    text = readme.README.read_text()
    for page in sorted(readme.DOCS.glob("*.md")):
        assert f"](docs/{page.name})" in text, page.name


# ---- what a new user reads first (issue 15) ---------------------------------------------------


def _sections(text: str) -> list[str]:
    return re.findall(r"^## (.+)$", text, flags=re.M)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_build_log_the_readme_points_at_is_in_the_repository() -> None:
    text = readme.README.read_text()
    assert "docs/build-log.md" in re.findall(r"\]\((docs/[^)#]+)", text)
    for page in readme.PAGES:
        body = page.read_text()
        assert "../shared" not in body, page.name
        # Every relative link (and its #anchor) resolves from the page that holds it.
        for target, anchor in re.findall(r"\]\(([^)#:]+\.md)(?:#([^)]+))?\)", body):
            linked = (page.parent / target).resolve()
            assert linked.is_file(), f"{page.name}: {target}"
            if anchor:
                headings = re.findall(r"^#+ (.+)$", linked.read_text(), flags=re.M)
                assert anchor in [_anchor(h) for h in headings], f"{page.name}: {target}#{anchor}"
    summary = readme.BUILD_LOG.read_text()
    assert facts.SOURCE_URL in summary and facts.PUBLISHED in summary


def test_before_you_spend_money_comes_first_and_covers_the_checklist() -> None:
    text = readme.DEPLOYING.read_text()
    assert _sections(text)[0] == "Before you spend money"
    assert "docs/deploying.md#before-you-spend-money" in readme.README.read_text()
    checklist = text.split("## Before you spend money", 1)[1].split("\n## ", 1)[0]
    for item in (
        "roles",  # the user's own IAM roles
        "Quota",
        "Gemma licence",
        "flex-start queued resource waits",
        "Cloud Scheduler job deletes the node",
        "replaces a running node",
        "allowed_cidrs",
    ):
        assert item in checklist, item


def test_one_deploy_order_everywhere() -> None:
    """Every listing that names the deploy commands names them in the order the preflight
    enforces: the long-lived stack, the token, the key, then the node."""
    order = ["deploy-secrets", "secret", "api-key", "deploy"]
    blocks = [
        block
        for page in readme.PAGES
        for lang, block in re.findall(r"^```(\w*)\n(.*?)^```", page.read_text(), flags=re.M | re.S)
        if not lang
    ]
    listings = 0
    for block in blocks:
        targets = re.findall(r"^make ([a-z-]+)", block, flags=re.M)
        named = [t for t in targets if t in order]
        if "deploy" in named and len(named) > 1:
            listings += 1
            assert sorted(named, key=order.index) == named, named
    assert listings >= 2  # the README's first deploy and docs/deploying.md's full listing


def test_the_openai_client_example_names_base_url_model_and_key() -> None:
    text = readme.DEPLOYING.read_text()
    (example,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    ast.parse(example)
    assert 'base_url="https://localhost:8443/v1"' in example
    assert f'model="{facts.MODEL}"' in example
    assert "api_key=" in example and "api-key" in example
    assert 'verify="node.pem"' in example and "CERT_OUT=node.pem make endpoint" in text


# The random seeds of the benchmark are the only seeds a user may meet.
RANDOM_SEED = re.compile(
    r"--seed|base[ _]seed|seeds are|(?:a|own|same|repeated|different|reuse a) seed", re.I
)


def _user_strings() -> list[tuple[str, int, str]]:
    """String literals that reach users (docstrings aside) in every module and the Makefile."""
    found = []
    for path in sorted(
        [*ROOT.glob("tpudeploy/**/*.py"), *ROOT.glob("stacks/*.py"), ROOT / "main.py"]
    ):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        # Identifiers (`__all__` entries such as SEED_PRICES) are code, not words.
        found += [
            (str(path.relative_to(ROOT)), node.lineno, node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and not node.value.isidentifier()
        ]
    for number, line in enumerate((ROOT / "Makefile").read_text().splitlines(), 1):
        if "## " in line:
            found.append(("Makefile", number, line.split("## ", 1)[1]))
    return found


def test_users_read_the_build_log_never_the_seed() -> None:
    said = [
        f"{path}:{line}: {text!r}"
        for path, line, text in _user_strings()
        if re.search(r"\bseed", RANDOM_SEED.sub("", text), re.I)
    ]
    assert said == []
    for page in readme.PAGES:
        text = RANDOM_SEED.sub("", page.read_text())
        assert not re.search(r"\bseed", text, re.I), page.name


# ---- every money claim is the code's value (issue 23 item 2) ----------------------------------


def _money_text() -> str:
    """docs/deploying.md's money sections, with line breaks folded to spaces."""
    text = readme.DEPLOYING.read_text()
    sections = re.split(r"^## ", text, flags=re.M)
    wanted = [s for s in sections if s.startswith(("Before you spend money", "Three provisioning"))]
    assert len(wanted) == 2
    return " ".join(" ".join(wanted).split())


def test_money_claims_are_the_codes_values() -> None:
    from tpudeploy.config import parse_config
    from tpudeploy.durations import MAX_DURATION_SECONDS
    from tpudeploy.planner import hourly_cost, monthly_cost, preemption_break_even

    text = _money_text()
    hours = {
        pm: (parse_config({"provisioning": pm}).max_run_duration_seconds or 0) / 3600
        for pm in ("flex-start", "spot", "on-demand")
    }
    rate = {pm: hourly_cost(pm) for pm in hours}
    premium = (rate["flex-start"] / rate["spot"] - 1) * 100
    on_demand = (rate["on-demand"] / rate["spot"] - 1) * 100
    cold = preemption_break_even(facts.COLD_BOOT_S).interval_h
    warm = preemption_break_even(facts.WARM_BOOT_S).interval_h
    claims = [
        f"`max_run_duration` (default {hours['flex-start']:g} h) or `make destroy`",
        f"deploy time + `max_run_duration` (default {hours['spot']:g} h)",
        f"(default {hours['flex-start']:g}h, at most {MAX_DURATION_SECONDS // 86400}d)",
        f"(default {hours['spot']:g}h; `make extend BY=2h` moves it)",
        f"the same deadline job (default {hours['on-demand']:g}h)",
        f"({facts.COLD_BOOT_S:.0f} s, {facts.COMPILE_S:.0f} s of it compiling)",
        f"| `flex-start` (default) | {rate['flex-start']:.4f} (+{premium:.1f}% vs spot)",
        f"| `spot` | {rate['spot']:.4f} |",
        f"| `on-demand` | {rate['on-demand']:.4f} (+{on_demand:.0f}%)",
        f"(${monthly_cost('spot'):.0f} spot, ${monthly_cost('on-demand'):.0f} on-demand)",
        f"(${rate['spot']:.2f} x 60 h, about ${rate['spot'] * 60:.0f})",
        f"spot's {premium:.1f}% saving",
        f"every {cold:.1f} h (a cold recompile) or {warm:.1f} h (warm",
    ]
    missing = [claim for claim in claims if claim not in text]
    assert missing == [], "docs/deploying.md disagrees with the code: " + "; ".join(missing)


def test_what_stops_the_billing_is_what_the_code_does() -> None:
    """The old checklist said spot and on-demand bill "with nothing stopping them", while the
    deadline job stops both by default: each stop the text names is the one the code declares."""
    from tpudeploy.config import parse_config
    from tpudeploy.planner import synth_summary

    text = _money_text()
    assert "nothing stopping" not in text
    for pm in ("spot", "on-demand"):
        stops = synth_summary(parse_config({"provisioning": pm}))[1]
        assert "Cloud Scheduler job deletes the node" in stops
        never = synth_summary(parse_config({"provisioning": pm, "max_run_duration": "none"}))[1]
        assert "NOTHING stops" in never
    assert "when a Cloud Scheduler job deletes the node" in text
    assert '`max_run_duration = "none"` leaves `make destroy` as the one stop' in text
    flex = synth_summary(parse_config({}))[1]
    assert "on its own after max run duration" in flex


def test_the_scale_out_figures_are_the_planners() -> None:
    """Issue 25: the README's GKE money sentences are what `make check` computes for the shipped
    example (tpudeploy.gke.replicaplan), not figures typed once."""
    import tomllib

    from tpudeploy.config import parse_config
    from tpudeploy.gke import replicaplan

    raw = tomllib.loads((readme.ROOT / "deployments" / "gke.toml").read_text(encoding="utf-8"))
    cfg = parse_config(raw)
    text = " ".join(readme.README.read_text().split("## Scale out", 1)[1].split("\n## ")[0].split())
    p = replicaplan.replica_plan(cfg)
    low, high = cfg.gke.min_replicas, cfg.gke.max_replicas
    assert p.chip_rate is not None and cfg.max_run_duration_seconds
    chips_alone = p.chip_rate / (p.throughput_tok_s * 3600 / 1e6)
    claims = [
        f"${p.per_million(low):.3f} per million output tokens at {low} replica",
        f"${p.per_million(high):.3f} at {high}",
        f"${chips_alone:.3f} for the chips alone",
        f"idle floor (${p.idle_floor_per_hour:.4f}/h",
        f"after {replicaplan.scale_down_window_s()} s",
        f"(default {(cfg.max_run_duration_seconds or 0) / 3600:g} h;",
    ]
    missing = [c for c in claims if c not in text]
    assert missing == [], "README's Scale out disagrees with the planner: " + "; ".join(missing)


def test_no_money_figure_in_the_readme_is_typed_by_hand() -> None:
    """Issue 39: every dollar figure of the README is a generated section's (tools/readme.py,
    from the planner), or in Scale out, whose figures the test above checks against the
    planner; the intro's "$0.11" once named no cell and no load."""
    text = readme.README.read_text()
    outside = re.sub(r"<!-- BEGIN .*?<!-- END [^>]*-->", "", text, flags=re.S)
    scale_out = (
        outside.split("## Scale out", 1)[1].split("\n## ")[0] if "## Scale out" in outside else ""
    )
    rest = outside.replace(scale_out, "")
    typed = re.findall(r"\$\d[\d,.]*", rest)
    assert typed == [], f"README money figures typed by hand (generate them): {typed}"


def test_the_readme_money_table_says_what_each_figure_assumes() -> None:
    section = readme.readme_money_section()
    for said in (
        "best cell (128 tokens of context, 64 clients",
        "20 agents at 8,192 tokens",
        "not egress",
        "the bucket",
        "the chip's hours to the run's default end",
    ):
        assert said in section, said
