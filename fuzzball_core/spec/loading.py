"""Bounded YAML loading for workflow files.

A workflow file is untrusted input: any byte string must end in either plain Python data or an
``InvalidArgument``, in time and memory bounded by the limits below. PyYAML's own composer is
not used for two reasons: it recurses once per nesting level (a file nested 10,000 deep would
overflow the stack) and it builds a node graph with a Python resolver call per scalar, which is
several times slower than walking libyaml's events directly. Instead this module drives the
libyaml event parser (``CParser`` when available) and builds dicts, lists and strings itself,
with a depth limit, a node budget that counts every alias at the full size of what it expands
to (so "billion laughs" documents are refused long before they are expanded), and rejection of
duplicate keys and unknown tags.

Scalars stay strings, as in Fuzzball's Go decoder where a scalar takes the type of the field it
lands in: ``cores: 8`` and ``command: [sleep, 8]`` are both read as ``"8"``, and the typed model
turns the first into an integer. Only ``null``/``~``/empty plain scalars become ``None``.
Nothing in a file is ever treated as a template: ``{{ ... }}`` is ordinary text.
"""

from __future__ import annotations

from typing import Any

import yaml

from fuzzball_core.errors import InvalidArgument

try:  # libyaml makes event parsing several times faster; the pure parser is the fallback.
    from yaml.cyaml import CParser as _EventParser
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml.loader import SafeLoader as _EventParser

#: Largest workflow file accepted, in bytes (and in characters for text input).
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
#: Deepest nesting of mappings and sequences accepted.
MAX_DEPTH = 64
#: Most nodes a document may expand to, aliases counted at the size of what they repeat.
MAX_NODES = 1_000_000

_NULL_WORDS = frozenset({"", "~", "null", "Null", "NULL"})
_YAML_TAG = "tag:yaml.org,2002:"
# Explicit tags whose value is kept as text: the typed model converts it where it lands.
_TEXT_TAGS = frozenset(_YAML_TAG + name for name in ("str", "int", "float", "bool"))
_MERGE_KEY = "<<"


def _reject(problem: str, mark: Any = None) -> InvalidArgument:
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    message = f"not a valid workflow file: {problem}{where}"
    return InvalidArgument(message, details=[{"field": "", "description": problem + where}])


class _Collection:
    """A mapping or sequence under construction, with what the composer needs to finish it."""

    __slots__ = ("anchor", "first_node", "is_map", "key", "merges", "parent", "slot", "value")

    def __init__(
        self, value: dict | list, anchor: str | None, parent: _Collection | None, first_node: int
    ) -> None:
        self.value = value
        self.is_map = isinstance(value, dict)
        self.anchor = anchor
        self.parent = parent
        # Where this collection sits in its parent: a key or an index (for error paths only).
        self.slot: str | int | None = None
        if parent is not None:
            self.slot = parent.key if parent.is_map else len(parent.value)
        self.first_node = first_node
        self.key: str | None = None  # mappings: the key whose value comes next
        self.merges: list[Any] = []  # mappings: values of "<<" keys, applied at the end

    @property
    def path(self) -> str:
        """The dotted field path of this collection, computed only when an error needs it."""
        parts: list[str] = []
        node: _Collection | None = self
        while node is not None and node.parent is not None:
            parts.append(f"[{node.slot}]" if isinstance(node.slot, int) else f".{node.slot}")
            node = node.parent
        return "".join(reversed(parts)).lstrip(".")


