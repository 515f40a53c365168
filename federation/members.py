"""The member clusters as Federate reaches them: one REST client per member, found lazily.

The client reads each reply into its ``fuzzball.v1`` message, which ``remote_views`` turns
into service views. A member that cannot be reached is not an error of Federate: its calls
raise ``Unavailable`` naming the member, and the next call tries to reach it again. Each
client signs the identity of the caller Federate acts for into its requests
(``forwarding``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from fuzzball_core.client import FuzzballClient, discover_base_url
from fuzzball_core.config import FederateMemberConfig
from fuzzball_core.errors import NotFound, Unavailable
from fuzzball_core.tls import client_ssl_context
from fuzzball_federation.forwarding import ForwardedIdentityAuth


class Member:
    """One member cluster: its configuration and, once reached, its client."""

    def __init__(self, config: FederateMemberConfig, *, timeout: float = 10.0) -> None:
        self.config = config
        self.timeout = timeout
        self._client: FuzzballClient | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The member's name in ``federate.clusters``."""
        return self.config.name

    def client(self) -> FuzzballClient:
        """The member's client; ``Unavailable`` (naming the member) if it cannot be reached."""
        with self._lock:
            if self._client is None:
                token = self.config.token or None
                # an https member is verified against its ca-file (the system's roots without)
                verify = client_ssl_context(self.config.ca_file)
                try:
                    base = discover_base_url(
                        self.config.address, token, timeout=self.timeout, verify=verify
                    )
                except Unavailable as exc:
                    raise Unavailable(f"cluster {self.name}: unreachable ({exc.message})") from None
                self._client = FuzzballClient(
                    base,
                    token,
                    timeout=self.timeout,
                    verify=verify,
                    auth=ForwardedIdentityAuth(self.name),
                )
            return self._client

    def close(self) -> None:
        """Close the member's client; the next call reaches the member anew."""
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

    def __iter__(self) -> Iterator[Member]:
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
        """Close every member's client."""
        for member in self:
            member.close()
