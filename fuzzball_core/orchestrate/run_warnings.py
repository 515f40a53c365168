"""A node's warnings about how it set up a run (a run's ``progress`` stream, from
``substrate.drivers.steps.report_warnings``) as ``stage_warning`` events of the stage.

A warning is something the job should know that did not stop it, such as a GPU job on a node
whose NVIDIA driver libraries were not found: it got its GPUs' device nodes, not the
driver's ``libcuda`` or ``nvidia-smi``.
"""

from __future__ import annotations

import json
from typing import Any

from fuzzball_core.vocabulary import EventKind

#: the longest warning kept (a node's text, stored in the event log)
MAX_WARNING = 2000


def warning_event(stage_name: str, data: bytes) -> tuple[EventKind, str, dict[str, Any]] | None:
    """The kind, message and data of the event a node's warning becomes; None when ``data``
    is not one (an image step's or a transfer's report, or unreadable)."""
    try:
        report = json.loads(data)
        warning = report["warning"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(warning, str) or not warning:
        return None
    warning = warning[:MAX_WARNING]
    return EventKind.STAGE_WARNING, f"{stage_name}: {warning}", {"warning": warning}
