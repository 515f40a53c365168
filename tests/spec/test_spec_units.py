"""Memory sizes in bytes and durations in seconds."""

from __future__ import annotations

import pytest

from fuzzball_core.spec import parse_duration, parse_memory_size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("512", 512),
        ("512B", 512),
        ("1KB", 1000),
        ("1KiB", 1024),
        ("2MB", 2_000_000),
        ("2MiB", 2 * 1024**2),
        ("1GB", 10**9),
        ("30GiB", 30 * 1024**3),
        ("0.5GiB", 512 * 1024**2),
        ("1.5TB", 1_500_000_000_000),
        ("1TiB", 1024**4),
        ("1 GiB", 1024**3),
    ],
)
def test_memory_sizes_parse_to_bytes(text: str, size: int) -> None:
    assert parse_memory_size(text) == size


@pytest.mark.parametrize(
    "text", ["", "GiB", "1GX", "-1GiB", "0", "1e9", "1,5GiB", "9" * 100, "2PiB"]
)
def test_malformed_memory_sizes_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_memory_size(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10m0s", 600),
        ("150s", 150),
        ("4h", 14400),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("250ms", 0.25),
        ("0", 0),
    ],
)
def test_durations_parse_to_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "-5m", "1d", "h", "10m 5s", "9" * 100 + "h"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)
