"""The parses of workflow files submitted again with the same text, kept and reused.

A burst of submissions of one file (2,000 separate single-job workflows, a parameter sweep
submitted by a script) parsed, planned and rendered as v4 YAML the same text once each:
about 0.45 ms of Orchestrate's CPU a submission, a fifth of its share. A parse depends on
the text alone (the source's name only words the errors, and a refused file is not kept),
so the last :data:`KEPT` files that parsed are kept with their plans and v4 YAML
(:class:`~fuzzball_core.spec.parsing.ParsedWorkflow` works those out once), and the plugin
validators, which may judge by more than the text, still run on each submission.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from fuzzball_core.spec.parsing import (
    ExtraValidator,
    ParsedWorkflow,
    check_extra,
    parse_unchecked,
)

#: How many files' parses are kept (the most recently submitted).
KEPT = 64
#: Longer files are parsed each time: a few large files would hold the memory of many.
MAX_KEPT_CHARACTERS = 64 * 1024


class ParsedFiles:
    """The parses of recently submitted files, by their text; safe across threads."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._lock = threading.Lock()
        self._parses: OrderedDict[str, ParsedWorkflow] = OrderedDict()

    def parse(
        self,
        text: str,
        *,
        source: str = "<workflow>",
        extra_validators: Sequence[ExtraValidator] = (),
    ) -> ParsedWorkflow:
        """:func:`~fuzzball_core.spec.parse_workflow` of ``text``: the kept parse of the
        same text if there is one (the plugin validators run on it again), else a new
        one, kept. Callers share the returned object and must not change it."""
        with self._lock:
            parsed = self._parses.get(text)
            if parsed is not None:
                self._parses.move_to_end(text)
        if parsed is None:
            parsed = parse_unchecked(text, source=source)  # raises: nothing kept
            if len(text) <= MAX_KEPT_CHARACTERS:
                with self._lock:
                    self._parses[text] = parsed
                    while len(self._parses) > self._kept:
                        self._parses.popitem(last=False)
        check_extra(parsed, extra_validators, source=source)
        return parsed
