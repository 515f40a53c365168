"""Federate's capacity refresher ends with the service: no turn outlives ``close``."""

from __future__ import annotations

import logging
import threading

from support.federated_workflows import CPU
from support.federation_harness import start_federation


def _refreshers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "federate-capacity" and t.is_alive()]


def test_closing_the_service_stops_the_capacity_refresher_without_a_logged_error(
    tmp_path, members, caplog
):
    federation = start_federation(tmp_path, members)
    federation.client().start_workflow(CPU, name="cpu")  # a decision starts the refresher
    federation.service.capacity.refresh_soon()
    assert federation.service.capacity._thread in _refreshers()
    with caplog.at_level(logging.WARNING, logger="fuzzball.federate"):
        federation.close()
    assert federation.service.capacity._thread is None
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
