"""The member clusters as Federate reaches them: one REST client per member, found lazily.

The client reads each reply into its ``fuzzball.v1`` message, which ``remote_views`` turns
into service views. A member that cannot be reached is not an error of Federate: its calls
raise ``Unavailable`` naming the member, and the next call tries to reach it again. Each
client signs the identity of the caller Federate acts for into its requests
(``forwarding``).

Members come from two places: ``federate.clusters`` in the configuration (present from start
to stop; their id is derived from their name, :func:`configured_id`) and registration
(``POST /v3/admin/cluster/registration``, ``registration.py``), which adds one to the live
:class:`Members` while Federate runs. Whoever keeps something per member (routing's cached
offers, the health conditions) iterates :meth:`Members.snapshot` and is told of joins and
leaves through :meth:`Members.subscribe`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from fuzzball_core.client import FuzzballClient, discover_base_url
from fuzzball_core.config import FederateMemberConfig
from fuzzball_core.errors import AlreadyExists, NotFound
from fuzzball_core.listeners import Listeners
from fuzzball_core.tls import client_ssl_context
from fuzzball_federation.forwarding import ForwardedIdentityAuth

#: the ClusterKind names a member can have
ORCHESTRATE, FEDERATE = "CLUSTER_KIND_ORCHESTRATE", "CLUSTER_KIND_FEDERATE"
#: where a member comes from
CONFIGURED, REGISTERED = "configuration", "registration"
#: the status reason of a member that is leaving (on the wire: CLUSTER_STATUS_DISABLED)
DRAINING = "draining"
#: the namespace of the ids derived from ``federate.clusters`` names
_CONFIGURED_IDS = uuid.UUID("6f1d1c52-4b1e-4d6e-9a52-1f0c2b9d7e31")


def configured_id(name: str) -> str:
    """The id of the ``federate.clusters`` member ``name``: the same on every start (a
    name-based UUID), so ``fuzzball cluster show ID`` keeps working across restarts."""
    return str(uuid.uuid5(_CONFIGURED_IDS, f"federate.clusters/{name}"))


class Member:
    """One member cluster: its configuration, identity, health and, once reached, its
    client."""

    def __init__(
        self,
        config: FederateMemberConfig,
        *,
        timeout: float = 10.0,
        id: str | None = None,
        kind: str = ORCHESTRATE,
        source: str = CONFIGURED,
        draining: bool = False,
        jwk_public_key: str = "",
        openapi_endpoint: str = "",
        created_at: float | None = None,
        updated_at: float | None = None,
    ) -> None:
        self.config = config
        self.timeout = timeout
        self.id = id or configured_id(config.name)
        self.kind = kind
        self.source = source
        #: leaving: routing gives it no new work (``registration.py`` removes it once its
        #: federated workflows have ended)
        self.draining = draining
        self.jwk_public_key = jwk_public_key
        self.openapi_endpoint = openapi_endpoint
        self.created_at = time.time() if created_at is None else created_at
        self.updated_at = self.created_at if updated_at is None else updated_at
        #: the last poll's answer: None before the first, else "" (reached) or why not
        self.unreachable_reason: str | None = None
        self._client: FuzzballClient | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The member's name (in ``federate.clusters``, or as it registered)."""
        return self.config.name

    @property
    def routable(self) -> bool:
        """Whether new work may go to it (it is not draining)."""
        return not self.draining

    def client(self) -> FuzzballClient:
        """The member's client; ``Unavailable`` (naming the member, not its address) if it
        cannot be reached, now or by any later call of the client."""
        with self._lock:
            if self._client is None:
                token = self.config.token or None
                # an https member is verified against its ca-file (the system's roots without)
                verify = client_ssl_context(self.config.ca_file)
                # its errors name the cluster, never the address Federate reaches it at
                named = f"cluster {self.name}"
                base = discover_base_url(
                    self.config.address, token, timeout=self.timeout, verify=verify, named=named
                )
                self._client = FuzzballClient(
                    base,
                    token,
                    timeout=self.timeout,
                    verify=verify,
                    auth=ForwardedIdentityAuth(self.name),
                    named=named,
                )
            return self._client

    def close(self) -> None:
        """Close the member's client; the next call reaches the member anew."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def take_registration(self, other: Member) -> None:
        """Become what ``other`` (this member registered again) says: its address, token,
        labels, kind and keys; taking work again (no longer draining). The next call reaches
        it anew, with the new token."""
        with self._lock:
            self.config, self.kind = other.config, other.kind
            self.jwk_public_key, self.openapi_endpoint = (
                other.jwk_public_key,
                other.openapi_endpoint,
            )
            self.updated_at = other.updated_at
            self.draining = False
            client, self._client = self._client, None
        if client is not None:
            client.close()


@dataclass(frozen=True)
class MemberChange:
    """A member that joined or left (what :meth:`Members.subscribe` listeners are told)."""

    what: Literal["joined", "left"]
    member: Member


#: a listener of joins and leaves
Listener = Callable[[MemberChange], None]


class Members:
    """The live members by name: the configured ones, and those that join and leave while
    Federate runs. Safe to use from the gateway's worker threads and the poll loop."""

    def __init__(self, members: Sequence[Member] = ()) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, Member] = {}
        self._listeners: Listeners[MemberChange] = Listeners()
        for member in members:
            self.add(member)

    @classmethod
    def from_config(cls, configs: Sequence[FederateMemberConfig], *, timeout: float) -> Members:
        """Members from ``federate.clusters``."""
        return cls([Member(config, timeout=timeout) for config in configs])

    def snapshot(self) -> tuple[Member, ...]:
        """The members now, in the order they joined (a copy: joins and leaves after it do
        not change it)."""
        with self._lock:
            return tuple(self._by_name.values())

    def routable(self) -> tuple[Member, ...]:
        """The members new work may go to (not draining)."""
        return tuple(member for member in self.snapshot() if member.routable)

    def __iter__(self) -> Iterator[Member]:
        return iter(self.snapshot())

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_name)

    def get(self, name: str) -> Member:
        """The member named ``name``; ``NotFound`` when it left (or was never a member)."""
        with self._lock:
            member = self._by_name.get(name)
        if member is None:
            raise NotFound(f"cluster {name!r} is no longer a member of this federation")
        return member

    def by_id(self, cluster_id: str) -> Member:
        """The member whose id is ``cluster_id``; ``NotFound`` naming it otherwise."""
        for member in self.snapshot():
            if member.id == cluster_id:
                return member
        raise NotFound(f"cluster {cluster_id!r} not found")

    def add(self, member: Member) -> None:
        """Make ``member`` one (routing sees it from the next decision on); AlreadyExists
        when its name or id is taken."""
        with self._lock:
            if member.name in self._by_name:
                raise AlreadyExists(f"a member named {member.name!r} already exists")
            if any(other.id == member.id for other in self._by_name.values()):
                raise AlreadyExists(f"a member with id {member.id!r} already exists")
            self._by_name[member.name] = member
            listeners = self._listeners.current()
        for listener in listeners:
            listener(MemberChange("joined", member))

    def remove(self, name: str) -> Member:
        """Take member ``name`` out (its client closed); NotFound when it is none."""
        with self._lock:
            member = self._by_name.pop(name, None)
            listeners = self._listeners.current()
        if member is None:
            raise NotFound(f"cluster {name!r} is no longer a member of this federation")
        member.close()
        for listener in listeners:
            listener(MemberChange("left", member))
        return member

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` after each join and leave (in the thread that made it); returns
        what unsubscribes it."""
        return self._listeners.subscribe(listener)

    def close(self) -> None:
        """Close every member's client."""
        for member in self:
            member.close()
