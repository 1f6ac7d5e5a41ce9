"""tpudeploy/hfhub.py against the loopback Hub (tools/rehearsal/fakes/hfhub.py), which answers by
the documented rules in hfhub_rules.py: two tokens, one with the gated licences accepted."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator

import pytest

from tests.hub_fixture import ACCEPTED, DRAFT, DRAFT_FILES, NOT_ACCEPTED, gemma_hub, serving_hub
from tools.rehearsal.fakes import hfhub_rules as rules
from tpudeploy import hfhub


def test_a_token_whose_account_accepted_may_download_and_the_size_is_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serving_hub(monkeypatch) as hub:
        answer = hfhub.check_repo(DRAFT, ACCEPTED)
    assert answer.may_download and answer.access == hfhub.MAY_DOWNLOAD
    assert answer.answered == "HTTP 200" and answer.gated == "manual"
    # vLLM takes one weights format, safetensors first; every other file counts (upper bound).
    expected = sum(v for k, v in DRAFT_FILES.items() if not k.endswith(".bin"))
    assert answer.download_bytes == expected and answer.weights_format == "*.safetensors"
    # The access check first, then the file list with sizes (blobs=true); the token only in the
    # Authorization header.
    paths = [r["path"] for r in hub.requests]
    assert paths == [f"/api/models/{DRAFT}/auth-check", f"/api/models/{DRAFT}?blobs=true"]
    assert all(r["authorization"] == f"Bearer {ACCEPTED}" for r in hub.requests)
    assert all(ACCEPTED not in r["path"] for r in hub.requests)


def test_a_token_whose_account_did_not_accept_gets_the_gated_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serving_hub(monkeypatch):
        answer = hfhub.check_repo(DRAFT, NOT_ACCEPTED)
    assert not answer.may_download and answer.access == hfhub.GATED_NO_ACCESS
    status, code = rules.GATED_NO_ACCESS.status, rules.GATED_NO_ACCESS.error_code
    assert answer.answered == f"HTTP {status} (X-Error-Code {code})"
    # The metadata is public for a gated repo (huggingface.js #945): the size is still known.
    assert answer.download_bytes is not None


@pytest.mark.parametrize(
    ("repo", "token", "access"),
    [
        (DRAFT, "hf_" + "NotAnyAccountsToken0123456789ab", hfhub.BAD_TOKEN),
        (DRAFT, "", hfhub.NO_TOKEN),
        ("google/no-such-model", ACCEPTED, hfhub.NOT_FOUND),
        ("someone/private-model", ACCEPTED, hfhub.NOT_FOUND),
    ],
)
def test_the_other_refusals_by_their_documented_status(
    monkeypatch: pytest.MonkeyPatch, repo: str, token: str, access: str
) -> None:
    with serving_hub(monkeypatch) as hub:
        answer = hfhub.check_repo(repo, token)
    assert answer.access == access and answer.download_bytes is None
    assert len(hub.requests) == 1  # no file list for a repo the token cannot see
    assert hub.requests[0]["authorization"] == (f"Bearer {token}" if token else "")


def test_a_403_without_the_gated_code_is_the_tokens_permission(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hub = gemma_hub()
    monkeypatch.setattr(hub, "answer", lambda path, auth: (rules.TOKEN_FORBIDDEN, None))
    with serving_hub(monkeypatch, hub):
        answer = hfhub.check_repo(DRAFT, ACCEPTED)
    assert answer.access == hfhub.FORBIDDEN and answer.answered == "HTTP 403"


def test_a_pinned_revision_is_asked_by_its_path_and_an_unknown_one_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serving_hub(monkeypatch) as hub:
        assert hfhub.check_repo(DRAFT, ACCEPTED, revision="main").may_download
        with pytest.raises(hfhub.HubError, match="has no revision 'v9/x'"):
            hfhub.check_repo(DRAFT, ACCEPTED, revision="v9/x")
    assert hub.requests[1]["path"] == f"/api/models/{DRAFT}/revision/main?blobs=true"
    assert hub.requests[-1]["path"] == f"/api/models/{DRAFT}/revision/v9%2Fx?blobs=true"


def test_a_failing_request_never_carries_the_token_in_its_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Nothing listens on port 9 (discard) here: the connection is refused.
    monkeypatch.setenv(hfhub.FAKE_ENV, "127.0.0.1:9")
    with pytest.raises(hfhub.HubError) as refused:
        hfhub.check_repo(DRAFT, ACCEPTED)
    assert "cannot reach" in str(refused.value) and ACCEPTED not in str(refused.value)
    # An answer this client does not know (a server error) is an error without the token too.
    hub = gemma_hub()
    broken = rules.Rule(500, "", f"echo {ACCEPTED}", "test", "-", "-")
    monkeypatch.setattr(hub, "answer", lambda path, auth: (broken, None))
    with serving_hub(monkeypatch, hub), pytest.raises(hfhub.HubError) as failed:
        hfhub.check_repo(DRAFT, ACCEPTED)
    assert "HTTP 500" in str(failed.value) and ACCEPTED not in str(failed.value)


def test_the_token_goes_in_clear_only_to_a_loopback_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(hfhub.FAKE_ENV, "10.1.2.3:80")
    with pytest.raises(hfhub.HubError, match="not a loopback host:port") as refused:
        hfhub.check_repo(DRAFT, ACCEPTED)
    assert ACCEPTED not in str(refused.value)
    with pytest.raises(hfhub.HubError, match="not a Hugging Face repo id"):
        hfhub.check_repo("../../etc", ACCEPTED)


def test_the_download_is_the_format_vllm_picks_plus_the_other_files() -> None:
    def sib(name: str, size: int, lfs: bool = False) -> dict[str, object]:
        return {
            "rfilename": name,
            "size": 134 if lfs else size,
            **({"lfs": {"size": size}} if lfs else {}),
        }

    # No safetensors: vLLM falls to *.bin; the LFS object's size counts, not the pointer's.
    only_bin = [sib("pytorch_model.bin", 5_000, lfs=True), sib("config.json", 7), sib("x.gguf", 9)]
    assert hfhub.download_bytes(only_bin) == (5_007, "*.bin")
    with pytest.raises(hfhub.HubError, match="without its size"):
        hfhub.download_bytes([{"rfilename": "model.safetensors"}])


# ---- the wire, without a socket ---------------------------------------------------------------
# http.client's connection classes replaced by recording stand-ins that never open a socket: the
# real-Hub path (no HFHUB_FAKE_HOST) is tested with nothing leaving this process.

HUB_TOKEN = "hf_" + "WireToken0123456789abcdefABCDEF"


class _Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.status, self._headers, self._body = status, headers, body

    def read(self) -> bytes:
        return self._body

    def getheaders(self) -> list[tuple[str, str]]:
        return list(self._headers.items())


class _Wire:
    """Records every connection opened (kind, host, port, timeout), every request (method,
    path, headers) and every close; answers from a script, in order."""

    def __init__(self, *answers: _Answer | OSError) -> None:
        self.answers = list(answers)
        self.opened: list[tuple[str, str, int, object]] = []
        self.sent: list[tuple[str, str, dict[str, str]]] = []
        self.closed = 0

    def kind(self, name: str) -> type:
        wire = self

        class Conn:
            def __init__(self, host: str, port: int, timeout: object = None) -> None:
                wire.opened.append((name, host, port, timeout))

            def request(self, method: str, path: str, headers: dict[str, str]) -> None:
                wire.sent.append((method, path, dict(headers)))

            def getresponse(self) -> _Answer:
                answer = wire.answers.pop(0)
                if isinstance(answer, OSError):
                    raise answer
                return answer

            def close(self) -> None:
                wire.closed += 1

        return Conn


def _info(gated: object, files: dict[str, int]) -> _Answer:
    siblings = [{"rfilename": n, "size": s} for n, s in files.items()]
    return _Answer(200, {}, json.dumps({"gated": gated, "siblings": siblings}).encode())


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., _Wire]]:
    def install(*answers: _Answer | OSError, fake: str | None = None) -> _Wire:
        made = _Wire(*answers)
        monkeypatch.setattr(http.client, "HTTPSConnection", made.kind("https"))
        monkeypatch.setattr(http.client, "HTTPConnection", made.kind("http"))
        if fake is None:
            monkeypatch.delenv(hfhub.FAKE_ENV, raising=False)
        else:
            monkeypatch.setenv(hfhub.FAKE_ENV, fake)
        return made

    yield install


@pytest.mark.parametrize("unset", [None, "", "  "])
def test_without_the_fake_the_token_goes_only_over_https_to_the_hub(
    wire: Callable[..., _Wire], monkeypatch: pytest.MonkeyPatch, unset: str | None
) -> None:
    sent = wire(_Answer(200, {}), _info("manual", {"config.json": 10, "model.safetensors": 90}))
    if unset is not None:  # set but empty: the real Hub too
        monkeypatch.setenv(hfhub.FAKE_ENV, unset)
    answer = hfhub.check_repo(DRAFT, HUB_TOKEN)
    assert answer.may_download and answer.download_bytes == 100 and answer.gated == "manual"
    # Both requests over TLS to huggingface.co:443, never plain HTTP; each with a finite timeout
    # (a stalled Hub fails the check instead of hanging the deploy), each connection closed.
    assert [o[:3] for o in sent.opened] == [("https", "huggingface.co", 443)] * 2
    assert all(isinstance(o[3], float) and 0 < o[3] <= 60 for o in sent.opened)
    assert sent.closed == 2
    assert [(m, p) for m, p, _ in sent.sent] == [
        ("GET", f"/api/models/{DRAFT}/auth-check"),
        ("GET", f"/api/models/{DRAFT}?blobs=true"),
    ]
    # The token only in the Authorization header, exactly as the Hub reads it.
    for _, path, headers in sent.sent:
        assert headers["Authorization"] == "Bearer " + HUB_TOKEN and HUB_TOKEN not in path
        assert [v for k, v in headers.items() if k != "Authorization" and HUB_TOKEN in v] == []


def test_without_a_token_no_authorization_header_is_sent(wire: Callable[..., _Wire]) -> None:
    sent = wire(_Answer(401, {}))
    assert hfhub.check_repo(DRAFT, "").access == hfhub.NO_TOKEN
    assert len(sent.sent) == 1 and "Authorization" not in sent.sent[0][2]


@pytest.mark.parametrize(
    ("value", "host", "port"),
    [
        ("127.0.0.1:8080", "127.0.0.1", 8080),
        ("localhost:81", "localhost", 81),
        ("[::1]:8443", "::1", 8443),  # the IPv6 loopback, in brackets as in a URL
        ("http://127.0.0.1:9000/", "127.0.0.1", 9000),  # a URL of the fake, as printed
        (" 127.0.0.1:7 ", "127.0.0.1", 7),
    ],
)
def test_the_fake_is_asked_in_plain_http_only_on_loopback(
    wire: Callable[..., _Wire], value: str, host: str, port: int
) -> None:
    sent = wire(_Answer(404, {"X-Error-Code": "RepoNotFound"}), fake=value)
    assert hfhub.check_repo(DRAFT, HUB_TOKEN).access == hfhub.NOT_FOUND
    assert [o[:3] for o in sent.opened] == [("http", host, port)]
    # A stalled fake fails the check too, instead of hanging a rehearsal.
    assert all(isinstance(o[3], float) and 0 < o[3] <= 60 for o in sent.opened)


@pytest.mark.parametrize(
    "value",
    [
        "10.1.2.3:80",  # another host: the token would cross a network in clear
        "huggingface.co:443",
        "huggingface.co:80",
        "127.0.0.2:80",  # loopback in fact, but not a name this rule knows
        "127.0.0.1",  # no port
        "127.0.0.1:",
        "localhost:http",
        "localhost:8080X",  # a port with letters after it: no port
        "::1:8080",  # IPv6 without brackets: ambiguous, refused
        "https://127.0.0.1:8080",
        "127.0.0.1.example.com:80",
    ],
)
def test_the_fake_variable_names_nothing_but_a_loopback_host_and_port(
    wire: Callable[..., _Wire], value: str
) -> None:
    sent = wire(_Answer(200, {}), fake=value)
    with pytest.raises(hfhub.HubError) as refused:
        hfhub.check_repo(DRAFT, HUB_TOKEN)
    message = str(refused.value)
    # The key, its value, why and the fix; nothing sent anywhere, and no token in the message.
    assert f"{hfhub.FAKE_ENV}={value.strip()} is not a loopback host:port" in message
    assert "unencrypted" in message and "Unset it to ask huggingface.co" in message
    assert HUB_TOKEN not in message and sent.opened == [] and sent.sent == []


MESSAGE_BAD = "Invalid credentials in Authorization header"


@pytest.mark.parametrize(
    ("status", "code", "message", "token", "access"),
    [
        (200, "", "", True, hfhub.MAY_DOWNLOAD),
        (200, "", "", False, hfhub.MAY_DOWNLOAD),  # a public repo needs no token
        (403, "GatedRepo", "", True, hfhub.GATED_NO_ACCESS),
        (401, "GatedRepo", "", False, hfhub.GATED_NO_ACCESS),
        (401, "GatedRepo", "Access to model x/y is restricted.", False, hfhub.GATED_NO_ACCESS),
        (401, "", MESSAGE_BAD, True, hfhub.BAD_TOKEN),
        (401, "", "", False, hfhub.NO_TOKEN),
        # A token sent and 401 without the invalid-credentials message: the Hub hides a repo
        # that does not exist (or is private) behind 401 as well as 404.
        (401, "", "", True, hfhub.NOT_FOUND),
        (401, "", "some other words", True, hfhub.NOT_FOUND),
        (401, "RepoNotFound", "", True, hfhub.NOT_FOUND),
        (404, "RepoNotFound", "", True, hfhub.NOT_FOUND),
        # The code before the status, as huggingface_hub's own client reads it
        # (utils/_http.py, hf_raise_for_status: `elif error_code == "RepoNotFound" or (...)`).
        (403, "RepoNotFound", "", True, hfhub.NOT_FOUND),
        (404, "RepoNotFound", "", False, hfhub.NOT_FOUND),
        (404, "", "", True, hfhub.NOT_FOUND),
        (404, "", "", False, hfhub.NOT_FOUND),
        (403, "", "", True, hfhub.FORBIDDEN),
        (403, "", "", False, hfhub.FORBIDDEN),
    ],
)
def test_each_auth_check_answer_maps_to_its_access(
    wire: Callable[..., _Wire], status: int, code: str, message: str, token: bool, access: str
) -> None:
    headers = {k: v for k, v in (("X-Error-Code", code), ("X-Error-Message", message)) if v}
    sent = wire(_Answer(status, headers), _info(False, {"config.json": 3}))
    answer = hfhub.check_repo(DRAFT, HUB_TOKEN if token else "", revision="r1")
    assert answer.access == access and answer.may_download == (access == hfhub.MAY_DOWNLOAD)
    assert (answer.repo, answer.revision) == (DRAFT, "r1")
    said = [f"X-Error-Code {code}"] * bool(code) + [f"X-Error-Message {message!r}"] * bool(message)
    assert answer.answered == f"HTTP {status}" + (f" ({'; '.join(said)})" if said else "")
    # The file list (and so the size) only for a repo the token can see or could be granted.
    asked_size = access in (hfhub.MAY_DOWNLOAD, hfhub.GATED_NO_ACCESS)
    assert len(sent.sent) == 1 + asked_size
    assert answer.download_bytes == (3 if asked_size else None)


@pytest.mark.parametrize("status", [500, 302, 400, 429])
def test_an_answer_this_client_does_not_know_is_an_error_without_the_token(
    wire: Callable[..., _Wire], status: int
) -> None:
    # A redirect is not followed (the Authorization header would go to another host).
    wire(_Answer(status, {"X-Error-Message": f"echo {HUB_TOKEN}", "Location": "https://x.test/"}))
    with pytest.raises(hfhub.HubError) as failed:
        hfhub.check_repo(DRAFT, HUB_TOKEN)
    # Scrubbed, not dropped: the reader sees where the Hub put it.
    assert str(failed.value) == (
        f"the Hub answered HTTP {status} (X-Error-Message 'echo [token]') to the access check "
        f"of {DRAFT}; try again"
    )


def test_an_error_without_a_token_reads_as_the_hub_said_it(wire: Callable[..., _Wire]) -> None:
    wire(_Answer(500, {"X-Error-Message": "busy"}))
    with pytest.raises(hfhub.HubError) as failed:
        hfhub.check_repo(DRAFT, "")
    assert str(failed.value) == (
        f"the Hub answered HTTP 500 (X-Error-Message 'busy') to the access check of {DRAFT}; "
        "try again"
    )


def test_an_unreachable_hub_is_an_error_naming_the_host_never_the_token(
    wire: Callable[..., _Wire],
) -> None:
    sent = wire(ConnectionResetError(f"proxy said {HUB_TOKEN}"))
    with pytest.raises(hfhub.HubError) as failed:
        hfhub.check_repo(DRAFT, HUB_TOKEN)
    text = str(failed.value)
    assert "cannot reach huggingface.co (ConnectionResetError" in text and HUB_TOKEN not in text
    assert sent.closed == 1  # closed on failure too


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (_Answer(404, {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "x"}), "no revision"),
        (_Answer(500, {"X-Error-Message": "x"}), "HTTP 500"),
        (_Answer(200, {}, b"not json"), "has no file list"),
        (_Answer(200, {}, b'{"gated": false}'), "has no file list"),
        (_Answer(200, {}, b'{"siblings": {"a": 1}}'), "has no file list"),
        (_Answer(200, {}, b"[1]"), "has no file list"),
    ],
)
def test_a_file_list_the_hub_does_not_give_is_an_error_without_the_token(
    wire: Callable[..., _Wire], answer: _Answer, said: str
) -> None:
    # The Hub's own words may come back in the message: the token is scrubbed from them.
    answer._headers = {
        k: (f"echo {HUB_TOKEN}" if k == "X-Error-Message" else v)
        for k, v in answer._headers.items()
    }
    wire(_Answer(200, {}), answer)
    with pytest.raises(hfhub.HubError) as failed:
        hfhub.check_repo(DRAFT, HUB_TOKEN, revision="v1")
    assert said in str(failed.value) and HUB_TOKEN not in str(failed.value)


@pytest.mark.parametrize(
    "repo", ["google", "google/", "/gemma", "a/b/c", "-x/y", "x/.y", "google/gemma 4", ""]
)
def test_a_repo_id_the_hub_cannot_name_is_refused_before_any_request(
    wire: Callable[..., _Wire], repo: str
) -> None:
    sent = wire()
    with pytest.raises(hfhub.HubError, match="is not a Hugging Face repo id") as refused:
        hfhub.check_repo(repo, HUB_TOKEN)
    assert repr(repo) in str(refused.value) and sent.opened == []


def test_a_repo_id_of_every_allowed_character_is_asked(wire: Callable[..., _Wire]) -> None:
    sent = wire(_Answer(404, {"X-Error-Code": "RepoNotFound"}))
    assert hfhub.check_repo("Org-1.x/Model_2.b-c", HUB_TOKEN).access == hfhub.NOT_FOUND
    assert sent.sent[0][1] == "/api/models/Org-1.x/Model_2.b-c/auth-check"


def _sib(name: str, size: object, lfs: object = None) -> dict[str, object]:
    return {"rfilename": name, "size": size, **({"lfs": lfs} if lfs is not None else {})}


@pytest.mark.parametrize(
    ("files", "bytes_", "chosen"),
    [
        # safetensors before bin before pt (vLLM's order); other formats' weights never count.
        (
            [("a.safetensors", 100), ("a.bin", 1_000), ("a.pt", 10_000), ("c.json", 1)],
            101,
            "*.safetensors",
        ),
        ([("a.bin", 1_000), ("a.pt", 10_000), ("c.json", 1)], 1_001, "*.bin"),
        ([("a.pt", 10_000), ("a.gguf", 5), ("a.onnx", 6), ("c.json", 1)], 10_001, "*.pt"),
        # No format vLLM loads: only the other files count, and no format is named.
        ([("a.gguf", 5), ("a.h5", 6), ("README.md", 2)], 2, None),
        # A weights suffix in capitals is weights all the same (the Hub keeps names as given).
        ([("a.safetensors", 100), ("old.BIN", 1_000), ("x.Pth", 50)], 100, "*.safetensors"),
        # An empty file counts as 0 bytes, not as a file without a size.
        ([("a.safetensors", 100), (".gitattributes", 0)], 100, "*.safetensors"),
        ([], 0, None),
    ],
)
def test_the_download_counts_the_chosen_format_and_every_other_file(
    files: list[tuple[str, int]], bytes_: int, chosen: str | None
) -> None:
    assert hfhub.download_bytes([_sib(n, s) for n, s in files]) == (bytes_, chosen)


def test_an_lfs_objects_size_counts_and_a_malformed_lfs_entry_is_ignored() -> None:
    siblings = [
        _sib("a.safetensors", 134, {"size": 9_000}),  # the pointer is 134 bytes, the file 9,000
        _sib("b.json", 7, "not a dict"),
        _sib("c.json", 3, {"sha256": "x"}),  # an LFS entry without a size: the file's own
    ]
    assert hfhub.download_bytes(siblings) == (9_010, "*.safetensors")


@pytest.mark.parametrize("size", [None, True, -1, "10", 1.5])
def test_a_file_without_a_usable_size_is_an_error_naming_it(size: object) -> None:
    with pytest.raises(hfhub.HubError, match=r"listed tokenizer\.json without its size"):
        hfhub.download_bytes([_sib("a.safetensors", 1), _sib("tokenizer.json", size)])
    # The LFS size is checked the same way as the file's own.
    with pytest.raises(hfhub.HubError, match=r"listed a\.safetensors without its size"):
        hfhub.download_bytes([_sib("a.safetensors", 1, {"size": size})])