def load_document(data: bytes | str) -> Any:
    """Parse one YAML document into dicts, lists, strings and ``None``.

    Raises ``InvalidArgument`` for anything that is not a single well-formed YAML document
    within ``MAX_DOCUMENT_BYTES``, ``MAX_DEPTH`` and ``MAX_NODES``, including duplicate keys,
    non-scalar keys, undefined aliases and tags other than YAML's core ones.
    """
    if isinstance(data, str):
        if len(data) > MAX_DOCUMENT_BYTES:
            raise _too_large(len(data))
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _reject("text is not valid Unicode") from exc
    elif not isinstance(data, bytes | bytearray | memoryview):
        raise _reject(f"expected bytes or text, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise _too_large(len(data))
    try:
        return _compose(_EventParser(data))
    except InvalidArgument:
        raise
    except yaml.MarkedYAMLError as exc:
        problem = exc.problem or "malformed YAML"
        if "nesting depth" in problem:  # libyaml >= 0.2.5 stops very deep input itself
            problem = f"nested deeper than {MAX_DEPTH} levels"
        raise _reject(problem, exc.problem_mark) from None
    except yaml.reader.ReaderError as exc:
        raise _reject(_unreadable(data, exc)) from None
    except yaml.YAMLError as exc:
        raise _reject(f"malformed YAML: {type(exc).__name__}") from None
    except (RecursionError, MemoryError) as exc:  # defensive: limits should make these unreachable
        raise _reject(f"document too complex ({type(exc).__name__})") from None


def _unreadable(data: bytes, error: yaml.reader.ReaderError) -> str:
    """What the reader refused in ``data``, and where: a control character YAML does not
    allow (in valid text), a NUL (a binary file), or bytes that are no UTF-8 or UTF-16."""
    offset = error.position
    line_start = data.rfind(b"\n", 0, offset) + 1
    column = len(data[line_start:offset].decode("utf-8", errors="replace")) + 1
    line = data.count(b"\n", 0, offset) + 1
    where = f"line {line}, column {column}"
    character = error.character
    if error.reason == "control characters are not allowed" and isinstance(character, int):
        if character == 0:
            return f"not a text file: a NUL byte at {where}"
        return (
            f"control character U+{character:04X} at {where}: YAML does not allow it "
            f"(write it as the escape \\x{character:02x} in a double-quoted string)"
        )
    return f"not UTF-8 or UTF-16 text: {error.reason} at {where} (byte offset {offset})"


def _too_large(size: int) -> InvalidArgument:
    return _reject(f"file is {size} bytes; the limit is {MAX_DOCUMENT_BYTES} bytes")


_MERGE_MARKER = "<<\0"  # stands in for a pending key whose value is merged, not stored


def _where(collection: _Collection | None, key: str | None = None) -> str:
    path = collection.path if collection is not None else ""
    if key is not None:
        path = f"{path}.{key}" if path else key
    return path or "top level"


def _compose(parser: Any) -> Any:
    """Build Python data from the parser's event stream (one document, iteratively)."""
    scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
    mapping_start, sequence_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
    mapping_end, sequence_end = yaml.MappingEndEvent, yaml.SequenceEndEvent
    stream_end, document_start = yaml.StreamEndEvent, yaml.DocumentStartEvent
    get_event = parser.get_event

    parent: _Collection | None = None  # the collection being filled
    depth = 0
    anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (value, expanded node count)
    nodes = 0
    documents = 0
    root: Any = None

    while True:
        event = get_event()
        kind = event.__class__
        if kind is scalar_event:
            nodes += 1
            tag = event.tag
            plain = event.implicit[0] and not event.style  # libyaml reports plain as ''
            if tag is None or tag == "!" or tag in _TEXT_TAGS:
                value = event.value
                if plain and tag is None and value in _NULL_WORDS:
                    value = None
            elif tag == _YAML_TAG + "null":
                value = None
            else:
                raise _bad_tag(parent, tag, event)
            if event.anchor is not None:
                anchors[event.anchor] = (value, 1)
            if parent is not None and parent.is_map and parent.key is None:
                if plain and tag is None and value == _MERGE_KEY:
                    parent.key = _MERGE_MARKER
                    continue
                if value is None:
                    value = ""
                if value in parent.value:
                    raise _reject(f"{_where(parent, value)}: duplicate key", event.start_mark)
                parent.key = value
                continue
        elif kind is mapping_start or kind is sequence_start:
            nodes += 1
            if nodes > MAX_NODES:
                raise _too_many_nodes(event)
            if depth >= MAX_DEPTH:
                raise _reject(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            is_map = kind is mapping_start
            if event.tag not in (None, "!", _YAML_TAG + ("map" if is_map else "seq")):
                raise _bad_tag(parent, event.tag, event)
            if parent is not None and parent.is_map and parent.key is None:
                raise _reject(f"{_where(parent)}: keys must be scalars", event.start_mark)
            parent = _Collection({} if is_map else [], event.anchor, parent, nodes)
            depth += 1
            continue
        elif kind is mapping_end or kind is sequence_end:
            done = parent
            assert done is not None
            if done.merges:
                _apply_merges(done, event)
            if done.anchor is not None:
                anchors[done.anchor] = (done.value, nodes - done.first_node + 1)
            parent = done.parent
            depth -= 1
            value = done.value
        elif kind is alias_event:
            if event.anchor not in anchors:
                raise _reject(f"alias *{event.anchor} names no earlier anchor", event.start_mark)
            value, size = anchors[event.anchor]
            nodes += size
            if nodes > MAX_NODES:
                raise _too_many_nodes(event, aliases=True)
            if parent is not None and parent.is_map and parent.key is None:
                if not isinstance(value, str):
                    raise _reject(f"{_where(parent)}: keys must be scalars", event.start_mark)
                if value in parent.value:
                    raise _reject(f"{_where(parent, value)}: duplicate key", event.start_mark)
                parent.key = value
                continue
        elif kind is stream_end or event is None:
            break
        elif kind is document_start:
            documents += 1
            if documents > 1:
                raise _reject("the file holds more than one YAML document", event.start_mark)
            continue
        else:  # stream start, document end
            continue
        # A finished value (scalar, alias or collection) lands in its parent, or is the root.
        if nodes > MAX_NODES:
            raise _too_many_nodes(event)
        if parent is None:
            root = value
        elif isinstance(parent.value, list):
            parent.value.append(value)
        else:
            if parent.key == _MERGE_MARKER:
                parent.merges.append(value)
            else:
                parent.value[parent.key] = value
            parent.key = None
    if root is None:
        raise _reject("the file is empty")
    return root


def _apply_merges(mapping: _Collection, event: Any) -> None:
    """Apply ``<<`` merge keys: explicit keys win, then earlier merged mappings win."""
    sources: list[Any] = []
    for merged in mapping.merges:
        sources.extend(merged if isinstance(merged, list) else [merged])
    target = mapping.value
    assert isinstance(target, dict)
    for source in sources:
        if not isinstance(source, dict):
            raise _reject(f"{_where(mapping)}: '<<' merges mappings only", event.start_mark)
        for key, value in source.items():
            target.setdefault(key, value)


def _bad_tag(parent: _Collection | None, tag: str, event: Any) -> InvalidArgument:
    # The tag is the user's own markup, never a field value, so naming it is safe.
    shown = tag if len(tag) <= 60 else tag[:57] + "..."
    key = parent.key if parent is not None and parent.is_map else None
    if key == _MERGE_MARKER:
        key = _MERGE_KEY
    return _reject(f"{_where(parent, key)}: YAML tag {shown!r} is not supported", event.start_mark)


def _too_many_nodes(event: Any, *, aliases: bool = False) -> InvalidArgument:
    cause = " once its aliases are expanded" if aliases else ""
    return _reject(f"document has more than {MAX_NODES} nodes{cause}", event.start_mark)
