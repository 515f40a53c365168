"""A process started before its database server answers waits for it (``database.start-wait``),
saying what it waits for, and gives up with an error naming the server, never its password."""

from __future__ import annotations

import pytest
from support.cluster import free_port

from fuzzball_core.config import ConfigError, parse_config
from fuzzball_core.errors import Unavailable
from fuzzball_core.store.database import connect, wait_until_answering


class FakeTime:
    """A clock that the retries' sleeps advance, so no test waits for real."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def closed_server_url() -> str:
    # a loopback port nothing listens on: psycopg's connection is refused at once
    return f"postgresql://fuzzball:hunter2-secret@127.0.0.1:{free_port()}/fuzzball"


def test_a_server_that_never_answers_is_retried_until_the_wait_runs_out() -> None:
    time = FakeTime()
    reports: list[str] = []

    with pytest.raises(Unavailable) as gave_up:
        wait_until_answering(
            connect(closed_server_url()), 10.0, reports.append, sleep=time.sleep, clock=time.clock
        )

    assert len(reports) == len(time.slept) >= 3
    assert sum(time.slept) <= 10.0
    assert "did not answer within 10 s (database.start-wait)" in gave_up.value.message
    assert "Connection refused" in gave_up.value.message


def test_the_servers_password_is_in_no_report_and_not_in_the_error() -> None:
    time = FakeTime()
    reports: list[str] = []

    with pytest.raises(Unavailable) as gave_up:
        wait_until_answering(
            connect(closed_server_url()), 5.0, reports.append, sleep=time.sleep, clock=time.clock
        )

    assert all("hunter2" not in text for text in [*reports, gave_up.value.message])
    assert "127.0.0.1:" in gave_up.value.message


def test_a_wait_of_zero_gives_up_at_the_first_refusal() -> None:
    time = FakeTime()

    with pytest.raises(Unavailable):
        wait_until_answering(
            connect(closed_server_url()), 0.0, [].append, sleep=time.sleep, clock=time.clock
        )

    assert time.slept == []


def test_a_store_that_answers_is_not_waited_for(tmp_path) -> None:
    time = FakeTime()

    wait_until_answering(
        connect(f"sqlite:///{tmp_path / 'store.db'}"),
        5.0,
        [].append,
        sleep=time.sleep,
        clock=time.clock,
    )

    assert time.slept == []


def test_a_negative_start_wait_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"database\.start-wait"):
        parse_config({"database": {"start-wait": -1}})


def test_start_wait_reads_a_duration() -> None:
    assert parse_config({"database": {"start-wait": "2m"}}).database.start_wait == 120.0
