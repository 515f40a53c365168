"""A node asks Orchestrate for a workflow's token once, however many of its runs start.

Runs that reference no secret get nothing from ``RunSecrets`` but their workflow's token, the
same for every run of the workflow; :class:`WorkflowTokens` shares one answer among them.
"""

from __future__ import annotations

import asyncio

import pytest

from fuzzball_core.errors import Unavailable
from fuzzball_core.substrate.run_secrets import RunSecrets, WorkflowTokens


class CountingFetch:
    """A stand-in for the RunSecrets call that counts the calls and answers in turn."""

    def __init__(self, *answers: RunSecrets | Exception) -> None:
        self.answers = list(answers)
        self.calls = 0

    async def __call__(self) -> RunSecrets:
        self.calls += 1
        await asyncio.sleep(0)  # the other runs start while the call is out
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_runs_of_one_workflow_starting_together_share_one_call() -> None:
    fetch = CountingFetch(RunSecrets(workflow_token="tok-a"))
    tokens = WorkflowTokens()

    async def start_many() -> list[RunSecrets]:
        return await asyncio.gather(*(tokens.get("wf-a", fetch) for _ in range(20)))

    answers = asyncio.run(start_many())
    assert fetch.calls == 1
    assert {a.workflow_token for a in answers} == {"tok-a"}


def test_a_later_run_of_the_same_workflow_asks_nobody() -> None:
    fetch = CountingFetch(RunSecrets(workflow_token="tok-a"))
    tokens = WorkflowTokens()

    async def two_runs() -> str:
        await tokens.get("wf-a", fetch)
        return (await tokens.get("wf-a", fetch)).workflow_token

    assert asyncio.run(two_runs()) == "tok-a"
    assert fetch.calls == 1


def test_each_workflow_gets_its_own_token() -> None:
    fetch = CountingFetch(RunSecrets(workflow_token="tok-a"), RunSecrets(workflow_token="tok-b"))
    tokens = WorkflowTokens()

    async def two_workflows() -> tuple[str, str]:
        a = await tokens.get("wf-a", fetch)
        b = await tokens.get("wf-b", fetch)
        return a.workflow_token, b.workflow_token

    assert asyncio.run(two_workflows()) == ("tok-a", "tok-b")


def test_a_failed_call_is_not_kept_for_the_next_run() -> None:
    fetch = CountingFetch(Unavailable("Orchestrate away"), RunSecrets(workflow_token="tok-a"))
    tokens = WorkflowTokens()

    async def fail_then_ask() -> str:
        with pytest.raises(Unavailable):
            await tokens.get("wf-a", fetch)
        return (await tokens.get("wf-a", fetch)).workflow_token

    assert asyncio.run(fail_then_ask()) == "tok-a"
    assert fetch.calls == 2


def test_an_answer_carrying_more_than_the_token_is_handed_to_no_other_run() -> None:
    fetch = CountingFetch(
        RunSecrets(env={"PASSWORD": "hunter2"}, workflow_token="tok-a"),
        RunSecrets(workflow_token="tok-a"),
    )
    tokens = WorkflowTokens()

    async def two_runs() -> tuple[RunSecrets, RunSecrets]:
        return await tokens.get("wf-a", fetch), await tokens.get("wf-a", fetch)

    first, second = asyncio.run(two_runs())
    assert first.env == {} and second.env == {}
    assert fetch.calls == 2


def test_a_workflow_with_no_run_left_on_the_node_is_forgotten() -> None:
    fetch = CountingFetch(RunSecrets(workflow_token="tok-1"), RunSecrets(workflow_token="tok-2"))
    tokens = WorkflowTokens()

    async def forget_between() -> str:
        await tokens.get("wf-a", fetch)
        tokens.keep_only(set())
        return (await tokens.get("wf-a", fetch)).workflow_token

    assert asyncio.run(forget_between()) == "tok-2"


def test_an_answer_without_a_token_is_not_kept_for_the_next_run() -> None:
    # an image stage's run of the workflow is answered without a token
    fetch = CountingFetch(RunSecrets(), RunSecrets(workflow_token="tok-a"))
    tokens = WorkflowTokens()

    async def two_runs() -> str:
        await tokens.get("wf-a", fetch)
        return (await tokens.get("wf-a", fetch)).workflow_token

    assert asyncio.run(two_runs()) == "tok-a"
