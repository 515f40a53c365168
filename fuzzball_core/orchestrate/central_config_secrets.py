"""Credentials in the central configuration's document: found, redacted, restored.

Which settings are credentials is the drivers' word (:meth:`~fuzzball_core.drivers.
Provisioner.secret_settings`, the ``SecretStr`` fields of their settings models) and the
schema's own (:func:`~fuzzball_core.drivers.secret_fields` of a definition's model):
:data:`CredentialPaths` gives, for a definition's driver, the paths under the definition
that hold them.

The document is rewritten in its own text, so comments, order and layout stay as the
administrator wrote them: :func:`redact` replaces each credential's value by
:data:`REDACTED` (what every read shows), :func:`restore` replaces a :data:`REDACTED` sent
back by the value the previous revision holds at the same place (so a get, edit, set round
trip keeps the credentials). A credential that is a mapping or a list has each of its values
replaced. An anchor on a credential's value is kept (its aliases then read the marker too).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from fuzzball_core.errors import InvalidArgument

#: what a read shows in place of a credential; sent back in a set, it keeps the stored value
REDACTED = "<redacted>"

#: a definition's driver name -> the paths under the definition that hold credentials
CredentialPaths = Callable[[str], frozenset[tuple[str, ...]]]

#: a path from a definition down to one value (mapping keys, list indexes)
_Path = tuple[str | int, ...]
_MERGE_TAG = "tag:yaml.org,2002:merge"
#: a credential left empty (``null``, ``~``, nothing) is shown as it is: there is nothing to
#: hide, and a set sending it back means "none", not "the stored one"
_NULL_TAG = "tag:yaml.org,2002:null"
#: the node properties in front of a scalar's text: anchors (kept) and tags (dropped: the
#: marker is a string whatever the value was)
_PROPERTIES = re.compile(r"(?:[&!]\S*\s+)*")


def redact(text: str, credentials: CredentialPaths) -> str:
    """``text`` with every credential's value replaced by :data:`REDACTED`; InvalidArgument
    naming a credential whose value cannot be told apart from other values (one given
    through an alias or merge whose text the redaction could not reach)."""
    replaced = _replace(
        text, credentials, lambda where, node: None if node.tag == _NULL_TAG else REDACTED
    )
    shown = _load(replaced)
    for definition, path, value in _credential_values(shown, credentials):
        if any(leaf != REDACTED for leaf in _leaves(value)):
            raise InvalidArgument(
                f"config: {_where(definition, path)}: a credential must be written in place"
                " (not through an alias or merge key it shares with other values): it is"
                " stored sealed and every read shows it as " + REDACTED
            )
    return replaced


def restore(text: str, credentials: CredentialPaths, previous: str) -> str:
    """``text`` with each credential given as :data:`REDACTED` replaced by the value the
    ``previous`` document holds at the same place (the definition of the same id);
    InvalidArgument naming those the previous document does not hold."""
    earlier = {
        str(definition.get("id")): definition
        for definition in _definitions(_load(previous) if previous.strip() else {})
    }
    missing: list[str] = []

    def stored(where: tuple[str, _Path], node: ScalarNode) -> str | None:
        if node.value != REDACTED:
            return None
        definition, path = where
        value = _dig(earlier.get(definition), path)
        if value is None:
            missing.append(_where(definition, path))
            return None
        return _scalar_text(value)

    restored = _replace(text, credentials, stored)
    if missing:
        raise InvalidArgument(
            f"config: {', '.join(missing)}: {REDACTED} stands for the stored credential, and"
            " the newest revision holds none there; give the value"
        )
    return restored


def _scalar_text(value: Any) -> str:
    """``value`` written as a YAML scalar that stays on one line wherever it is put (in a
    block or a flow collection): a string double-quoted with JSON's escapes (a subset of
    YAML's), anything else as YAML writes it in flow style."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    dumped = yaml.safe_dump(value, default_flow_style=True, width=float("inf"))
    return dumped.removesuffix("\n...\n").strip()


