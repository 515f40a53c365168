"""Volume transfers' progress reports (a run's ``progress`` stream, from
``substrate.transfer_progress``) as ``volume_transfer`` events of the workflow.

A report names its transfer by field and its URL without credentials; the event says how far
it got (``volumes.data.ingress[0]: s3://inputs/in.bin 40% (400.0 MiB of 1.0 GiB)``) or, once
it ended, its size and time (``... fetched 1.0 GiB in 12.3s``).
"""

from __future__ import annotations

import json
from typing import Any

from fuzzball_core.vocabulary import EventKind


def transfer_event(stage_name: str, data: bytes) -> tuple[EventKind, str, dict[str, Any]] | None:
    """The kind, message and data of the event a transfer's progress report becomes; None
    when ``data`` is not one (an image step's report, or unreadable)."""
    try:
        report = json.loads(data)
        transfer, url, done = str(report["transfer"]), str(report["url"]), int(report["done"])
        total = None if report.get("total") is None else int(report["total"])
        seconds = None if report.get("seconds") is None else float(report["seconds"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    details: dict[str, Any] = {"transfer": transfer, "url": url, "done": done, "total": total}
    verb = "sent" if ".egress[" in transfer else "fetched"
    if seconds is not None:
        text = f"{transfer}: {verb} {url}, {size_text(done)} in {seconds:.1f}s"
        details["seconds"] = seconds
    elif total:
        text = f"{transfer}: {url} {100 * done // total}% ({size_text(done)} of {size_text(total)})"
    else:
        text = f"{transfer}: {url} {size_text(done)} so far"
    return EventKind.VOLUME_TRANSFER, f"{stage_name}: {text}", details


def size_text(count: int) -> str:
    """``count`` bytes for people: B, KiB, MiB or GiB with one decimal."""
    amount = float(count)
    for unit in ("B", "KiB", "MiB"):
        if amount < 1024:
            return f"{count} B" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GiB"
