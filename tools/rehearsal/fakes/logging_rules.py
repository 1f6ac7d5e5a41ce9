"""What Cloud Logging refuses in an entries:list request, and how its filter matches, as data
with sources.

The filter is parsed by the Logging query language's documented grammar (the subset below, which
is what tpudeploy/logsources.py writes and a little more), never by substring: a malformed filter
is refused with the API's 400, a well-formed one is evaluated against each entry. The request's
shape is checked against the Logging API's discovery document (ListLogEntriesRequest, vendored in
schemas/discovery/logging.v2.LogMetric.json), with the limits its prose states.

Sources read through the search tool on 2026-12-03: the entries.list reference
(cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list), the discovery document's
ListLogEntriesRequest (revision 20260911) and the Logging query language page
(cloud.google.com/logging/docs/view/logging-query-language; stored copies in several languages,
the English text where quoted).
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tools.rehearsal.fakes.discovery_rules import Rule, check

_SCHEMAS = Path(__file__).resolve().parents[3] / "schemas" / "discovery"
LOGGING = json.loads((_SCHEMAS / "logging.v2.LogMetric.json").read_text(encoding="utf-8"))

QUERY_PAGE = "https://cloud.google.com/logging/docs/view/logging-query-language"
LIST_PAGE = "https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list"

RULES = (
    Rule(
        "resourceNames is required; each names a parent resource (projects/[PROJECT_ID], ...)",
        LIST_PAGE,
        "resourceNames[] ... Required. Names of one or more parent resources from which to "
        "retrieve log entries ... projects/[PROJECT_ID]",
    ),
    Rule(
        "at most 100 resources in one request",
        "https://cloud.google.com/php/docs/reference/cloud-logging/latest/V2.ListLogEntriesRequest",
        "A maximum of 100 resources may be specified in a single request.",
    ),
    Rule(
        "a filter is at most 20,000 characters",
        "schemas/discovery/logging.v2.LogMetric.json, ListLogEntriesRequest.filter",
        "The maximum length of a filter is 20,000 characters.",
    ),
    Rule(
        "orderBy is timestamp asc (the default) or timestamp desc, nothing else",
        "schemas/discovery/logging.v2.LogMetric.json, ListLogEntriesRequest.orderBy",
        'Presently, the only permitted values are "timestamp asc" (default) and "timestamp desc".',
    ),
    Rule(
        "pageSize: default 50; a negative value is refused. (An older copy of the reference "
        "page also refused values over 1000; the current discovery document does not say so, "
        "so the fake serves at most 1000 per page and refuses nothing above)",
        "schemas/discovery/logging.v2.LogMetric.json, ListLogEntriesRequest.pageSize",
        "Default is 50. If the value is negative, the request is rejected.",
    ),
    Rule(
        "pageToken is the previous response's nextPageToken, with the other parameters unchanged",
        "schemas/discovery/logging.v2.LogMetric.json, ListLogEntriesRequest.pageToken",
        "page_token must be the value of next_page_token from the previous response. The values "
        "of other method parameters should be identical to those in the previous call.",
    ),
    Rule(
        "the query grammar: expression = [NOT] comparison { (AND | OR) [NOT] comparison }; a "
        "comparison is a value (a global restriction), [FIELD_NAME] [OP] [VALUE], or a "
        "parenthesised expression; anything else is refused (400)",
        QUERY_PAGE,
        'expression = ["NOT"] comparison { ("AND" | "OR") ["NOT"] comparison }',
    ),
    Rule(
        "NOT binds tightest, then OR, then AND (OR binds tighter than AND)",
        QUERY_PAGE,
        '"a" OR NOT "b" AND NOT "c" OR "d" ... is evaluated as ("a" OR (NOT "b")) AND '
        '((NOT "c") OR "d")',
    ),
    Rule(
        "the boolean operators are words in capitals: a lower-case and/or is a value (a "
        "global restriction), not an operator",
        QUERY_PAGE,
        "The Logging query language is case-insensitive, with the exception of regular "
        "expressions and logical operators (AND, OR). Logical operators must be capitalized.",
    ),
    Rule(
        "string comparisons are not case sensitive",
        QUERY_PAGE,
        "String comparisons aren't case sensitive.",
    ),
    Rule(
        "a query is at most 20,000 characters",
        QUERY_PAGE,
        "A query can't exceed 20,000 characters.",
    ),
    Rule(
        "timestamp compares as a time: its value must be an RFC 3339 timestamp. Rests on the "
        "issue's reading: the stored copies did not quote the timestamp section",
        QUERY_PAGE,
        '(the issue) timestamp >= "2023-11-29T23:00:00Z"',
    ),
    Rule(
        "log_id(ID) matches the entries of that log ID, whatever the project (the log name's "
        "last part, URL-encoded). Rests on the issue's reading: the stored copies did not quote "
        "the functions section",
        QUERY_PAGE,
        '(the page\'s example) log_id("cloudaudit.googleapis.com/activity")',
    ),
    Rule(
        "two comparisons side by side with no operator are joined by AND. Rests on Google's "
        "filtering specification (AIP-160), which the query page links as its formal grammar; "
        "not quoted from a stored page",
        "https://google.aip.dev/160",
        "(not quoted)",
    ),
)

MAX_RESOURCES = 100
MAX_FILTER = 20_000
ORDER_BY = ("timestamp asc", "timestamp desc")
DEFAULT_PAGE_SIZE = 50
MAX_PAGE = 1000
_RESOURCE = re.compile(r"(projects|organizations|billingAccounts|folders)/[^/]+(/.+)?")
_OPS = ("!=", ">=", "<=", "=~", "!~", "=", ">", "<", ":")


class FilterError(ValueError):
    """A filter the Logging API would refuse: the message says where."""


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # "str" (quoted), "word", "op", "(", ")", "and", "or", "not"
    text: str
    at: int


_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<op>!=|>=|<=|=~|!~|=|>|<|:)'
    r"|(?P<paren>[()])|(?P<word>[^\s()\"=!<>:]+))"
)


def tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise FilterError(f"unparseable filter at column {pos + 1}: {text[pos : pos + 20]!r}")
        if m["str"] is not None:
            try:
                value = json.loads(m["str"])
            except json.JSONDecodeError:
                raise FilterError(f"bad string at column {m.start('str') + 1}") from None
            out.append(_Tok("str", value, m.start("str")))
        elif m["op"] is not None:
            out.append(_Tok("op", m["op"], m.start("op")))
        elif m["paren"] is not None:
            out.append(_Tok(m["paren"], m["paren"], m.start("paren")))
        else:
            word = m["word"]
            kind = {"AND": "and", "OR": "or", "NOT": "not"}.get(word, "word")
            out.append(_Tok(kind, word, m.start("word")))
        pos = m.end()
    return out


Entry = dict[str, Any]
Predicate = Callable[[Entry], bool]


class _Parser:
    """Recursive descent over the documented precedence: AND < OR < NOT < comparison."""

    def __init__(self, text: str) -> None:
        self.toks = tokens(text)
        self.i = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise FilterError("unexpected end of filter")
        self.i += 1
        return tok

    def parse(self) -> Predicate:
        if not self.toks:
            return lambda entry: True  # "An empty filter matches all log entries"
        pred = self.conjunction()
        tok = self.peek()
        if tok is not None:
            raise FilterError(f"unexpected {tok.text!r} at column {tok.at + 1}")
        return pred

    def conjunction(self) -> Predicate:
        parts = [self.disjunction()]
        while (tok := self.peek()) is not None and tok.kind != ")":
            if tok.kind == "and":
                self.take()
            parts.append(self.disjunction())  # explicit AND, or two side by side
        return parts[0] if len(parts) == 1 else (lambda e: all(p(e) for p in parts))

    def disjunction(self) -> Predicate:
        parts = [self.negation()]
        while (tok := self.peek()) is not None and tok.kind == "or":
            self.take()
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else (lambda e: any(p(e) for p in parts))

    def negation(self) -> Predicate:
        tok = self.peek()
        if tok is not None and tok.kind == "not":
            self.take()
            inner = self.negation()
            return lambda e: not inner(e)
        return self.comparison()

    def comparison(self) -> Predicate:
        tok = self.take()
        if tok.kind == "(":
            inner = self.conjunction()
            close = self.take()
            if close.kind != ")":
                raise FilterError(f"expected ')' at column {close.at + 1}")
            return inner
        if tok.kind not in ("word", "str"):
            raise FilterError(f"unexpected {tok.text!r} at column {tok.at + 1}")
        nxt = self.peek()
        if tok.kind == "word" and nxt is not None and nxt.kind == "(":
            return self.function(tok)
        if nxt is None or nxt.kind != "op":
            needle = tok.text.lower()
            return lambda e: needle in json.dumps(e).lower()  # a global restriction
        if tok.kind != "word":
            raise FilterError(f"a field name expected before {nxt.text!r}, got {tok.text!r}")
        op = self.take().text
        value = self.take()
        if value.kind == "(":
            return self.value_list(tok.text, op)
        if value.kind not in ("word", "str"):
            raise FilterError(f"a value expected after {op!r} at column {value.at + 1}")
        return _compare(tok.text, op, value.text)

    def function(self, name: _Tok) -> Predicate:
        """log_id("ID"): the entries whose logName ends in /logs/ID (the only function the
        fake knows; any other is refused, as a function the API does not have would be)."""
        self.take()  # (
        arg = self.take()
        close = self.take()
        if name.text != "log_id" or arg.kind != "str" or close.kind != ")":
            raise FilterError(f"unknown function or bad argument at column {name.at + 1}")
        suffix = "/logs/" + quote(arg.text, safe="")
        return lambda e: str(e.get("logName", "")).endswith(suffix)

    def value_list(self, path: str, op: str) -> Predicate:
        """FIELD OP ("a" OR "b"): the comparison with each value, joined as written (the
        page's `resource.type = ("k8s_cluster" OR "gce_instance")`)."""
        preds = [self._one_value(path, op)]
        joiner = None
        while (tok := self.take()).kind != ")":
            if tok.kind not in ("and", "or") or joiner not in (None, tok.kind):
                raise FilterError(f"unexpected {tok.text!r} at column {tok.at + 1}")
            joiner = tok.kind
            preds.append(self._one_value(path, op))
        if joiner == "and":
            return lambda e: all(p(e) for p in preds)
        return lambda e: any(p(e) for p in preds)

    def _one_value(self, path: str, op: str) -> Predicate:
        value = self.take()
        if value.kind not in ("word", "str"):
            raise FilterError(f"a value expected at column {value.at + 1}")
        return _compare(path, op, value.text)


def _field(entry: Entry, path: str) -> Any:
    node: Any = entry
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _time(text: str) -> datetime.datetime | None:
    try:
        parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def _compare(path: str, op: str, literal: str) -> Predicate:
    if op in ("=~", "!~"):
        pattern = re.compile(literal)
        return lambda e: (
            (_field(e, path) is not None)
            and (bool(pattern.search(str(_field(e, path)))) == (op == "=~"))
        )
    if path == "timestamp":
        bound = _time(literal)
        if bound is None:
            raise FilterError(f"invalid timestamp {literal!r}: RFC 3339 expected")
        return lambda e: _ordered(_time(str(e.get("timestamp", ""))), op, bound)

    def matches(entry: Entry) -> bool:
        actual = _field(entry, path)
        if actual is None:
            return op == "!="
        if op == ":":
            return literal.lower() in str(actual).lower()
        if isinstance(actual, int | float) and not isinstance(actual, bool):
            try:
                return _ordered(float(actual), op, float(literal))
            except ValueError:
                return op == "!="
        if isinstance(actual, bool):
            actual = str(actual).lower()
        return _ordered(str(actual).lower(), op, literal.lower())

    return matches


def _ordered(left: Any, op: str, right: Any) -> bool:
    if left is None:
        return False
    return bool(
        {
            "=": left == right,
            "!=": left != right,
            ">": left > right,
            "<": left < right,
            ">=": left >= right,
            "<=": left <= right,
        }[op]
    )


def parse_filter(text: str) -> Predicate:
    """The filter as a predicate over LogEntry JSON; FilterError where the API answers 400."""
    if len(text) > MAX_FILTER:
        raise FilterError(f"the filter is {len(text)} characters, over {MAX_FILTER}")
    return _Parser(text).parse()


def request_problems(body: Any) -> list[str]:
    """What entries:list refuses (400) in a request body, before it reads anything."""
    found = check(LOGGING["schemas"], "ListLogEntriesRequest", body)
    if found or not isinstance(body, dict):
        return found or ["the request body is not a JSON object"]
    names = body.get("resourceNames") or []
    if not names:
        found.append("resourceNames: at least one parent resource is required")
    if len(names) > MAX_RESOURCES:
        found.append(f"resourceNames: {len(names)} resources, over {MAX_RESOURCES}")
    found += [
        f"resourceNames: {n!r} is not a parent resource"
        for n in names
        if not _RESOURCE.fullmatch(str(n))
    ]
    order = body.get("orderBy", ORDER_BY[0])
    if order not in ORDER_BY:
        found.append(f"orderBy: {order!r}; the only permitted values are {list(ORDER_BY)}")
    size = body.get("pageSize", DEFAULT_PAGE_SIZE)
    if isinstance(size, int) and size < 0:
        found.append(f"pageSize: {size} is negative")
    return found
