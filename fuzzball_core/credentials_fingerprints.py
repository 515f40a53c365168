"""What tells registry credentials apart without keeping them: an HMAC under a key made when
the process starts.

Two caches share what one caller's credentials earned with another caller only when the
credentials are the same: the registry's accepted Authorization headers
(``plugins/images/authorizations.py``) and the pins that share one registry round trip
(``fuzzball_core/orchestrate/pin_flights.py``). Both key their entries by this fingerprint,
so no credential sits in a cache in the clear, and the fingerprint means nothing outside
this process (the key is never written anywhere).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

_KEY = secrets.token_bytes(32)


def credentials_fingerprint(credentials: Mapping[str, str]) -> str:
    """An HMAC of ``credentials`` (their names and values, in name order) under this
    process's key; empty for none, which no credentials' fingerprint equals."""
    if not credentials:
        return ""
    text = "\0".join(f"{name}={value}" for name, value in sorted(credentials.items()))
    return hmac.new(_KEY, text.encode(), hashlib.sha256).hexdigest()
