"""`make accept`: the build log's acceptance table as one command, through the front door with
the pinned certificate: chat, the get_weather tool call, an image, a prompt near 26,016 tokens
(and one past max_model_len refused), needles at 2K/8K/14K tokens, determinism at temperature 0.

A build can boot, answer "hi" and still be wrong: upstream's release matrix marks
gemma-4-E2B-it failing correctness on nightly, the tag the default image follows. Each row
prints its cost before it runs and its time and verdict after; `verdicts()` returns them for
callers that decide on them (a tuning arm, a proposed image pin).

The requests go out as `make smoke` sends them (tpudeploy/smoke.py: a fresh pinned TLS
connection per request, /v1/chat/completions only, the key in the Authorization header).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from tpudeploy import acceptprobes as probes
from tpudeploy import smoke
from tpudeploy.config import DeployConfig
from tpudeploy.endpoint import Endpoint
from tpudeploy.errors import UserError
from tpudeploy.terminal import printable

CHAT_PATH = "/v1/chat/completions"


class AcceptError(UserError):
    """One or more rows of the acceptance table failed; the message names each and why."""


class RowFailed(UserError):
    """This row's answer is wrong; the message says how."""


@dataclass(frozen=True)
class Limits:
    """What the deployment serves, from its config: what the rows may ask of it."""

    model: str
    max_model_len: int
    images_per_prompt: int

    @classmethod
    def of(cls, cfg: DeployConfig) -> Limits:
        return cls(
            cfg.vllm.served_model_name,
            cfg.vllm.max_model_len,
            int(cfg.vllm.limit_mm_per_prompt.get("image", 0)),
        )


@dataclass(frozen=True)
class Verdict:
    row: str
    status: str  # "pass", "FAIL" or "skip"
    seconds: float
    detail: str  # what came back, or why it failed or was skipped

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"


@dataclass
class Run:
    """One acceptance run's connection and what it has measured so far."""

    endpoint: Endpoint
    api_key: str
    limits: Limits
    # Characters per token the server counted on the last filler prompt (None: not yet).
    ratio: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def chars_per_token(self) -> float:
        return self.ratio or probes.CHARS_PER_TOKEN

    def post(self, body: dict[str, Any]) -> dict[str, Any]:
        # smoke's own request path: pinned, the key as a Bearer header, errors in its words.
        answer, _ = smoke._post(self.endpoint, self.api_key, body)
        if not isinstance(answer, dict):
            raise RowFailed(f"the answer is not a JSON object: {printable(str(answer)[:120])}")
        return answer

    def raw(self, body: dict[str, Any]) -> tuple[int, bytes]:
        status, raw, _ = smoke._request(self.endpoint, "POST", CHAT_PATH, body, self.api_key)
        return status, raw


@dataclass(frozen=True)
class Row:
    name: str
    prompt_tokens: Callable[[Run], int]  # the estimate printed before it runs
    max_tokens: int
    requests: int
    check: Callable[[Run], str]  # what was seen; raises RowFailed (or SmokeError)
    # Refused before any prefill (vLLM counts the prompt, then answers 400): no model time.
    refused: bool = False

    def cost(self, run: Run) -> str:
        tokens = self.prompt_tokens(run)
        times = f"{self.requests} x " if self.requests > 1 else ""
        if self.refused:
            return f"~{tokens:,} prompt tokens sent, refused before prefill: ~0 s of model time"
        seconds = self.requests * probes.expected_seconds(tokens, self.max_tokens)
        return (
            f"{times}~{tokens:,} prompt tokens, <={self.max_tokens} output tokens, "
            f"~{seconds:.1f} s expected"
        )


def _content(answer: dict[str, Any], row: str) -> str:
    content = smoke._message(answer, row).get("content") or ""
    return content.strip() if isinstance(content, str) else ""


def _prompt_tokens(answer: dict[str, Any]) -> int:
    usage = answer.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if not isinstance(tokens, int):
        # The verdict line names the row already.
        raise RowFailed("the answer has no usage.prompt_tokens to check the length by")
    return tokens


def _text_tokens(text: str) -> int:
    # A handful for the chat template's turn markers around one user message.
    return probes.estimate_tokens(len(text), probes.CHARS_PER_TOKEN) + 8


# ---- the rows ---------------------------------------------------------------------------------


def _chat(run: Run) -> str:
    content, _ = smoke.chat(run.endpoint, run.api_key, run.limits.model)
    return printable(repr(content[:80]))


def _tool(run: Run) -> str:
    call, _ = smoke.tool_call(run.endpoint, run.api_key, run.limits.model)
    return json.dumps(call)


