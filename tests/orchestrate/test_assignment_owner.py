"""An assignment names its workflow's owner (``Assignment.owner``: the account and the user
who submitted it), which the agent keys its kept cgroups by."""

from __future__ import annotations

import dataclasses

from support.engine_workflows import HELLO

from fuzzball_core.orchestrate.messages import Assign, workflow_owner
from fuzzball_core.orchestrate.node_hub import control_message


def test_an_assignment_names_its_workflows_account_and_submitting_user(harness) -> None:
    harness.user = dataclasses.replace(harness.user, user_id="5e1f0c2a-user")
    harness.node()
    harness.submit(HELLO)

    (assignment,) = harness.assignments()

    assert assignment.owner == f"{harness.user.account_id}/5e1f0c2a-user"


def test_an_assignment_of_an_accounts_own_token_names_the_account_and_no_user(
    harness,
) -> None:
    assert harness.user.user_id is None
    harness.node()
    harness.submit(HELLO)

    (assignment,) = harness.assignments()

    assert assignment.owner == f"{harness.user.account_id}/"


def test_two_users_of_one_account_are_two_owners() -> None:
    assert workflow_owner("account", "alice") != workflow_owner("account", "bob")


def test_an_accounts_own_token_is_not_the_owner_of_its_users_workflows() -> None:
    assert workflow_owner("account", None) != workflow_owner("account", "alice")


def test_the_owner_goes_down_the_nodes_stream_with_the_assignment() -> None:
    assign = Assign(1, "wf", "jobs.hello", None, "{}", 0.0, ("node",), "", owner="acct/user")

    assert control_message(assign).assign.owner == "acct/user"
