"""Memory sizes and durations as workflow files write them.

Sizes: a decimal number and an optional unit, ``B``, ``KB``, ``KiB``, ``MB``, ``MiB``, ``GB``,
``GiB``, ``TB`` or ``TiB`` (a bare number is bytes), e.g. ``1GiB``, ``0.5GiB``, ``512MiB``.
Durations: Go's ``time.ParseDuration`` syntax, one or more number+unit pairs with units ``ns``,
``us``/``µs``, ``ms``, ``s``, ``m``, ``h``, e.g. ``10m0s``, ``150s``, ``4h``, ``1h30m``.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# Longer texts are refused before any arithmetic, so hostile input stays cheap.
_MAX_TEXT = 64

_SIZE_UNITS: dict[str, int] = {
    "": 1,
    "B": 1,
    "KB": 1000,
    "KIB": 1024,
    "MB": 1000**2,
    "MIB": 1024**2,
    "GB": 1000**3,
    "GIB": 1024**3,
    "TB": 1000**4,
    "TIB": 1024**4,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*")
#: 1 PiB: no node has more, and anything above it is a typo, not a request.
MAX_MEMORY_BYTES = 1024**5

_DURATION_UNITS: dict[str, Decimal] = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "μs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
#: About 290 years, Go's largest time.Duration.
MAX_DURATION_SECONDS = 9_223_372_036


def parse_memory_size(text: str) -> int:
    """Return the number of bytes ``text`` (e.g. ``"0.5GiB"``) stands for.

    Raises ``ValueError`` with a user-facing message when the text is not a size, names an
    unknown unit, is zero, or exceeds ``MAX_MEMORY_BYTES``.
    """
    if len(text) > _MAX_TEXT:
        raise ValueError("is too long to be a memory size")
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError("must be a number with an optional unit, e.g. 512MiB or 1GB")
    number, unit = match.groups()
    multiplier = _SIZE_UNITS.get(unit.upper())
    if multiplier is None:
        raise ValueError(
            f"unit {unit!r} is not one of B, KB, KiB, MB, MiB, GB, GiB, TB, TiB"
            if len(unit) <= 8
            else "unit is not one of B, KB, KiB, MB, MiB, GB, GiB, TB, TiB"
        )
    try:
        size = int(Decimal(number) * multiplier)
    except InvalidOperation as exc:  # pragma: no cover - the pattern admits only decimals
        raise ValueError("must be a number with an optional unit") from exc
    if size <= 0:
        raise ValueError("must be at least 1 byte")
    if size > MAX_MEMORY_BYTES:
        raise ValueError("must be at most 1TiB x 1024 (1 PiB)")
    return size


def parse_duration(text: str) -> float:
    """Return the number of seconds a Go-style duration (``"1h30m"``) stands for.

    ``"0"`` is zero; every other value needs a unit. Raises ``ValueError`` with a user-facing
    message for anything else, including negative and absurdly long durations.
    """
    if len(text) > _MAX_TEXT:
        raise ValueError("is too long to be a duration")
    stripped = text.strip()
    if stripped == "0":
        return 0.0
    if not stripped or _DURATION_PART.sub("", stripped) != "":
        if re.fullmatch(r"\d+(?:\.\d*)?", stripped):
            raise ValueError(f"needs a unit, e.g. {stripped}s")
        raise ValueError("must be a duration such as 150s, 10m0s, 4h or 1h30m")
    total = sum(
        (
            Decimal(number) * _DURATION_UNITS[unit]
            for number, unit in _DURATION_PART.findall(stripped)
        ),
        Decimal(0),
    )
    if total > MAX_DURATION_SECONDS:
        raise ValueError("is longer than the longest duration allowed (about 290 years)")
    return float(total)
