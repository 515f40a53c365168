"""Quantities written by people: memory sizes (``0.5GiB``) and durations (``1h30m``)."""

from __future__ import annotations

import re

_SIZE_UNITS: dict[str, int] = {
    "": 1,
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*([A-Za-z]*)\s*")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_DURATION_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_size(text: str | int) -> int:
    """Bytes in ``text``: ``1024``, ``512MB``, ``0.5GiB``; units B, KB, KiB ... TB, TiB.

    Raises ValueError naming the accepted units.
    """
    if isinstance(text, bool):
        raise ValueError("expected a size such as 4GiB, not a boolean")
    if isinstance(text, int):
        if text < 0:
            raise ValueError("size must not be negative")
        return text
    match = _SIZE.fullmatch(str(text))
    unit = match.group(2).upper() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise ValueError(
            f"invalid size {str(text)[:40]!r}: expected a number with one of the units "
            "B, KB, KiB, MB, MiB, GB, GiB, TB, TiB"
        )
    return int(float(match.group(1)) * _SIZE_UNITS[unit])


def parse_duration(text: str | int | float) -> float:
    """Seconds in ``text``: Go-style ``10m0s``, ``150s``, ``4h``, ``1h30m``, ``250ms``.

    A bare number is seconds. Raises ValueError on anything else.
    """
    if isinstance(text, bool):
        raise ValueError("expected a duration such as 10m0s, not a boolean")
    if isinstance(text, int | float):
        if text < 0:
            raise ValueError("duration must not be negative")
        return float(text)
    value = str(text).strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ValueError(
            f"invalid duration {value[:40]!r}: expected e.g. 90s, 10m0s, 4h or 1h30m"
        )
    return sum(float(n) * _DURATION_SECONDS[u] for n, u in parts)
