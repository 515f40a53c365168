"""The engine's queue of runs waiting for placement, which remembers what changed in it.

A scheduler that keeps its own copy of the queue (see
:meth:`fuzzball_core.scheduling.Scheduler.schedule_changes`) is told, at each pass, which
entries were set and which removed since the last one, instead of being handed the whole
queue: with thousands of runs waiting and a few hundred placed per pass, re-reading and
re-sorting the whole queue was a fixed cost of every pass.
"""

from __future__ import annotations

from typing import Any, TypeVar

V = TypeVar("V")


class PendingQueue(dict[str, V]):
    """A dict (scheduler key -> waiting run) that remembers which keys were set and which
    removed since :meth:`take_changes`.

    Item assignment, ``del``, ``pop`` and ``clear`` are recorded key by key (``clear`` as a
    reset: the next taker must read the whole queue); any other way of changing it (``update``,
    ``setdefault``, ``popitem``, ``|=``) also counts as a reset rather than going unrecorded.
    """

    __slots__ = ("_removed", "_reset", "_set", "generation")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._set: set[str] = set()
        self._removed: set[str] = set()
        #: True until the first take_changes, and after a change not recorded key by key
        self._reset = True
        #: how many times the changes were taken (the pass count a scheduler checks)
        self.generation = 0

    def __setitem__(self, key: str, value: V) -> None:
        super().__setitem__(key, value)
        self._set.add(key)
        self._removed.discard(key)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._gone(key)

    def pop(self, key: str, *default: Any) -> Any:
        """``dict.pop``, recording the removal."""
        if key in self:
            self._gone(key)
        return super().pop(key, *default)

    def clear(self) -> None:
        """``dict.clear``: the next taker reads the whole queue."""
        super().clear()
        self._mark_reset()

    def update(self, *args: Any, **kwargs: Any) -> None:
        """``dict.update``, recorded as a reset."""
        super().update(*args, **kwargs)
        self._mark_reset()

    def setdefault(self, key: str, default: Any = None) -> Any:
        """``dict.setdefault``, recorded as a reset."""
        self._mark_reset()
        return super().setdefault(key, default)

    def popitem(self) -> tuple[str, V]:
        """``dict.popitem``, recorded as a reset."""
        self._mark_reset()
        return super().popitem()

    def __ior__(self, other: Any) -> PendingQueue[V]:  # type: ignore[override,misc]
        self._mark_reset()
        super().__ior__(other)
        return self

    def take_changes(self) -> tuple[int, bool, set[str], set[str]]:
        """(generation, reset, keys set, keys removed) since the last call; starts over.

        A key set and then removed counts as removed only, and one removed and then set
        again as set only.
        """
        self.generation += 1
        changes = (self.generation, self._reset, self._set, self._removed)
        self._set, self._removed, self._reset = set(), set(), False
        return changes

    def _gone(self, key: str) -> None:
        self._removed.add(key)
        self._set.discard(key)

    def _mark_reset(self) -> None:
        self._reset = True
        self._set.clear()
        self._removed.clear()