def _replace(
    text: str,
    credentials: CredentialPaths,
    replacement: Callable[[tuple[str, _Path], ScalarNode], str | None],
) -> str:
    """``text`` with each credential scalar's text replaced by ``replacement`` (None: kept),
    its anchor and the line breaks its text ends with kept."""
    spans: dict[int, tuple[int, int, str]] = {}
    for where, node in _credential_scalars(_compose(text), credentials):
        if id(node) in spans:
            continue  # an alias of a value already seen
        new = replacement(where, node)
        if new is None:
            continue
        start, end = node.start_mark.index, node.end_mark.index
        original = text[start:end]
        properties = _PROPERTIES.match(original)
        words = properties.group(0).split() if properties else []
        anchors = " ".join(word for word in words if word.startswith("&"))
        ending = original[len(original.rstrip()) :]
        spans[id(node)] = (start, end, f"{anchors} {new}".lstrip() + ending)
    for start, end, new in sorted(spans.values(), reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _compose(text: str) -> Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"config: not a YAML document ({exc.__class__.__name__})") from None


def _load(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"config: not a YAML document ({exc.__class__.__name__})") from None


def _credential_scalars(
    root: Node | None, credentials: CredentialPaths
) -> Iterator[tuple[tuple[str, _Path], ScalarNode]]:
    """Every scalar of a credential in the composed document, with its definition's id and
    its path under that definition."""
    for provisioner in _values(root, "provisioner"):
        for definitions in _values(provisioner, "definitions"):
            if not isinstance(definitions, SequenceNode):
                continue
            for definition in definitions.value:
                ident = _scalar(definition, "id")
                for path in sorted(credentials(_scalar(definition, "driver"))):
                    for node in _follow(definition, path):
                        for leaf_path, leaf in _scalar_leaves(node, path):
                            yield (ident, leaf_path), leaf


def _credential_values(
    document: Any, credentials: CredentialPaths
) -> Iterator[tuple[str, _Path, Any]]:
    """Every credential's value in the loaded document, with its definition's id and path."""
    for definition in _definitions(document):
        for path in sorted(credentials(str(definition.get("driver", "")))):
            value = _dig(definition, path)
            if value is not None:
                yield str(definition.get("id")), path, value


def _definitions(document: Any) -> list[dict[str, Any]]:
    provisioner = document.get("provisioner") if isinstance(document, dict) else None
    found = provisioner.get("definitions") if isinstance(provisioner, dict) else None
    return [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []


def _pairs(node: Node) -> Iterator[tuple[Node, Node]]:
    """A mapping node's key and value nodes as loading reads them: its own, then those of
    merged mappings (``<<``) whose keys it does not have (the first merged one wins)."""
    if not isinstance(node, MappingNode):
        return
    own = [(key, value) for key, value in node.value if key.tag != _MERGE_TAG]
    seen = {key.value for key, _ in own if isinstance(key, ScalarNode)}
    yield from own
    for key, value in node.value:
        if key.tag != _MERGE_TAG:
            continue
        for merged in value.value if isinstance(value, SequenceNode) else [value]:
            for merged_key, merged_value in _pairs(merged):
                name = merged_key.value if isinstance(merged_key, ScalarNode) else None
                if name not in seen:
                    seen.add(name)
                    yield merged_key, merged_value


def _values(node: Node | None, key: str) -> Iterator[Node]:
    if node is None:
        return
    for key_node, value in _pairs(node):
        if isinstance(key_node, ScalarNode) and key_node.value == key:
            yield value


def _scalar(node: Node, key: str) -> str:
    found = [v.value for v in _values(node, key) if isinstance(v, ScalarNode)]
    return str(found[-1]) if found else ""


def _follow(node: Node, path: tuple[str, ...]) -> Iterator[Node]:
    if not path:
        yield node
        return
    for value in _values(node, path[0]):
        yield from _follow(value, path[1:])


def _scalar_leaves(node: Node, path: _Path) -> Iterator[tuple[_Path, ScalarNode]]:
    """The scalars of ``node`` (itself, or its values' and items', never a mapping's keys)."""
    if isinstance(node, ScalarNode):
        yield path, node
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            yield from _scalar_leaves(item, (*path, index))
    else:
        for key, value in _pairs(node):
            yield from _scalar_leaves(value, (*path, str(key.value)))


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for each in value.values():
            yield from _leaves(each)
    elif isinstance(value, list):
        for each in value:
            yield from _leaves(each)
    else:
        yield value


def _dig(value: Any, path: _Path) -> Any:
    for step in path:
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, list) and isinstance(step, int) and step < len(value):
            value = value[step]
        else:
            return None
    return value


def _where(definition: str, path: _Path) -> str:
    where = f"provisioner.definitions[{definition}]"
    for step in path:
        where += f"[{step}]" if isinstance(step, int) else f".{step}"
    return where
