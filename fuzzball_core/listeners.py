"""Listeners of one kind of change, subscribed and unsubscribed from any thread.

Whatever announces the change takes :meth:`Listeners.current` (under its own lock where the
change and the listeners it is told to must be taken together) and calls each one outside any
lock, so a listener may subscribe, unsubscribe or ask the announcer again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

Change = TypeVar("Change")


class Listeners(Generic[Change]):
    """The callables told of each ``Change``, in the order they subscribed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[Change], None]] = []

    def subscribe(self, listener: Callable[[Change], None]) -> Callable[[], None]:
        """Tell ``listener`` of every change from now on; returns what unsubscribes it
        (calling that twice is harmless)."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def current(self) -> list[Callable[[Change], None]]:
        """The listeners subscribed now (a copy: to be called outside any lock)."""
        with self._lock:
            return list(self._listeners)
