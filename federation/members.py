"""The member clusters as Federate reaches them: one REST client per member, found lazily.

A member that cannot be reached is not an error of Federate: its calls raise
``Unavailable`` naming the member, and the next call tries to reach it again.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import httpx

from fuzzball_core.client import FuzzballClient, discover_base_url
from fuzzball_core.config import FederateMemberConfig
from fuzzball_core.errors import FuzzballError, NotFound, Unavailable


class MemberClient(FuzzballClient):
    """The REST client, plus the log records as the gateway writes them (seq and time)."""

    def log_results(
        self, workflow_id: str, *, name: str | None = None, task_id: int | None = None
    ) -> list[dict[str, Any]]:
        """Every ``result`` of the workflow's (or one stage's) log so far, oldest first."""
        params: dict[str, Any] = {"show.follow": "false"}
        if name:
            params["name"] = name
        if task_id is not None:
            params["taskId"] = task_id
        try:
            response = self._http.get(f"/workflows/{workflow_id}:log", params=params)
        except httpx.HTTPError as exc:
            raise Unavailable(f"cannot reach the Fuzzball API at {self.base_url}: {exc}") from None
        if response.status_code >= 400:
            body = response.json() if response.content else {}
            raise (
                FuzzballError.from_status(body)
                if "code" in body
                else Unavailable(f"GET {response.request.url.path}: HTTP {response.status_code}")
            )
        results = []
        for line in response.text.splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if "error" in record:
                raise FuzzballError.from_status(record["error"])
            results.append(record.get("result", {}))
        return results


class Member:
    """One member cluster: its configuration and, once reached, its client."""

    def __init__(self, config: FederateMemberConfig, *, timeout: float = 10.0) -> None:
        self.config = config
        self.timeout = timeout
        self._client: MemberClient | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.config.name

    def client(self) -> MemberClient:
        """The member's client; ``Unavailable`` (naming the member) if it cannot be reached."""
        with self._lock:
            if self._client is None:
                token = self.config.token or None
                try:
                    base = discover_base_url(self.config.address, token, timeout=self.timeout)
                except Unavailable as exc:
                    raise Unavailable(f"cluster {self.name}: unreachable ({exc.message})") from None
                self._client = MemberClient(base, token, timeout=self.timeout)
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


class Members:
    """Every configured member by name."""

    def __init__(self, members: Sequence[Member]) -> None:
        self._by_name = {member.name: member for member in members}

    @classmethod
    def from_config(cls, configs: Sequence[FederateMemberConfig], *, timeout: float) -> Members:
        """Members from ``federate.clusters``."""
        return cls([Member(config, timeout=timeout) for config in configs])

    def __iter__(self) -> Any:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> Member:
        """The member named ``name``; ``NotFound`` when it left the configuration."""
        try:
            return self._by_name[name]
        except KeyError:
            raise NotFound(f"cluster {name!r} is no longer a member of this federation") from None

    def close(self) -> None:
        for member in self:
            member.close()
