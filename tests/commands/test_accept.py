"""`make accept` against a fake vLLM behind a real loopback TLS front door (the certificate
pinned as `make smoke` pins it): one all-pass run, then each row failing in turn, named.

The fake answers from what it is sent, never from a script of the run: it decodes the PNG with
Pillow (an independent decoder), finds the needle in the prompt, counts prompt tokens from the
characters at its own ratio and refuses past max_model_len with vLLM's 400.
"""

from __future__ import annotations

import base64
import io
import math
import re
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.fake_boot_apis import FakeFrontDoor, LoopbackCertificate, chat_answer, weather_call
from tools.rehearsal.fakes.base import Answer
from tpudeploy import accept
from tpudeploy import acceptprobes as probes
from tpudeploy.endpoint import Endpoint

KEY = "vk-acceptTestKey-0123456789abcdefghijklmnop"
MODEL = "google/gemma-4-E2B-it"
MAX_MODEL_LEN = 32_768
LIMITS = accept.Limits(MODEL, MAX_MODEL_LEN, 4)
# The fake's tokenizer: not the command's 4.0 estimate, so the run must measure it (as it must
# measure Gemma's) to land its long prompt near 26,016 tokens.
FAKE_CHARS_PER_TOKEN = 3.5
IMAGE_TOKENS = 260

# The OpenAI request shapes, from the openai package's generated types (openai/openai-python,
# src/openai/types/chat/...; `openai` is not installed in .venv): required keys, allowed keys.
TEXT_PART = ({"type", "text"}, {"type", "text"})  # chat_completion_content_part_text_param.py
IMAGE_PART = ({"type", "image_url"}, {"type", "image_url"})  # ..._content_part_image_param.py
IMAGE_URL = ({"url"}, {"url", "detail"})  # ImageURL in ..._content_part_image_param.py
FUNCTION_TOOL = ({"type", "function"}, {"type", "function"})  # ..._function_tool_param.py
# shared_params/function_definition.py: name required; description, parameters, strict optional.
FUNCTION_DEFINITION = ({"name"}, {"name", "description", "parameters", "strict"})


def _shape(obj: dict[str, Any], shape: tuple[set[str], set[str]], what: str) -> None:
    required, allowed = shape
    assert required <= set(obj), f"{what} lacks {required - set(obj)}: {obj}"
    assert set(obj) <= allowed, f"{what} has keys the API does not define: {set(obj) - allowed}"


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in content if p["type"] == "text")


def _colour(rgb: tuple[int, ...]) -> str:
    return min(
        probes.PALETTE,
        key=lambda n: sum((a - b) ** 2 for a, b in zip(probes.PALETTE[n], rgb, strict=True)),
    )