def _image(run: Run) -> str:
    probe = probes.ImageProbe.random()
    body = {
        "model": run.limits.model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": probes.IMAGE_PROMPT},
                    # A data: URL: nothing to fetch, so no allowed_media_domains entry is needed.
                    {"type": "image_url", "image_url": {"url": probe.data_url()}},
                ],
            }
        ],
        "max_tokens": 32,
        "temperature": 0,
    }
    content = _content(run.post(body), "image")
    why = probe.judge(content)
    if why:
        raise RowFailed(f"{why}; answer {printable(repr(content[:120]))}")
    return f"{probe}: {printable(repr(content[:80]))}"


def _needle_row(target: int) -> Callable[[Run], str]:
    def check(run: Run) -> str:
        needle = probes.Needle.random()
        text = needle.prompt(probes.filler(probes.chars_for(target, run.chars_per_token)))
        body = {
            "model": run.limits.model,
            "messages": [{"role": "user", "content": text}],
            "max_tokens": 32,
            "temperature": 0,
        }
        answer = run.post(body)
        content = _content(answer, f"needle {target:,}")
        why = needle.judge(content)
        if why:
            raise RowFailed(f"{why}; answer {printable(repr(content[:80]))}")
        counted = _prompt_tokens(answer)
        run.ratio = probes.measured_ratio(len(text), counted)
        return f"{needle.code} found; {counted:,} prompt tokens, {run.ratio:.2f} chars/token"

    return check


