"""GPU ECC error counters as the NVIDIA driver reports them, for the node's metrics:
``fuzzball_node_gpu_ecc_errors_total{gpu, type}`` (``corrected``/``uncorrected``, volatile:
since the driver loaded), which FuzzballNodeGPUUncorrectableECC watches.

``nvidia-smi`` takes from tens of milliseconds to seconds to answer, and the metrics hook runs
on every scrape on the agent's event loop, so :class:`EccCounters` answers from its last
reading and reads again in a thread once that is older than ``max_age``. A GPU without ECC
(``[N/A]``, ``[Not Supported]``) reports no series.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Callable

QUERY = [
    "--query-gpu=index,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total",
    "--format=csv,noheader,nounits",
]
TYPES = ("corrected", "uncorrected")


def parse(text: str) -> dict[str, float]:
    """Samples from nvidia-smi's CSV answer (``0, 12, 0`` per GPU)."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 3 or not fields[0].isdigit():
            continue
        for kind, value in zip(TYPES, fields[1:], strict=True):
            if value.isdigit():
                key = f'fuzzball_node_gpu_ecc_errors_total{{gpu="{fields[0]}",type="{kind}"}}'
                samples[key] = float(value)
    return samples


def run_nvidia_smi(binary: str) -> str:
    """nvidia-smi's answer to the ECC query ("" when it fails)."""
    try:
        done = subprocess.run(
            [binary, *QUERY], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


class EccCounters:
    """The last ECC reading, read again in the background once it is ``max_age`` old."""

    def __init__(
        self,
        read: Callable[[], str] | None = None,
        max_age: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        binary = shutil.which("nvidia-smi")
        self._read = read or ((lambda: run_nvidia_smi(binary)) if binary else None)
        self.max_age = max_age
        self._clock = clock
        self._samples: dict[str, float] = {}
        self._read_at: float | None = None
        self._reading: threading.Thread | None = None
        self._lock = threading.Lock()

    def _refresh(self) -> None:
        assert self._read is not None
        samples = parse(self._read())
        with self._lock:
            self._samples = samples
            self._read_at = self._clock()
            self._reading = None

    def samples(self) -> dict[str, float]:
        """The last reading (empty before the first one lands); starts the next if due."""
        if self._read is None:
            return {}
        with self._lock:
            due = self._read_at is None or self._clock() - self._read_at >= self.max_age
            if due and self._reading is None:
                self._reading = threading.Thread(
                    target=self._refresh, name="nvidia-ecc", daemon=True
                )
                self._reading.start()
            return dict(self._samples)
