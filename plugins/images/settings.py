"""The image backends' configuration: registry mirrors, retries and the node cache's limits.

It comes from the shared configuration file, handed to the backend as its config mapping::

    {"registries": {"docker.io": {"mirrors": ["http://127.0.0.1:5000"]}},
     "cache-max-bytes": 50000000000, "cache-write-back": false,
     "retry": {"attempts": 6, "initial-delay": 0.25}}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzzball_core.backoff import Backoff
from fuzzball_core.drivers import DEFAULT_IMAGE_RETRY
from fuzzball_core.errors import InvalidArgument
from fuzzball_plugins.images.platforms import node_platform
from fuzzball_plugins.images.reference import DOCKER_HUB, ImageReference


def retry_schedule(config: Mapping[str, Any]) -> Backoff:
    """The ``retry`` setting as a backoff schedule: ``attempts`` (counting the first try),
    ``initial-delay`` doubling up to ``max-delay``; unset keys keep the default's values."""
    default = DEFAULT_IMAGE_RETRY
    try:
        return Backoff(
            initial=float(config.get("initial-delay", default.initial)),
            factor=default.factor,
            maximum=float(config.get("max-delay", default.maximum)),
            attempts=int(config.get("attempts", default.attempts)),
        )
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"retry: {exc}") from None


@dataclass(frozen=True)
class ImageSettings:
    """Parsed image-backend configuration."""

    mirrors: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: registries reached over plain HTTP (``registries.HOST.insecure: true``)
    insecure: frozenset[str] = frozenset()
    cache_max_bytes: int | None = None
    cache_write_back: bool = False
    #: how requests to an unreachable registry are repeated
    retry: Backoff = DEFAULT_IMAGE_RETRY
    platform: str = field(default_factory=node_platform)
    timeout: float = 30.0

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> ImageSettings:
        """Validate ``config``; errors name the offending key."""
        config = config or {}
        mirrors: dict[str, list[str]] = {}
        insecure: set[str] = set()
        registries = config.get("registries") or {}
        if not isinstance(registries, Mapping):
            raise InvalidArgument("registries: must be a mapping of registry host to settings")
        for host, entry in registries.items():
            entry = entry or {}
            listed = entry.get("mirrors", []) if isinstance(entry, Mapping) else None
            if not isinstance(listed, list) or not all(isinstance(m, str) for m in listed):
                raise InvalidArgument(f"registries.{host}.mirrors: must be a list of URLs")
            for index, url in enumerate(listed):
                if not url.startswith(("http://", "https://")):
                    raise InvalidArgument(
                        f"registries.{host}.mirrors[{index}]: {url!r} must start with "
                        "http:// or https://"
                    )
            key = DOCKER_HUB if host in ("index.docker.io", "registry-1.docker.io") else host
            mirrors[key] = [url.rstrip("/") for url in listed]
            flag = entry.get("insecure", False)
            if not isinstance(flag, bool):
                raise InvalidArgument(f"registries.{host}.insecure: must be true or false")
            if flag:
                insecure.add(key)

        max_bytes = config.get("cache-max-bytes")
        if max_bytes is not None and (not isinstance(max_bytes, int) or max_bytes <= 0):
            raise InvalidArgument("cache-max-bytes: must be a positive integer")
        retry_config = config.get("retry") or {}
        if not isinstance(retry_config, Mapping):
            raise InvalidArgument("retry: must be a mapping (attempts, initial-delay, max-delay)")
        retry = retry_schedule(retry_config)
        return cls(
            mirrors=mirrors,
            insecure=frozenset(insecure),
            cache_max_bytes=max_bytes,
            cache_write_back=bool(config.get("cache-write-back", False)),
            retry=retry,
            platform=str(config.get("platform") or node_platform()),
            timeout=float(config.get("timeout", 30.0)),
        )

    def endpoints_for(self, reference: ImageReference) -> list[str]:
        """Base URLs to try for ``reference``'s registry: its mirrors in order, then itself
        (over plain HTTP when the configuration marks it insecure)."""
        base = reference.api_base
        if reference.registry in self.insecure:
            base = "http://" + base.removeprefix("https://").removeprefix("http://")
        return [*self.mirrors.get(reference.registry, ()), base]
