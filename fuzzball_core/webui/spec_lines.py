"""Where in a workflow file a validation message belongs, so the editor shows it at its line.

The server names each problem by its field path (``jobs.hello.mounts.data``,
``jobs.hello.command[0]``, ``jobs.hello.env (key)``) as the file was written, or, for a file
that is not YAML, quotes the parser's ``(line N, column M)``. :func:`line_of` finds the line
of the deepest part of that path present in the text.
"""

from __future__ import annotations

import re

import yaml

from fuzzball_core.spec.loading import MAX_DOCUMENT_BYTES

_QUOTED_LINE = re.compile(r"\(line (\d+), column \d+\)")
_SEGMENT = re.compile(r"\[(\d+)\]|\.?([^.\[]+)")


def line_of(text: str, path: str, description: str = "") -> int | None:
    """The 1-based line of ``text`` that ``path`` names (or that ``description`` quotes);
    None when neither leads anywhere (a problem of the whole file)."""
    quoted = _QUOTED_LINE.search(description)
    if quoted:
        return int(quoted.group(1))
    path = path.removesuffix(" (key)")
    if not path or len(text.encode()) > MAX_DOCUMENT_BYTES:
        return None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line = None
    remaining = path
    while node is not None and remaining:
        node, line_here, remaining = _step(node, remaining)
        line = line_here if line_here is not None else line
        if line_here is None:
            break
    return line


def _step(node: yaml.Node, path: str) -> tuple[yaml.Node | None, int | None, str]:
    """Follow the first segment of ``path`` from ``node``: the child, its line, what is left.

    A mapping's key may hold dots (an image named by its URI), so the longest key that
    starts the path wins."""
    if isinstance(node, yaml.MappingNode):
        best: tuple[yaml.Node, yaml.Node, str] | None = None
        for key, value in node.value:
            name = str(key.value)
            starts = path == name or path.startswith((name + ".", name + "["))
            if starts and (best is None or len(name) > len(best[2])):
                best = (key, value, name)
        if best is None:
            return None, None, path
        key, value, name = best
        return value, key.start_mark.line + 1, path[len(name) :].removeprefix(".")
    match = _SEGMENT.match(path)
    if isinstance(node, yaml.SequenceNode) and match and match.group(1) is not None:
        index = int(match.group(1))
        if index < len(node.value):
            child = node.value[index]
            return child, child.start_mark.line + 1, path[match.end() :].removeprefix(".")
    return None, None, path
