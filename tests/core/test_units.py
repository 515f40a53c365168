"""Sizes and durations as people write them."""

import pytest

from fuzzball_core.units import parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1024", 1024),
        ("1B", 1),
        ("2KB", 2000),
        ("2KiB", 2048),
        ("3MB", 3_000_000),
        ("3MiB", 3 * 1024**2),
        ("1GB", 10**9),
        ("0.5GiB", 512 * 1024**2),
        ("1TB", 10**12),
        ("1TiB", 1024**4),
        ("4gib", 4 * 1024**3),
        (17, 17),
    ],
)
def test_sizes_in_every_unit(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GiB", "1 PB", "-1GiB", "one", True, -5])
def test_invalid_sizes_are_refused(text):
    with pytest.raises(ValueError):
        parse_size(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("150s", 150), ("10m0s", 600), ("4h", 14400), ("1h30m", 5400), ("250ms", 0.25),
     ("90", 90), (30, 30)],
)
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10x", "m", "1h 30m", "forever", False])
def test_invalid_durations_are_refused(text):
    with pytest.raises(ValueError):
        parse_duration(text)
