"""The shape of every inventory-backed API fake: a route table over one shared inventory."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tools.rehearsal.fakes.base import Answer, LoopbackServer, api_error
from tools.rehearsal.fakes.iamrules import CHECKED_ON, Checked
from tools.rehearsal.fakes.inventory import Inventory

# (path match, query, body, principal) -> answer
ACT_AS = "iam.serviceAccounts.actAs"
Handler = Callable[[re.Match[str], dict[str, str], Any, str], Answer]


class ApiFake(LoopbackServer):
    """A loopback server whose routes read and write `inventory` under the lock, and whose
    every request is logged there with the caller's identity and the answer's status."""

    api = "api"

    def __init__(self, inventory: Inventory | None = None) -> None:
        self.inventory = inventory if inventory is not None else Inventory()
        # The headers of the request being answered (handlers run one at a time, under the lock).
        self.headers: dict[str, str] = {}
        self._routes: list[tuple[str, re.Pattern[str], Handler, tuple[str, ...]]] = []
        self.routes()
        super().__init__(self._dispatch)

    def routes(self) -> None:
        """Register the API's routes with `self.route`."""

    def route(
        self, method: str, pattern: str, handler: Handler, needs: tuple[str, ...] = ()
    ) -> None:
        """`needs`: the permissions a caller other than the owner must hold, each checked on
        the resource iamrules.CHECKED_ON names, taken from `self.resources(...)`."""
        self._routes.append((method, re.compile(pattern), handler, needs))

    def resources(self, m: re.Match[str], query: dict[str, str], body: Any) -> list[Checked]:
        """The resources of one request (the target, its parent, its network ...)."""
        return []

    def refused(
        self, principal: str, needs: tuple[str, ...], resources: list[Checked]
    ) -> Answer | None:
        """The real API's 403 for the first permission IAM does not grant, or None. A request
        may name several resources of one type (a cluster whose node pools run as two
        accounts): the permission is needed on each."""
        at = self.inventory.request_time(self.headers)
        for permission in needs:
            checked_on = [r for r in resources if r.type == CHECKED_ON[permission]]
            if not checked_on and permission != ACT_AS:
                raise AssertionError(
                    f"{type(self).__name__}.resources() names no {CHECKED_ON[permission]} for "
                    f"{permission}"
                )
            # actAs with no account attached to the resource: nothing to act as.
            for resource in checked_on:
                if not self.inventory.check(principal, permission, resource, at):
                    return api_error(
                        403,
                        f"Permission '{permission}' denied on resource '{resource.name}' (or it "
                        "may not exist).",
                    )
        return None

    def _dispatch(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Answer:
        url = urlsplit(path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        with self.inventory.locked() as inv:
            self.headers = headers
            principal = inv.principal(headers)
            answer: Answer
            if principal is None:
                answer = api_error(401, "Request had invalid authentication credentials.")
            else:
                answer = self._find(method, unquote(url.path), query, body, principal)
            inv.record(self.api, method, url.path, principal or "?", answer[0])
        return answer

    def _find(
        self, method: str, path: str, query: dict[str, str], body: Any, principal: str
    ) -> Answer:
        for verb, pattern, handler, needs in self._routes:
            if verb == method and (m := pattern.fullmatch(path)):
                if needs:
                    denied = self.refused(principal, needs, self.resources(m, query, body))
                    if denied is not None:
                        return denied
                return handler(m, query, body, principal)
        return api_error(404, f"the fake {self.api} API has no route {method} {path}")

    def operation(self, name: str, response: dict[str, Any] | None = None) -> dict[str, Any]:
        """A long-running operation that is already done (the fakes never make you wait)."""
        op_id = self.inventory.next_id()
        return {"name": f"{name}/operations/op-{op_id}", "done": True, "response": response or {}}
