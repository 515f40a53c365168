"""The agent's reconnect schedule: the project's one backoff, spread so nodes do not
reconnect in step."""

from __future__ import annotations

from itertools import islice

from fuzzball_core.substrate.agent import CHANNEL_OPTIONS, RECONNECT_BACKOFF


def test_reconnect_delays_double_from_a_fifth_of_a_second_up_to_two_and_a_half_seconds():
    assert list(islice(RECONNECT_BACKOFF.nominal(), 7)) == [0.2, 0.4, 0.8, 1.6, 2.5, 2.5, 2.5]


def test_the_channel_waits_less_between_attempts_than_the_agent_between_registers():
    options = dict(CHANNEL_OPTIONS)
    assert options["grpc.max_reconnect_backoff_ms"] < RECONNECT_BACKOFF.maximum * 1000


def test_reconnect_delays_never_run_out_and_stay_within_a_fifth_of_the_schedule():
    nominal = list(islice(RECONNECT_BACKOFF.nominal(), 50))
    actual = list(islice(RECONNECT_BACKOFF.delays(), 50))
    assert len(actual) == 50
    assert all(0.8 * n <= a <= 1.2 * n for n, a in zip(nominal, actual, strict=True))