class FakeVllm(FakeFrontDoor):
    """The front door, then a vLLM whose answers follow the request; `fail` breaks one row."""

    def __init__(self, tls: LoopbackCertificate, *fail: str) -> None:
        super().__init__(KEY, tls)
        self.fail = set(fail)
        self.calls = 0

    def route(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Answer:
        if path != "/v1/chat/completions" or method != "POST":
            return super().route(method, path, body, headers)
        if headers.get("authorization") != f"Bearer {KEY}":
            return 401, {"error": "missing or wrong API key"}
        self.calls += 1
        message = body["messages"][-1]
        text = _text(message)
        images = (
            [p for p in message["content"] if p["type"] == "image_url"]
            if isinstance(message["content"], list)
            else []
        )
        tokens = math.ceil(len(text) / FAKE_CHARS_PER_TOKEN) + IMAGE_TOKENS * len(images)
        if "truncate" in self.fail:
            tokens = min(tokens, 16_384)  # a server that silently keeps the first 16K
        if tokens + body.get("max_tokens", 0) > MAX_MODEL_LEN:
            if "refusal-500" in self.fail:
                return 500, {"error": "Internal Server Error"}
            if "accepts-past-limit" not in self.fail:
                # vLLM's own words (serving_engine.py), the shape of its error response.
                return 400, {
                    "error": {
                        "message": f"This model's maximum context length is {MAX_MODEL_LEN} "
                        f"tokens. However, your request has {tokens} input tokens. Please reduce "
                        "the length of the input messages.",
                        "type": "BadRequestError",
                        "param": None,
                        "code": 400,
                    }
                }
        answer = self._answer(body, text, images)
        if "usage" not in answer:
            answer = {**answer, "usage": {"prompt_tokens": tokens, "completion_tokens": 5}}
        return 200, answer

    def _answer(self, body: dict[str, Any], text: str, images: list[dict[str, Any]]) -> Any:
        if body.get("tools"):
            name = "get_time" if "wrong-tool" in self.fail else "get_weather"
            return chat_answer(None, [weather_call(name=name)])
        if images:
            url = images[0]["image_url"]["url"]
            png = base64.b64decode(url.split(",", 1)[1])
            with Image.open(io.BytesIO(png)) as image:
                rgb = image.convert("RGB")
                left = _colour(rgb.getpixel((10, 10)))  # type: ignore[arg-type]
                right = _colour(rgb.getpixel((rgb.width - 10, 10)))  # type: ignore[arg-type]
            if "ignores-image" in self.fail:
                others = [c for c in probes.PALETTE if c not in (left, right)]
                left, right = others[0], others[1]
            return chat_answer(f"left: {left}, right: {right}")
        needle = re.search(r"secret code for the archive is (\d{6})", text)
        if needle:
            code = needle.group(1)
            if "wrong-needle" in self.fail:
                code = f"{(int(code) + 1) % 10**6:06d}"
            return chat_answer(code)
        if text.startswith("Describe a lighthouse"):
            tail = f" ({self.calls})" if "nondeterministic" in self.fail else ""
            return chat_answer("The lamp turns slowly over a dark sea." + tail)
        if text == "Say hi in five words.":
            return chat_answer("" if "empty" in self.fail else "Hi there, nice to meet you!")
        return chat_answer("done")


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> LoopbackCertificate:
    return LoopbackCertificate.create(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def passing(cert: LoopbackCertificate) -> tuple[str, list[dict[str, Any]]]:
    """One all-pass run (what it printed, what the fake received), shared: a run is ~20
    requests, each on a fresh pinned TLS connection."""
    out = io.StringIO()
    with FakeVllm(cert) as fake:
        assert accept.run(Endpoint(fake.url, cert.sha256), KEY, LIMITS, out=out) == 0
        return out.getvalue(), list(fake.requests)


def test_every_row_passes_with_costs_first_and_the_openai_shapes(
    passing: tuple[str, list[dict[str, Any]]],
) -> None:
    out, received = passing
    requests = [r for r in received if "authorization" in r["headers"]]
    lines = out.splitlines()
    names = [r.name for r in accept.rows(LIMITS)]
    for name in names:
        before = [i for i, line in enumerate(lines) if line.startswith(f"  {name:<19} next: ")]
        after = [i for i, line in enumerate(lines) if line.startswith(f"  {name:<19} pass ")]
        assert before and after and before[0] < after[0], name
        assert re.search(
            r"prompt tokens, <=\d+ output tokens, ~[\d.]+ s expected"
            r"|prompt tokens sent, refused before prefill",
            lines[before[0]],
        )
        assert re.search(r"pass\s+[\d.]+ s", lines[after[0]])
    assert "acceptance passed: 9 rows" in out
    assert KEY not in out
    # Only chat completions with the key (never /v1/completions: "" on -it models).
    assert {r["path"] for r in requests} == {"/v1/chat/completions"}
    bodies = [r["body"] for r in requests]
    assert all(b["model"] == MODEL and isinstance(b["max_tokens"], int) for b in bodies)
    (tool,) = [b for b in bodies if "tools" in b]
    for t in tool["tools"]:
        _shape(t, FUNCTION_TOOL, "tool")
        assert t["type"] == "function"
        _shape(t["function"], FUNCTION_DEFINITION, "function definition")
    (image,) = [b for b in bodies if isinstance(b["messages"][0]["content"], list)]
    parts = image["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url"]
    _shape(parts[0], TEXT_PART, "text part")
    _shape(parts[1], IMAGE_PART, "image part")
    _shape(parts[1]["image_url"], IMAGE_URL, "image_url")
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    # Nine identical requests at temperature 0 (the build log's 8/9 is over nine).
    lighthouse = [b for b in bodies if _text(b["messages"][0]).startswith("Describe a lighthouse")]
    assert len(lighthouse) == 9 and all(b["temperature"] == 0 for b in lighthouse)


def test_the_ratio_is_measured_and_the_long_prompt_lands_near_26016(
    passing: tuple[str, list[dict[str, Any]]],
) -> None:
    """The command claims 4.0 chars/token before the server counts; the needles measure the
    server's own (the fake's 3.5) and the long prompt is sized with it."""
    out, received = passing
    counted = [
        math.ceil(len(_text(r["body"]["messages"][0])) / FAKE_CHARS_PER_TOKEN)
        for r in received
        if r["path"] == "/v1/chat/completions"
    ]
    assert f"filler estimated at {probes.CHARS_PER_TOKEN} chars/token" in out
    measured = re.findall(r"prompt tokens, ([\d.]+) chars/token", out)
    assert len(measured) == 3 and all(abs(float(m) - FAKE_CHARS_PER_TOKEN) < 0.05 for m in measured)
    long = [c for c in counted if 20_000 < c < MAX_MODEL_LEN]
    assert len(long) == 1 and abs(long[0] - 26_016) < 0.02 * 26_016
    assert re.search(rf"long context\s+pass .*{long[0]:,} prompt tokens accepted", out)
    # The first needle was sized at the claimed 4.0: the fake counted 4.0/3.5 times as many.
    first = min(c for c in counted if 1_500 < c < 4_000)
    assert abs(first - 2_048 * probes.CHARS_PER_TOKEN / FAKE_CHARS_PER_TOKEN) < 40


# Each row's failure, three fakes that break rows independent of each other at once (every run
# is ~20 TLS requests): each broken row is named with its reason, every other row passes.
FAILURES = {
    "empty": ("chat", "empty content"),
    "wrong-tool": ("tool call", "no get_weather tool call"),
    "ignores-image": ("image", "the answer does not name"),
    "truncate": ("long context", "truncated? the server counted 16,384 prompt tokens"),
    "refusal-500": ("past max_model_len", "got HTTP 500, not vLLM's 400"),
    "accepts-past-limit": ("past max_model_len", "was accepted"),
    "wrong-needle": ("needle 2K", "does not contain the needle"),
    "nondeterministic": ("determinism", "1/9 byte-identical (build log: 8/9), below"),
}


@pytest.mark.parametrize(
    "modes",
    [
        ("empty", "ignores-image", "refusal-500", "nondeterministic"),
        ("wrong-tool", "wrong-needle"),
        # A server that silently truncates also accepts what is past the limit.
        ("truncate", "accepts-past-limit"),
    ],
    ids=lambda modes: "+".join(modes),
)
def test_each_row_fails_by_name_and_the_others_still_run(
    cert: LoopbackCertificate, modes: tuple[str, ...]
) -> None:
    out = io.StringIO()
    with FakeVllm(cert, *modes) as fake, pytest.raises(accept.AcceptError) as info:
        accept.run(Endpoint(fake.url, cert.sha256), KEY, LIMITS, out=out)
    said = str(info.value)
    failed_rows = {FAILURES[m][0] for m in modes} | (
        {"needle 8K", "needle 14K"} if "wrong-needle" in modes else set()
    )
    assert said.startswith(f"{len(failed_rows)} of 9 acceptance rows failed: ")
    for mode in modes:
        row, reason = FAILURES[mode]
        assert re.search(rf"(^|; |: ){re.escape(row)}: [^;]*{re.escape(reason)}", said), mode
    lines = out.getvalue().splitlines()
    failed = {line[2:21].strip() for line in lines if line[21:27] == " FAIL "}
    passed = {line[2:21].strip() for line in lines if line[21:27] == " pass "}
    assert failed == failed_rows
    assert passed == {r.name for r in accept.rows(LIMITS)} - failed_rows


def test_verdicts_is_the_hook_a_caller_decides_on(cert: LoopbackCertificate) -> None:
    """What `make tune` and the upstream watch can call: verdicts, not an exit."""
    with FakeVllm(cert, "wrong-needle") as fake:
        results = accept.verdicts(Endpoint(fake.url, cert.sha256), KEY, LIMITS, io.StringIO())
    assert [v.row for v in results if v.failed] == ["needle 2K", "needle 8K", "needle 14K"]
    assert all(v.status == "pass" for v in results if not v.row.startswith("needle"))


def test_no_image_limit_skips_the_image_row(cert: LoopbackCertificate) -> None:
    out = io.StringIO()
    with FakeVllm(cert) as fake:
        accept.run(
            Endpoint(fake.url, cert.sha256), KEY, accept.Limits(MODEL, MAX_MODEL_LEN, 0), out
        )
        sent_images = [
            r
            for r in fake.requests
            if isinstance(((r["body"] or {}).get("messages") or [{}])[0].get("content"), list)
        ]
    assert "image               skip  limit_mm_per_prompt allows no image" in out.getvalue()
    assert sent_images == []


@pytest.mark.parametrize("platform", ["tpu-vm", "gke"])
def test_cli_resolves_through_the_platform_seam(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cert: LoopbackCertificate,
    platform: str,
) -> None:
    """ENDPOINT/TLS_SHA256/VLLM_API_KEY as for smoke, on both platforms; a failed row is one
    error line naming it, exit 1, no traceback."""
    from tpudeploy import cli

    config = tmp_path / "deploy.toml"
    extra = 'platform = "gke"\n' if platform == "gke" else ""
    config.write_text(f'{extra}project = "test-proj"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    monkeypatch.setenv("TLS_SHA256", cert.sha256)
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    # One run per platform (each ~20 TLS requests): the TPU VM passes, GKE fails one row.
    fail = ("wrong-tool",) if platform == "gke" else ()
    with FakeVllm(cert, *fail) as fake:
        monkeypatch.setenv("ENDPOINT", fake.url)
        rc = cli.main(["accept"])
        assert {r["headers"].get("host") for r in fake.requests} == {fake.host}
    captured = capsys.readouterr()
    if fail:
        assert rc == 1
        assert captured.err.startswith("error: 1 of 9 acceptance rows failed: tool call: ")
    else:
        assert rc == 0 and "acceptance passed" in captured.out and captured.err == ""
    assert "Traceback" not in captured.err and KEY not in captured.out + captured.err


def test_the_png_is_a_valid_image_of_the_two_colours() -> None:
    probe = probes.ImageProbe("red", "blue")
    png = base64.b64decode(probe.data_url().split(",", 1)[1])
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        assert image.format == "PNG" and image.size == probes.IMAGE_SIZE
        assert image.getpixel((0, 0)) == probes.PALETTE["red"]
        assert image.getpixel((image.width - 1, image.height - 1)) == probes.PALETTE["blue"]


@pytest.mark.parametrize(
    ("answer", "passes"),
    [
        ("left: red, right: blue", True),
        ("Left: Red. Right: Blue.", True),
        ("left: blue, right: green", False),  # another colour
        ("red, green, blue, yellow, black, white", False),  # every colour: a canned catch-all
        ("reddish and blueish", False),
    ],
)
def test_the_image_judge(answer: str, passes: bool) -> None:
    assert (probes.ImageProbe("red", "blue").judge(answer) == "") is passes


class ScriptedRun(accept.Run):
    """A run whose answers are given: the row's judgement alone, no network."""

    def __init__(self, contents: list[str]) -> None:
        super().__init__(Endpoint("https://127.0.0.1:1", "0" * 64), KEY, LIMITS)
        self.contents = iter(contents)

    def post(self, body: dict[str, Any]) -> dict[str, Any]:
        return chat_answer(next(self.contents))


@pytest.mark.parametrize(("differing", "passes"), [(0, True), (1, True), (2, True), (3, False)])
def test_the_determinism_line_is_seven_of_nine(differing: int, passes: bool) -> None:
    """The build log's clean build gave 8/9; one divergence more still passes, 6/9 fails."""
    answers = ["same answer"] * (9 - differing) + [f"other {i}" for i in range(differing)]
    run = ScriptedRun(answers)
    if passes:
        assert accept._determinism(run).startswith(f"{9 - differing}/9 byte-identical")
    else:
        with pytest.raises(
            accept.RowFailed, match=r"6/9 byte-identical .* below the pass line 7/9"
        ):
            accept._determinism(run)


def test_costs_follow_the_build_log_rates() -> None:
    """8.02 ms per output token; prefill at 8,192 tokens per 289.4 ms (1 client, TTFT)."""
    row = next(r for r in accept.rows(LIMITS) if r.name == "long context")
    expected = 26_016 / (8_192 / 0.2894) + 16 * 0.00802
    assert row.cost(ScriptedRun([])) == (
        f"~26,016 prompt tokens, <=16 output tokens, ~{expected:.1f} s expected"
    )


def test_a_smaller_max_model_len_skips_what_cannot_fit_and_shortens_the_long_prompt() -> None:
    """max_model_len 8,192: the 8K and 14K needles cannot fit (skipped, said why), the long
    prompt is 80% of the limit, and the refused one is still past it."""
    small = accept.Limits(MODEL, 8_192, 4)
    run = ScriptedRun([])
    run.limits = small
    by_name = {r.name: r for r in accept.rows(small)}
    skipped = {n for n, r in by_name.items() if accept._skip_reason(r, small, run)}
    assert skipped == {"needle 8K", "needle 14K"}
    assert by_name["long context"].prompt_tokens(run) == 8_192 - 8_192 // 5
    assert by_name["past max_model_len"].prompt_tokens(run) > 8_192
