"""The REST lists' worker process (ListWorker): it answers the workflow and node lists as the
engine's process would, with the engine's memory of nodes sent over, for the caller the
gateway authenticated (permissions and accounts' isolation as in-process); the gateway
serves a list itself while the worker is not there."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.engine_workflows import HELLO

from fuzzball_core.api.node_listing import NodeListBody
from fuzzball_core.api.rest import workflow_list_text
from fuzzball_core.orchestrate.list_worker import (
    NODES,
    RESTART_FIRST,
    RESTART_MOST,
    RESTART_RESET,
    WORKFLOWS,
    ListWorker,
    restart_delay,
)
from fuzzball_core.service.views import Principal
from fuzzball_core.vocabulary import AccountKind

#: long enough for a loaded machine to start a Python process; the tests wait on events
PATIENCE = 120.0


def worker_of(harness, database_url: str, restart_first: float = RESTART_FIRST) -> ListWorker:
    """A list worker for ``harness``'s engine, started (not yet waited for)."""
    lists = ListWorker(
        harness.service.node_usages,
        database_url,
        harness.service.cluster_name,
        restart_first=restart_first,
    )
    lists.start()
    return lists


@pytest.fixture
def worker(harness, database_url) -> Iterator[ListWorker]:
    lists = worker_of(harness, database_url)
    try:
        assert lists.wait_ready(PATIENCE)
        yield lists
    finally:
        lists.stop()


def asked(worker: ListWorker, route: str, who: Principal) -> tuple[int, str]:
    answer = asyncio.run(worker.call(route, who))
    assert answer is not None
    status, body = answer
    return status, body.decode()


def test_the_node_list_is_the_engines_process_own(harness, worker):
    harness.node("busy", cores=4)
    harness.submit(HELLO)
    harness.node("idle", cores=4)
    here = NodeListBody().body(harness.service.list_nodes(harness.admin))
    assert asked(worker, NODES, harness.admin) == (200, here)


def test_a_busy_nodes_usage_is_sent_over_from_the_engine(harness, worker):
    harness.node("busy", cores=4)
    harness.submit(HELLO)
    _, text = asked(worker, NODES, harness.admin)
    (busy,) = json.loads(text)["nodes"]
    assert busy["runningJobs"] == 1


def test_the_workflow_list_shows_only_the_callers_own(harness, worker):
    harness.node("n1")
    own = harness.submit(HELLO)
    harness.service.start_workflow(harness.admin, raw_specification=HELLO, name="theirs")
    status, text = asked(worker, WORKFLOWS, harness.user)
    assert (status, [w["id"] for w in json.loads(text)["workflows"]]) == (200, [own])
    assert text == workflow_list_text(harness.service.list_workflows(harness.user))


def test_an_api_tokens_list_shows_its_own_accounts_workflows(harness, worker):
    harness.node("n1")
    harness.submit(HELLO)
    who, token = harness.service.create_account("carol")
    own = harness.service.start_workflow(who, raw_specification=HELLO, name="carols")
    status, text = asked(worker, WORKFLOWS, token)
    assert (status, [w["id"] for w in json.loads(text)["workflows"]]) == (200, [own])


def test_a_revoked_token_is_refused_at_its_next_list(harness, worker):
    _, token = harness.service.create_account("carol")
    assert asked(worker, WORKFLOWS, token)[0] == 200
    harness.service.revoke_token(token)
    status, text = asked(worker, WORKFLOWS, token)
    assert (status, json.loads(text)["code"]) == (401, 16)


def test_an_unknown_token_is_refused_as_in_process(harness, worker):
    status, text = asked(worker, NODES, "no-such-token")
    assert (status, json.loads(text)["message"]) == (401, "the bearer token is not valid")


def test_a_caller_without_the_node_permission_is_refused_as_in_process(harness, worker):
    workflow_token = Principal(
        harness.user.account_id, "wf", kind=AccountKind.USER, credential="workflow"
    )
    status, text = asked(worker, NODES, workflow_token)
    assert (status, json.loads(text)["code"]) == (403, 7)


def test_a_worker_gone_leaves_the_list_to_the_gateway(harness, worker):
    worker.stop()
    assert asyncio.run(worker.call(NODES, harness.admin)) is None


def test_a_worker_that_died_is_started_again_and_serves_the_lists(harness, database_url):
    lists = worker_of(harness, database_url, restart_first=0.05)
    try:
        assert lists.wait_ready(PATIENCE)
        harness.node("n1", cores=4)
        first = lists._process
        assert first is not None
        os.kill(first.pid, signal.SIGKILL)
        deadline = time.monotonic() + PATIENCE
        while lists._process in (first, None) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lists.wait_ready(PATIENCE)
        here = NodeListBody().body(harness.service.list_nodes(harness.admin))
        assert asked(lists, NODES, harness.admin) == (200, here)
    finally:
        lists.stop()


def test_a_stopped_worker_is_not_started_again(harness, database_url):
    lists = worker_of(harness, database_url, restart_first=0.01)
    assert lists.wait_ready(PATIENCE)
    process = lists._process
    lists.stop()
    time.sleep(0.5)  # many times the first restart's pause, had one been due
    assert (process is not None and process.poll() is not None, lists._process) == (True, None)


def test_a_worker_ending_soon_after_each_start_waits_twice_as_long_each_time():
    delays = [restart_delay(None, 0.5)]
    for _ in range(10):
        delays.append(restart_delay(delays[-1], 0.5))
    assert delays[:4] == [1.0, 2.0, 4.0, 8.0]
    assert max(delays) == RESTART_MOST


def test_a_worker_that_ran_a_while_is_restarted_after_the_first_pause():
    assert restart_delay(RESTART_MOST, RESTART_RESET, first=0.5) == 0.5


def test_a_worker_that_cannot_start_leaves_the_lists_to_the_gateway(harness, monkeypatch):
    def refused(*_args, **_kwargs):
        raise PermissionError("no exec here")

    monkeypatch.setattr("fuzzball_core.orchestrate.list_worker.subprocess.Popen", refused)
    lists = ListWorker(harness.service.node_usages, "sqlite://", harness.service.cluster_name)
    lists.start()
    try:
        assert asyncio.run(lists.call(NODES, harness.admin)) is None
    finally:
        lists.stop()


def test_a_worker_whose_orchestrate_was_killed_ends_and_removes_its_socket(tmp_path):
    # a stand-in Orchestrate that starts a worker and is SIGKILLed, never stopping it
    script = (
        "import os, signal, sys\n"
        "from fuzzball_core.orchestrate.list_worker import ListWorker\n"
        f"lists = ListWorker(None, 'sqlite:///{tmp_path}/store.db', 'c')\n"
        "lists.start()\n"
        "assert lists.wait_ready(120)\n"
        "print(lists._directory, lists._process.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    directory, pid = ran.stdout.split()
    deadline = time.monotonic() + PATIENCE
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (Path(f"/proc/{pid}").exists(), Path(directory).exists()) == (False, False)
