"""Rules for free-text names and labels a client sends beside a workflow file.

A workflow's name (``StartWorkflowRequest.name``) and a node hold's reason are shown to other
people: in ``fuzzball workflow list`` of an administrator, in ``fuzzball node holds``. They
are bounded and printable, so that no NUL ends a C string early, no terminal escape sequence
rewrites someone's screen, and no bidirectional override hides what a name says.

What was stored before these rules, and every other text a server sends (messages, errors,
events), is shown through :func:`printable`, which escapes what a terminal would act on.

A step's name also becomes a host name (:func:`dns_label`): the job's own hostname, and the
name other containers of the workflow reach a service by.
"""

from __future__ import annotations

import re

from fuzzball_core.errors import InvalidArgument

#: Longest workflow name, in characters.
MAX_WORKFLOW_NAME = 256
#: Longest hold reason, in characters.
MAX_HOLD_REASON = 1024

_LABEL_UNSAFE = re.compile(r"[^a-z0-9-]+")


def dns_label(name: str) -> str:
    """``name`` as a DNS label: lower case, each run of other characters than letters,
    digits and ``-`` as one ``-``, no ``-`` at either end (empty when nothing is left)."""
    return _LABEL_UNSAFE.sub("-", name.lower()).strip("-")


def check_printable(field: str, value: str, *, limit: int) -> str:
    """``value`` if it is at most ``limit`` characters and printable (letters, marks,
    numbers, punctuation, symbols and the plain space: ``str.isprintable``, which excludes
    control, format and private-use characters, surrogates and other separators);
    ``InvalidArgument`` naming ``field`` otherwise. The message never repeats the value."""
    if len(value) > limit:
        raise InvalidArgument(
            f"{field}: {len(value)} characters; at most {limit} are accepted",
            details=[{"field": field, "description": f"at most {limit} characters"}],
        )
    if not value.isprintable():
        position = next(index for index, char in enumerate(value) if not char.isprintable())
        code = f"U+{ord(value[position]):04X}"
        raise InvalidArgument(
            f"{field}: character {position + 1} ({code}) is not printable; names and reasons "
            "may not hold control characters, escape sequences or line breaks",
            details=[{"field": field, "description": f"non-printable character {code}"}],
        )
    return value


def check_workflow_name(name: str) -> str:
    """A workflow ``name`` as :func:`check_printable` accepts it, at most
    :data:`MAX_WORKFLOW_NAME` characters."""
    return check_printable("name", name, limit=MAX_WORKFLOW_NAME)


def check_hold_reason(reason: str) -> str:
    """A node hold's ``reason`` as :func:`check_printable` accepts it, at most
    :data:`MAX_HOLD_REASON` characters."""
    return check_printable("reason", reason, limit=MAX_HOLD_REASON)


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every character ``str.isprintable`` refuses (control characters such as
    ESC and NUL, C1 controls, bidirectional overrides, lone surrogates) written as Python
    writes it in a string literal (``\\x1b``, ``\\u202e``), so that a terminal shows it
    instead of acting on it. ``keep_newlines`` leaves line breaks in (a message of several
    lines); otherwise they are escaped too (one table cell, one line)."""
    if text.isprintable():
        return text
    return "".join(
        char if char.isprintable() or (keep_newlines and char == "\n") else repr(char)[1:-1]
        for char in text
    )
