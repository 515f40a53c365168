"""At most one warning per source and window: repeats are counted, then summed in one line.

Some warnings are triggered by what a peer sends, such as a node's report that Orchestrate
drops (:mod:`~fuzzball_core.orchestrate.node_reports`): a broken or hostile node repeating
it would otherwise write one line per report and fill Orchestrate's log. A
:class:`WarningLimiter` lets a key's first warning through, holds back the ones that follow
within its window (counting them), and lets the first one after the window through with the
count, so the log keeps one line per key and window while nothing goes unmentioned. What
must count every occurrence (a metric) counts apart from it.

It remembers at most ``capacity`` keys: when a new key would exceed that, the key whose
warning went through longest ago is forgotten (with its count held back, which its metric
still holds), so keys of nodes gone for good do not pile up.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Admitted:
    """A warning let through: how many of its key's were held back since ``since``, when
    its key's previous warning went through (0 and now for a key's first)."""

    held_back: int
    since: float


@dataclass
class _Window:
    #: when the key's latest warning went through
    opened: float
    #: the key's warnings held back since then
    held_back: int = 0


class WarningLimiter(Generic[K]):
    """Lets at most one warning per key through in each ``window`` seconds."""

    def __init__(self, window: float, capacity: int) -> None:
        if window <= 0 or capacity < 1:
            raise ValueError("a warning limiter needs a positive window and capacity")
        self.window = window
        self.capacity = capacity
        #: by key, the key whose warning went through longest ago first
        self._windows: dict[K, _Window] = {}

    def admit(self, key: K, now: float) -> Admitted | None:
        """Whether ``key``'s warning at ``now`` is logged: what to say with it, or None when
        it is held back (counted, for the key's next warning let through). A clock set back
        before the key's window opened opens a new one, rather than silencing it for as long."""
        window = self._windows.get(key)
        if window is not None and window.opened <= now < window.opened + self.window:
            window.held_back += 1
            return None
        if window is None:
            self._make_room()
            admitted = Admitted(held_back=0, since=now)
        else:
            del self._windows[key]  # inserted again below: the latest let through goes last
            admitted = Admitted(held_back=window.held_back, since=window.opened)
        self._windows[key] = _Window(opened=now)
        return admitted

    def __len__(self) -> int:
        """How many keys it remembers."""
        return len(self._windows)

    def _make_room(self) -> None:
        while len(self._windows) >= self.capacity:
            del self._windows[next(iter(self._windows))]
