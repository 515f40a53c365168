"""Scheduling data types and the Scheduler driver interface.

(First cut by the foundation; the default scheduler's issue completes the types.)
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping
from typing import Any


class Scheduler(ABC):
    """Places ready jobs on nodes. Implementations are ``fuzzball.schedulers`` drivers."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.config: Mapping[str, Any] = config or {}
