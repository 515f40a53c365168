"""Authorization headers a registry accepted, kept for the next client with the same
credentials.

A registry client lives for one pin or one pull. Without this, each one began with a request
the registry refused (401) for its challenge, then, behind a bearer challenge (Docker Hub,
even without credentials; GHCR; Harbor), asked the token service for a token: three round
trips a pin where one does. A header the registry accepted is kept for its endpoint, the
repository and the caller's credentials, until its token expires (the token service's
``expires_in``, 60 s when it names none, less a margin) or :data:`STATIC_SECONDS` for one
made from the credentials alone; a kept header the registry refuses is dropped and the
challenge answered again.

Credentials are told apart by their fingerprint (``fuzzball_core.credentials_fingerprints``):
another caller's header is never reached with other credentials (or none), and no
credential is kept here in the clear.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

#: seconds a header made from the credentials alone (basic, or a token given as the
#: credential) is kept: a password changed meanwhile is a new key, a revoked one a 401
STATIC_SECONDS = 300.0
#: what a token service names no lifetime for lives this long (the token specification's)
DEFAULT_TOKEN_SECONDS = 60.0
#: seconds taken off a token's lifetime, so that it is not sent as it expires
EXPIRY_MARGIN = 5.0
#: headers kept (endpoint, repository and credentials each)
LIMIT = 256

#: (endpoint, repository, credentials' fingerprint)
Key = tuple[str, str, str]


def token_seconds(expires_in: object) -> float:
    """How long to keep a token the token service said ``expires_in`` of (0: not at all)."""
    seconds = DEFAULT_TOKEN_SECONDS
    if isinstance(expires_in, int | float | str):
        with contextlib.suppress(ValueError):  # not a number: the default
            seconds = float(expires_in)
    return max(seconds - EXPIRY_MARGIN, 0.0)


class Authorizations:
    """The headers kept, most recently used last, at most :data:`LIMIT`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._headers: OrderedDict[Key, tuple[str, float]] = OrderedDict()

    def get(self, key: Key) -> str | None:
        """The header kept for ``key`` and not expired, or None."""
        now = self._clock()
        with self._lock:
            kept = self._headers.get(key)
            if kept is None:
                return None
            if kept[1] <= now:
                del self._headers[key]
                return None
            self._headers.move_to_end(key)
            return kept[0]

    def keep(self, key: Key, header: str, seconds: float) -> None:
        """Keep ``header``, which the registry just accepted, for ``seconds``."""
        if not header or seconds <= 0:
            return
        with self._lock:
            self._headers[key] = (header, self._clock() + seconds)
            self._headers.move_to_end(key)
            while len(self._headers) > LIMIT:
                self._headers.popitem(last=False)

    def forget(self, key: Key, header: str) -> None:
        """Drop ``header`` for ``key`` (the registry refused it), unless another replaced it."""
        with self._lock:
            kept = self._headers.get(key)
            if kept is not None and kept[0] == header:
                del self._headers[key]


#: this process's kept headers
AUTHORIZATIONS = Authorizations()
