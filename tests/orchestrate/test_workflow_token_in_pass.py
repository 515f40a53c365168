"""A workflow's token is minted by the engine's pass that assigns its first job (in that
pass's transaction), and a run needing nothing but the token gets it with its assignment and
is answered from memory: no session, no statement; a run that ended, or a token whose pass
failed, is never handed out."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from support.engine_workflows import HELLO

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.errors import NotFound
from fuzzball_core.orchestrate.messages import Assign
from fuzzball_core.orchestrate.run_secrets import CallingNode, RunSecretsService
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.service.secrets import Secrets
from fuzzball_core.store.models import ApiToken
from fuzzball_core.store.secret_box import SecretBox
from fuzzball_core.vocabulary import CredentialKind

#: two jobs that run side by side: both are placed in the same pass
TWO_JOBS = """
version: v1
jobs:
  one:
    image: {uri: docker://alpine:latest}
    command: [/bin/true]
  two:
    image: {uri: docker://alpine:latest}
    command: [/bin/true]
"""

#: a job whose environment references a secret: it asks RunSecrets as it starts
HELLO_WITH_SECRET = """
version: v1
jobs:
  hello:
    image: {uri: docker://alpine:latest}
    command: [/bin/true]
    env: [DB=secret://user/db]
"""


@pytest.fixture
def run_secrets(harness, tmp_path) -> RunSecretsService:
    secrets = Secrets(harness.engine.sessions, SecretBox(tmp_path))
    return RunSecretsService.attach(harness.engine, harness.service.accounts, secrets)


def _asked(run_secrets: RunSecretsService, assignment: node_pb2.Assignment):
    """What the node the run was assigned to is told as it starts it."""
    return run_secrets.for_run(assignment.run_id, CallingNode(assignment.node_ids[0]))


def _tokens_of(harness, workflow_id: str) -> list[ApiToken]:
    with harness.engine.sessions() as session:
        return list(session.scalars(select(ApiToken).where(ApiToken.workflow_id == workflow_id)))


def test_the_pass_assigning_a_workflows_first_job_mints_its_token(harness, run_secrets):
    harness.node()
    workflow_id = harness.submit(HELLO)
    assert len(harness.assignments()) == 1

    (token,) = _tokens_of(harness, workflow_id)

    assert (token.credential, token.revoked_at) == (CredentialKind.WORKFLOW, None)


def test_a_job_needing_only_its_token_is_answered_without_a_statement(
    harness, run_secrets, statements
):
    harness.node()
    workflow_id = harness.submit(HELLO)
    (assignment,) = harness.assignments()
    statements.clear()

    reply = _asked(run_secrets, assignment)

    assert statements == []
    who = harness.service.accounts.authenticate(reply.workflow_token)
    assert (who.account_id, who.credential, who.workflow_id) == (
        harness.user.account_id,
        CredentialKind.WORKFLOW,
        workflow_id,
    )


def test_runs_of_a_workflow_assigned_in_one_pass_share_one_token(harness, run_secrets):
    harness.node()
    workflow_id = harness.submit(TWO_JOBS)
    first, second = harness.assignments()

    answers = {_asked(run_secrets, a).workflow_token for a in (first, second)}

    assert len(_tokens_of(harness, workflow_id)) == 1
    assert len(answers) == 1


def test_a_run_that_ended_is_told_nothing_while_its_workflow_runs(harness, run_secrets):
    node = harness.node()
    workflow_id = harness.submit(TWO_JOBS)
    ended, running = harness.assignments()
    harness.run_to_end(node, ended)
    assert harness.status(workflow_id) == "STARTED"

    with pytest.raises(NotFound):
        _asked(run_secrets, ended)
    assert _asked(run_secrets, running).workflow_token


def test_a_token_minted_by_a_pass_that_failed_is_never_handed_out(
    harness, run_secrets, monkeypatch
):
    harness.submit(HELLO)  # no node yet: the run waits for the next pass
    harness.node()
    commit = Transaction.commit
    failures = iter([RuntimeError("the store went away")])
    ours = harness.engine.sessions.kw["bind"]

    def failing_once(tx: Transaction) -> None:
        # only this harness's pass fails: the patch is the class's, and an engine loop an
        # earlier test left running in this process would take the failure otherwise
        failure = next(failures, None) if tx.session.get_bind() is ours else None
        if failure is not None:
            raise failure
        commit(tx)

    monkeypatch.setattr(Transaction, "commit", failing_once)
    with pytest.raises(RuntimeError):
        harness.engine.step()  # placed and minted, then rolled back
    harness.engine.step()
    (assignment,) = harness.assignments()

    token = _asked(run_secrets, assignment).workflow_token

    assert harness.service.accounts.authenticate(token).credential == CredentialKind.WORKFLOW


def test_the_assignment_of_a_job_needing_only_its_token_carries_it(harness, run_secrets):
    harness.node()
    workflow_id = harness.submit(HELLO)
    (assignment,) = harness.assignments()

    who = harness.service.accounts.authenticate(assignment.workflow_token)

    assert (who.credential, who.workflow_id) == (CredentialKind.WORKFLOW, workflow_id)
    assert assignment.workflow_token == _asked(run_secrets, assignment).workflow_token


def test_the_assignment_of_a_job_referencing_a_secret_carries_no_token(harness, run_secrets):
    harness.node()
    harness.submit(HELLO_WITH_SECRET)
    (assignment,) = harness.assignments()

    assert assignment.workflow_token == ""


def test_an_assignments_repr_leaves_its_token_out() -> None:
    assign = Assign(1, "wf", "jobs.hello", None, "{}", 0.0, ("node",), "", workflow_token="tok")

    assert "tok" not in repr(assign)
