"""The node keeps the EROFS mounts of the images it used most recently.

The runtime shares one mount per image among the containers using it and unmounts it when
the last one ends. A burst of short jobs (a task array of quick steps) then mounts and
unmounts the same image over and over: loop device, mount and unmount cost about 2 ms of
CPU per job and double a short container's start. The agent therefore holds its own
reference on the mounts of its most recently used images. The references are the
runtime's ordinary ones (under an id no container has), so a clean stop or the start-up
sweep of the next agent drops them like any other.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from fuzzball_runtime.state import StateDir

#: the reference id the agent holds mounts under
HOLD_ID = "agent-hold"
#: images whose mounts are kept; older ones are released (each holds a loop device)
DEFAULT_KEEP = 16


class ImageMountHolds:
    """The agent's references on its ``keep`` most recently used image mounts."""

    def __init__(self, state_dir: Path, *, keep: int = DEFAULT_KEEP) -> None:
        self._state = StateDir(state_dir)
        self._keep = keep
        self._held: OrderedDict[Path, str] = OrderedDict()
        self._lock = threading.Lock()

    def hold(self, image: Path) -> None:
        """Keep ``image`` mounted (mounting it now if needed); thread-safe."""
        with self._lock:
            if image in self._held:
                self._held.move_to_end(image)
                return
            self._state.ensure()
            key, _ = self._state.acquire_image(image, HOLD_ID)
            self._held[image] = key
            while len(self._held) > self._keep:
                _, oldest = self._held.popitem(last=False)
                self._state.release_image(oldest, HOLD_ID)

    def release_all(self) -> None:
        """Drop every reference (mounts no container uses are unmounted)."""
        with self._lock:
            while self._held:
                _, key = self._held.popitem(last=False)
                self._state.release_image(key, HOLD_ID)

    def held(self) -> list[Path]:
        """The images held, least recently used first."""
        with self._lock:
            return list(self._held)
