"""What the agent reads or builds once and reuses across the runs of a stage (an array's
tasks): the validated step, the image's config, the one epoll set that watches every
container's descriptors, and the pool task that frees ended containers. Reuse must never
change what a run sees."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.drivers import image_config_path
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.drivers import RunRequest
from fuzzball_core.substrate.drivers import base as driver_base
from fuzzball_core.substrate.drivers.containers import _WATCHERS, fd_watcher, release_queue
from fuzzball_core.substrate.images import NodeImages

JOB = {"image": {"uri": "docker://alpine:latest"}, "command": ["/bin/true"]}


def _task(task_id: int, definition: dict[str, object], stage: str = "jobs.t") -> RunRequest:
    return RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=task_id,
            workflow_id="wf",
            stage_name=stage,
            job_json=json.dumps(definition),
            task_id=task_id,
            has_task=True,
        )
    )


def test_the_tasks_of_one_stage_share_its_validated_step_but_not_its_definition() -> None:
    first, second = _task(1, JOB), _task(2, JOB)

    assert first.job is second.job
    assert first.definition == second.definition
    assert first.definition is not second.definition  # plugins are handed their own copy
    assert (first.task_id, second.task_id) == (1, 2)


def test_a_different_payload_or_step_kind_is_validated_on_its_own() -> None:
    job = _task(1, JOB)
    other = _task(2, {**JOB, "command": ["/bin/false"]})
    service = _task(3, JOB, stage="services.t")

    assert other.job is not job.job
    assert other.job is not None and other.job.command == ["/bin/false"]
    assert type(service.job).__name__ == "Service" and service.job is not job.job


def test_the_remembered_steps_are_bounded() -> None:
    for index in range(driver_base.STEP_CACHE_SIZE + 10):
        _task(index, {**JOB, "command": ["/bin/echo", str(index)]})

    assert len(driver_base._STEPS) <= driver_base.STEP_CACHE_SIZE


def test_an_invalid_payload_is_refused_every_time() -> None:
    for _ in range(2):
        with pytest.raises(ValueError):
            _task(1, {"image": {"uri": "docker://alpine:latest"}, "command": "not a list"})


def _write_config(image: Path, env: list[str]) -> None:
    image_config_path(image).write_text(json.dumps({"config": {"Env": env}}))


def test_an_images_config_is_read_once_and_again_when_its_file_changes(tmp_path: Path) -> None:
    images = NodeImages(get_registry(), {}, tmp_path)
    image = tmp_path / "sha256-abc.erofs"
    _write_config(image, ["A=1"])

    first = images.config(image)
    assert first is not None and first.env == ("A=1",)
    assert images.config(image) is first

    path = image_config_path(image)
    replacement = path.with_suffix(".new")
    replacement.write_text(json.dumps({"config": {"Env": ["A=2", "B=3"]}}))
    os.replace(replacement, path)  # as a conversion writes it: a new file in its place

    again = images.config(image)
    assert again is not None and again.env == ("A=2", "B=3")


def test_an_image_without_a_config_has_none_until_one_is_written(tmp_path: Path) -> None:
    images = NodeImages(get_registry(), {}, tmp_path)
    image = tmp_path / "sha256-def.erofs"

    assert images.config(image) is None
    _write_config(image, ["C=4"])
    config = images.config(image)
    assert config is not None and config.env == ("C=4",)


def test_one_watcher_serves_many_descriptors_and_closes_with_the_last() -> None:
    asyncio.run(_many_descriptors())


async def _many_descriptors() -> None:
    loop = asyncio.get_running_loop()
    pipes = [os.pipe() for _ in range(3)]
    seen: list[tuple[int, bytes]] = []
    done = asyncio.Event()
    watcher = fd_watcher(loop)

    def reader(index: int, fd: int) -> None:
        seen.append((index, os.read(fd, 100)))
        fd_watcher(loop).forget(fd)
        if len(seen) == len(pipes):
            done.set()

    try:
        for index, (read_end, _) in enumerate(pipes):
            watcher.watch(read_end, lambda i=index, fd=read_end: reader(i, fd))
        assert fd_watcher(loop) is watcher
        for index, (_, write_end) in enumerate(pipes):
            os.write(write_end, f"out {index}".encode())
        await asyncio.wait_for(done.wait(), 5)
    finally:
        for read_end, write_end in pipes:
            os.close(read_end)
            os.close(write_end)

    assert sorted(seen) == [(i, f"out {i}".encode()) for i in range(3)]
    assert loop not in _WATCHERS  # the last forget closed it and took it off the loop
    assert fd_watcher(loop) is not watcher
    fd_watcher(loop).forget(-1)  # an empty watcher closes on the first forget


def test_a_failing_callback_is_reported_and_the_others_still_run() -> None:
    asyncio.run(_failing_callback())


async def _failing_callback() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    (bad_read, bad_write), (good_read, good_write) = os.pipe(), os.pipe()
    good = asyncio.Event()
    watcher = fd_watcher(loop)

    def failing() -> None:
        watcher.forget(bad_read)
        raise RuntimeError("broken reader")

    def working() -> None:
        os.read(good_read, 10)
        watcher.forget(good_read)
        good.set()

    try:
        watcher.watch(bad_read, failing)
        watcher.watch(good_read, working)
        os.write(bad_write, b"x")
        os.write(good_write, b"y")
        await asyncio.wait_for(good.wait(), 5)
    finally:
        loop.set_exception_handler(None)
        for fd in (bad_read, bad_write, good_read, good_write):
            os.close(fd)

    assert [str(context["exception"]) for context in reported] == ["broken reader"]


class _Ended:
    """An ended container whose release is recorded (and may wait for a gate)."""

    def __init__(self, name: str, released: list[str], gate: threading.Event | None = None):
        self.name, self._released, self._gate = name, released, gate

    def release(self) -> None:
        if self._gate is not None:
            self._gate.wait(5)
        self._released.append(self.name)


def test_containers_ended_while_a_release_runs_are_freed_by_the_same_pool_task() -> None:
    released: list[str] = []
    gate = threading.Event()
    with ThreadPoolExecutor(4) as pool:
        submitted = 0
        real_submit = pool.submit

        def counting_submit(*args, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal submitted
            submitted += 1
            return real_submit(*args, **kwargs)

        pool.submit = counting_submit  # type: ignore[method-assign]
        queue = release_queue(pool)
        queue.add(_Ended("first", released, gate))
        queue.add(_Ended("second", released))
        queue.add(_Ended("third", released))
        gate.set()
    assert released == ["first", "second", "third"]
    assert submitted == 1


def test_a_release_after_the_queue_ran_dry_starts_another_pool_task() -> None:
    released: list[str] = []
    with ThreadPoolExecutor(1) as pool:
        queue = release_queue(pool)
        queue.add(_Ended("first", released))
        pool.submit(lambda: None).result()  # the first drain has ended
        queue.add(_Ended("second", released))
    assert released == ["first", "second"]
