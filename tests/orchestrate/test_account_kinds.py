"""Who may place node holds, and as which source, comes from the kind an account was created
with, not from its name.

Before, any account named "monitoring" or "provisioner" placed holds as that source.
"""

from __future__ import annotations

import pytest

from fuzzball_core.errors import PermissionDenied
from fuzzball_core.vocabulary import AccountKind


@pytest.mark.parametrize(
    ("kind", "source"),
    [
        (AccountKind.MONITORING, "monitoring"),
        (AccountKind.PROVISIONER, "provisioner"),
        (AccountKind.ADMIN, "admin"),
    ],
)
def test_a_hold_is_placed_as_the_source_of_the_accounts_kind(harness, kind, source):
    harness.node("n1")
    placer, _ = harness.service.create_account("ops", kind=kind)
    assert harness.service.add_hold(placer, "n1", "cordon", "ECC").source == source


@pytest.mark.parametrize("name", ["monitoring", "provisioner"])
def test_a_user_named_like_a_service_account_may_not_place_holds(harness, name):
    harness.node("n1")
    impostor, _ = harness.service.create_account(name)
    with pytest.raises(PermissionDenied):
        harness.service.add_hold(impostor, "n1", "cordon", "ECC")


def test_a_monitoring_account_of_any_name_places_holds_as_monitoring(harness):
    harness.node("n1")
    watcher, _ = harness.service.create_account("prometheus-alerts", kind="monitoring")
    assert harness.service.add_hold(watcher, "n1", "evict", "GPU ECC").source == "monitoring"
