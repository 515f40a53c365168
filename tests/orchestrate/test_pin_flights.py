"""Pins of one image asked for at once share one registry round trip, begun after each of
them was asked for (fuzzball_core.orchestrate.pin_flights)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping

import pytest

from fuzzball_core.drivers import ResolvedImage
from fuzzball_core.errors import NotFound
from fuzzball_core.orchestrate.image_stages import ImageStages
from fuzzball_core.orchestrate.pin_flights import PinFlights


class Registry:
    """Answers each round trip with its number; the first one waits until released."""

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail
        self.first_began = threading.Event()
        self.release_first = threading.Event()

    def ask(self) -> str:
        self.calls += 1
        number = self.calls
        if number == 1:
            self.first_began.set()
            assert self.release_first.wait(10)
        if self.fail and number > 1:
            raise NotFound("image alpine:latest not found in registry docker.io")
        return f"answer {number}"


def asked(flights: PinFlights[str], key: str, registry: Registry) -> Callable[[], object]:
    """Ask in a thread of its own; what it got (an answer or the exception), once it ended."""
    got: list[object] = []
    arrived = threading.Event()

    def run() -> None:
        arrived.set()
        try:
            got.append(flights.answer(key, registry.ask))
        except Exception as exc:
            got.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert arrived.wait(10)
    time.sleep(0.1)  # into answer(): waiting on the round trip under way, or joining one

    def result() -> object:
        thread.join(10)
        return got[0]

    return result


def test_pins_asked_for_during_a_round_trip_share_the_next_one_and_get_its_answer() -> None:
    flights: PinFlights[str] = PinFlights()
    registry = Registry()
    first = asked(flights, "docker://alpine:latest", registry)
    assert registry.first_began.wait(10)
    second = asked(flights, "docker://alpine:latest", registry)
    third = asked(flights, "docker://alpine:latest", registry)
    registry.release_first.set()
    # the two asked while the first was under way: its answer may predate them, so they
    # share the round trip after it
    assert (first(), second(), third()) == ("answer 1", "answer 2", "answer 2")
    assert registry.calls == 2


def test_pins_of_other_keys_do_not_wait_for_each_other() -> None:
    flights: PinFlights[str] = PinFlights()
    registry = Registry()
    first = asked(flights, "docker://alpine:latest", registry)
    assert registry.first_began.wait(10)
    assert flights.answer("docker://busybox:latest", registry.ask) == "answer 2"
    registry.release_first.set()
    assert first() == "answer 1"


def test_a_failed_round_trip_fails_every_pin_that_shared_it() -> None:
    flights: PinFlights[str] = PinFlights()
    registry = Registry(fail=True)
    first = asked(flights, "docker://alpine:latest", registry)
    assert registry.first_began.wait(10)
    second = asked(flights, "docker://alpine:latest", registry)
    third = asked(flights, "docker://alpine:latest", registry)
    registry.release_first.set()
    assert first() == "answer 1"
    assert isinstance(second(), NotFound) and isinstance(third(), NotFound)
    assert registry.calls == 2
    # and the next pin asks again
    with pytest.raises(NotFound):
        flights.answer("docker://alpine:latest", registry.ask)
    assert registry.calls == 3


def test_many_pins_at_once_are_each_answered_by_a_round_trip_begun_after_they_asked() -> None:
    flights: PinFlights[int] = PinFlights()
    lock = threading.Lock()
    began: list[float] = []

    def ask() -> int:
        with lock:
            began.append(time.monotonic())
            number = len(began) - 1
        time.sleep(0.001)
        return number

    problems: list[str] = []

    def pin_repeatedly() -> None:
        for _ in range(50):
            asked_at = time.monotonic()
            try:
                number = flights.answer("docker://alpine:latest", ask)
            except Exception as exc:
                problems.append(repr(exc))
                continue
            if began[number] < asked_at:
                problems.append(f"answered by round trip {number}, begun before it asked")

    threads = [threading.Thread(target=pin_repeatedly) for _ in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switched often: between any two steps of one
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        sys.setswitchinterval(interval)
    assert problems == []
    assert len(began) < 8 * 50  # shared: fewer round trips than pins


class CredentialedBackend:
    """Answers with a digest naming the credentials it was asked with; its first round trip
    waits until released."""

    def __init__(self) -> None:
        self.asked_by: list[str] = []
        self.first_began = threading.Event()
        self.release_first = threading.Event()

    def resolve(self, uri: str, *, credentials: Mapping[str, str] | None = None) -> ResolvedImage:
        user = (credentials or {})["username"]
        self.asked_by.append(user)
        if len(self.asked_by) == 1:
            self.first_began.set()
            assert self.release_first.wait(10)
        return ResolvedImage(uri, f"sha256:{user}", 1, "linux/amd64")


def test_pins_with_the_same_credentials_share_a_round_trip_and_others_have_their_own() -> None:
    backend = CredentialedBackend()
    stages = ImageStages(enabled=True, _backends={"docker": backend})  # type: ignore[dict-item]
    alice = {"username": "alice", "password": "a"}
    bob = {"username": "bob", "password": "b"}
    pinned: dict[str, list[ResolvedImage]] = {"alice": [], "bob": []}

    def pin(credentials: dict[str, str]) -> threading.Thread:
        def run() -> None:
            got = stages.resolve("docker://r.example/x:1", "acct", credentials=credentials)
            pinned[credentials["username"]].append(got)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    first = pin(alice)
    assert backend.first_began.wait(10)
    others = [pin(alice), pin(alice), pin(alice), pin(bob)]
    time.sleep(0.2)  # into answer(): alice's three wait for the next round trip together
    backend.release_first.set()
    for thread in [first, *others]:
        thread.join(10)

    assert sorted(backend.asked_by) == ["alice", "alice", "bob"]
    assert {pin.digest for pin in pinned["alice"]} == {"sha256:alice"}
    assert len(pinned["alice"]) == 4
    assert [pin.digest for pin in pinned["bob"]] == ["sha256:bob"]


# -- cache-ttl: an earlier answer reused ---------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def counted() -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def ask() -> str:
        calls.append(1)
        return f"answer {len(calls)}"

    return calls, ask


def test_a_pin_allowing_an_older_answer_reuses_one_begun_within_that_many_seconds() -> None:
    clock = Clock()
    flights: PinFlights[str] = PinFlights(clock)
    calls, ask = counted()
    assert flights.answer("docker://alpine:latest", ask) == "answer 1"
    clock.now += 30
    assert flights.answer("docker://alpine:latest", ask, reuse_within=30) == "answer 1"
    assert len(calls) == 1


def test_a_pin_allowing_an_older_answer_asks_again_once_the_last_is_older() -> None:
    clock = Clock()
    flights: PinFlights[str] = PinFlights(clock)
    calls, ask = counted()
    flights.answer("docker://alpine:latest", ask)
    clock.now += 31
    assert flights.answer("docker://alpine:latest", ask, reuse_within=30) == "answer 2"
    assert len(calls) == 2


def test_a_pin_without_a_ttl_asks_again_however_recent_the_last_answer() -> None:
    clock = Clock()
    flights: PinFlights[str] = PinFlights(clock)
    calls, ask = counted()
    flights.answer("docker://alpine:latest", ask)
    assert flights.answer("docker://alpine:latest", ask) == "answer 2"
    assert len(calls) == 2


def test_a_pins_reused_answer_is_only_its_own_keys() -> None:
    flights: PinFlights[str] = PinFlights(Clock())
    _, ask = counted()
    flights.answer("docker://alpine:latest", ask)
    assert flights.answer("docker://busybox:latest", ask, reuse_within=3600) == "answer 2"