def _long_target(limits: Limits) -> int:
    """The build log's 26,016 tokens (79% of its 32,768), or 80% of a smaller max_model_len:
    a prompt the deployment cannot take by its own config is not a failure of the build."""
    return min(probes.LONG_PROMPT_TOKENS, limits.max_model_len - limits.max_model_len // 5)


def _long(run: Run) -> str:
    target = _long_target(run.limits)
    ratio = run.chars_per_token
    text = probes.filler(probes.chars_for(target, ratio)) + "\n\nReply with the word done."
    body = {
        "model": run.limits.model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 16,
        "temperature": 0,
    }
    counted = _prompt_tokens(run.post(body))
    if abs(counted - target) > probes.NEAR * target:
        short = "truncated? " if counted < target else ""
        raise RowFailed(
            f"{short}the server counted {counted:,} prompt tokens, not near {target:,} "
            f"({len(text):,} characters sent at {ratio:.2f} chars/token)"
        )
    return f"{counted:,} prompt tokens accepted (build log: {probes.LONG_PROMPT_TOKENS:,})"


def _past_limit_tokens(run: Run) -> int:
    return run.limits.max_model_len + run.limits.max_model_len // 8


def _refused(run: Run) -> str:
    tokens = _past_limit_tokens(run)
    text = probes.filler(probes.chars_for(tokens, run.chars_per_token))
    body = {
        "model": run.limits.model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 16,
    }
    status, raw = run.raw(body)
    said = printable(raw[:300].decode(errors="replace"))
    # vLLM's check before any prefill (vllm/entrypoints/openai/serving_engine.py, _validate_input
    # / _create_tokens_prompt): HTTP 400, "This model's maximum context length is N tokens.
    # However, your request has M input tokens. Please reduce the length of the input messages."
    if status == 400 and "maximum context length" in said:
        return f"400: {said[:160]}"
    if status == 200:
        raise RowFailed(
            f"a prompt of ~{tokens:,} tokens past max_model_len {run.limits.max_model_len:,} was "
            "accepted: the server runs with another --max-model-len than the config says"
        )
    raise RowFailed(
        f"a prompt past max_model_len {run.limits.max_model_len:,} got HTTP {status}, not "
        f"vLLM's 400 'maximum context length': {said}"
    )


DETERMINISM_PROMPT = "Describe a lighthouse at night in three sentences."


def _determinism(run: Run) -> str:
    body = {
        "model": run.limits.model,
        "messages": [{"role": "user", "content": DETERMINISM_PROMPT}],
        "max_tokens": 64,
        "temperature": 0,
    }
    answers = [_content(run.post(body), "determinism") for _ in range(probes.DETERMINISM_RUNS)]
    same = probes.modal_share(answers)
    share = f"{same}/{len(answers)} byte-identical (build log: {probes.BUILD_LOG_IDENTICAL}/9)"
    if same < probes.DETERMINISM_PASS:
        raise RowFailed(
            f"{share}, below the pass line {probes.DETERMINISM_PASS}/9: greedy decoding is not "
            "repeatable on this build"
        )
    return share


def _fixed(tokens: int) -> Callable[[Run], int]:
    return lambda run: tokens


def rows(limits: Limits) -> list[Row]:
    """The table in the order it runs: the needles first, so that the long prompt is sized with
    the characters-per-token the server itself counted."""
    needles = [
        Row(f"needle {t // 1024}K", _fixed(t), 32, 1, _needle_row(t))
        for t in probes.NEEDLE_DEPTHS_TOKENS
    ]
    return [
        # smoke's own prompts: the build log's "Say hi in five words." and the Paris question.
        Row("chat", _fixed(_text_tokens("Say hi in five words.")), 64, 1, _chat),
        Row("tool call", _fixed(_text_tokens(json.dumps(smoke.WEATHER_TOOL)) + 12), 256, 1, _tool),
        Row(
            "image",
            _fixed(_text_tokens(probes.IMAGE_PROMPT) + probes.IMAGE_TOKENS_AT_MOST),
            32,
            1,
            _image,
        ),
        *needles,
        Row("long context", _fixed(_long_target(limits)), 16, 1, _long),
        Row("past max_model_len", _past_limit_tokens, 16, 1, _refused, refused=True),
        Row(
            "determinism",
            _fixed(_text_tokens(DETERMINISM_PROMPT)),
            64,
            probes.DETERMINISM_RUNS,
            _determinism,
        ),
    ]


def _skip_reason(row: Row, limits: Limits, run: Run) -> str:
    if row.name == "image" and limits.images_per_prompt < 1:
        return "limit_mm_per_prompt allows no image on this deployment"
    if row.name.startswith("needle") and row.prompt_tokens(run) + 64 > limits.max_model_len:
        return f"does not fit max_model_len {limits.max_model_len:,}"
    return ""


def verdicts(
    endpoint: Endpoint, api_key: str, limits: Limits, out: TextIO | None = None
) -> list[Verdict]:
    """Every row's verdict, printing each row's cost before it runs and its result after.

    The hook for callers that decide on a build (a tuning arm, an image pin): a failed row is a
    Verdict, not an exception; an endpoint that cannot be reached or trusted, or a front door
    that is open, raises smoke.SmokeError before any row."""
    out = out or sys.stdout
    refused = smoke.check_front_door(endpoint)
    print(f"  front door: /health open, {' '.join(refused)} refused without the key", file=out)
    run = Run(endpoint, api_key, limits)
    results: list[Verdict] = []
    for row in rows(limits):
        skip = _skip_reason(row, limits, run)
        if skip:
            results.append(Verdict(row.name, "skip", 0.0, skip))
            print(f"  {row.name:<19} skip  {skip}", file=out)
            continue
        print(f"  {row.name:<19} next: {row.cost(run)}", file=out, flush=True)
        start = time.monotonic()
        try:
            verdict = Verdict(row.name, "pass", 0.0, row.check(run))
        except (RowFailed, smoke.SmokeError) as exc:
            verdict = Verdict(row.name, "FAIL", 0.0, str(exc))
        verdict = Verdict(verdict.row, verdict.status, time.monotonic() - start, verdict.detail)
        results.append(verdict)
        print(
            f"  {row.name:<19} {verdict.status:<4}  {verdict.seconds:6.1f} s  {verdict.detail}",
            file=out,
            flush=True,
        )
    return results


FAILED_ROWS = "acceptance rows failed: "


def failed_rows_in(output: str) -> list[str]:
    """The rows `make accept`'s output names as failed (its closing error, "N of M acceptance
    rows failed: row: reason; ..."), in table order: what `make tune` records for an arm."""
    said = output.rpartition(FAILED_ROWS)[2] if FAILED_ROWS in output else ""
    starts = {part.partition(": ")[0].strip() for part in said.split("; ")}
    names = [row.name for row in rows(Limits("", 10**6, 1))]
    return [name for name in names if name in starts]


def run(endpoint: Endpoint, api_key: str, limits: Limits, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    print(
        f"acceptance against {endpoint.url} (model {limits.model}, max_model_len "
        f"{limits.max_model_len:,}, certificate pinned): the build log's table; costs at its "
        f"single-stream rates ({probes.DECODE_S_PER_TOKEN * 1000:.2f} ms per output token, "
        f"~{probes.PREFILL_TOKENS_PER_S:,.0f} prompt tokens/s), filler estimated at "
        f"{probes.CHARS_PER_TOKEN} chars/token until the server has counted some",
        file=out,
    )
    results = verdicts(endpoint, api_key, limits, out)
    failed = [v for v in results if v.failed]
    passed = sum(v.status == "pass" for v in results)
    if failed:
        raise AcceptError(
            f"{len(failed)} of {len(results)} {FAILED_ROWS}"
            + "; ".join(f"{v.row}: {v.detail}" for v in failed)
        )
    print(f"acceptance passed: {passed} rows", file=out)
    return 0
