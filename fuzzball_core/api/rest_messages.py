"""REST JSON as the proto3 JSON mapping of the ``fuzzball.v1`` messages, both ways.

Fuzzball's REST API is a gateway over its protos, and so is this one: a reply's JSON is its
message through ``google.protobuf.json_format`` (camelCase field names, enum names such as
``STAGE_STATUS_FINISHED``, RFC 3339 times, bytes as base64, int64 as a string). Fields without
presence (plain scalars, lists, maps) are always written; ``optional`` scalars and message
fields are left out while unset, as the view left them out. Two departures from
``MessageToDict``: the keys come in the order the proto declares its fields (so the JSON reads
the same whatever is set), and in a ``google.protobuf.Struct`` (a map, which keeps every number
as a double) whole numbers are written as integers again (an event's ``{"done": 5}`` stays
``5``) and keys in sorted order (the map keeps none).

Reading goes through the same mapping: :func:`parse_request` turns a request body into its
message and answers ``InvalidArgument`` naming the field for anything that does not fit;
:func:`read_reply` reads a server's reply into a message, ignoring fields it does not know (a
newer server may send more).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from fuzzball_core.errors import Internal, InvalidArgument

M = TypeVar("M", bound=Message)

_STRUCT = "google.protobuf.Struct"

#: What a JSON value must be for a field of each protobuf type (the JSON mapping's spellings).
_EXPECTED: dict[int, tuple[str, tuple[type, ...]]] = {
    FieldDescriptor.TYPE_STRING: ("a string", (str,)),
    FieldDescriptor.TYPE_BYTES: ("a base64 string", (str,)),
    FieldDescriptor.TYPE_BOOL: ("a boolean", (bool,)),
    FieldDescriptor.TYPE_ENUM: ("an enum name", (str, int)),
}
_NUMBERS = (int, float, str)  # the JSON mapping accepts numbers, and int64 as strings


def to_json(message: Message) -> dict[str, Any]:
    """The REST JSON of ``message``, its fields in the order the proto declares them."""
    body = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    return _in_schema_order(message, body)


def whole_numbers(value: Any) -> Any:
    """``value`` with every whole float in it (at any depth) as an ``int``.

    A ``Struct`` holds every number as a double; what was written ``cores: 2`` reads back as
    ``2``, not ``2.0``.
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value


def _document(value: Any) -> Any:
    """A ``Struct``'s JSON with whole numbers as integers and every object's keys sorted.

    A ``Struct`` is a map, which keeps no order (it differs from one process to the next);
    sorted keys make the same data read the same every time.
    """
    if isinstance(value, dict):
        return {key: _document(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_document(item) for item in value]
    return whole_numbers(value)


def _in_schema_order(message: Message, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (``message``'s ``MessageToDict``) with its keys in declaration order, at every
    depth, and ``Struct`` fields as :func:`_document` writes them.

    ``MessageToDict`` writes the fields that are set before those shown at their defaults, so
    without this a field would move about the JSON with its value.
    """
    ordered: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        key = field.json_name
        if key not in body:
            continue
        value = body[key]
        kind = field.message_type
        if kind is not None and not kind.GetOptions().map_entry:
            held = getattr(message, field.name)
            if kind.full_name == _STRUCT:
                value = _document(value)
            elif field.is_repeated:
                value = [_in_schema_order(m, b) for m, b in zip(held, value, strict=True)]
            elif isinstance(value, dict):  # well-known types such as Timestamp are strings
                value = _in_schema_order(held, value)
        ordered[key] = value
    return ordered


def read_reply(data: Any, message_type: type[M]) -> M:
    """A server's JSON reply as a ``message_type``; fields this client does not know are
    dropped. ``Internal`` if the reply does not fit the message at all (the server's fault,
    not the caller's)."""
    try:
        return json_format.ParseDict(data, message_type(), ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise Internal(
            f"the server's reply is not a {message_type.DESCRIPTOR.name}: {exc}"
        ) from None


def parse_request(
    body: Any,
    message_type: type[M],
    *,
    ignored: Collection[str] = (),
    from_path: Collection[str] = (),
) -> M:
    """A REST request body as a ``message_type``.

    ``ignored`` names (in JSON spelling) fields the caller checks apart, left out of the message;
    ``from_path`` names (proto spelling) fields the URL path gives, which the body may not.
    ``InvalidArgument`` names the first field that does not fit: unknown, of the wrong JSON
    type, or a second member of a ``oneof``.
    """
    if not isinstance(body, dict):
        raise InvalidArgument(f"request body: expected a JSON object, got {json_type(body)}")
    descriptor = message_type.DESCRIPTOR
    fields = _body_fields(descriptor, from_path)
    given = {key: value for key, value in body.items() if key not in ignored}
    chosen_of: dict[str, str] = {}
    for key, value in given.items():
        field = fields.get(key)
        if field is None:
            raise InvalidArgument(f"request body: unknown field {key!r}")
        _check_type(key, field, value)
        oneof = field.containing_oneof
        if oneof is not None and value is not None:
            if oneof.name in chosen_of:
                raise InvalidArgument(
                    f"request body: give either {chosen_of[oneof.name]} or {key}, not both"
                )
            chosen_of[oneof.name] = key
    try:
        return json_format.ParseDict(given, message_type())
    except json_format.ParseError as exc:
        raise InvalidArgument(f"request body: {exc}") from None


def _body_fields(descriptor: Descriptor, from_path: Collection[str]) -> dict[str, FieldDescriptor]:
    """The body's fields by both spellings the JSON mapping accepts (``rawSpecification`` and
    ``raw_specification``)."""
    fields: dict[str, FieldDescriptor] = {}
    for field in descriptor.fields:
        if field.name not in from_path:
            fields[field.json_name] = fields[field.name] = field
    return fields


def _check_type(key: str, field: FieldDescriptor, value: Any) -> None:
    if value is None:
        return  # null leaves the field unset, as the JSON mapping says
    is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
    if field.is_repeated and not is_map:
        expected: tuple[str, tuple[type, ...]] = ("an array", (list,))
    elif field.message_type is not None:
        expected = ("an object", (dict,))
    else:
        expected = _EXPECTED.get(field.type, ("a number", _NUMBERS))
    words, types = expected
    # bool is an int to Python, but never a number (or anything else) to JSON
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise InvalidArgument(f"{key}: expected {words}, got {json_type(value)}")


def json_type(value: Any) -> str:
    """How JSON would name ``value``'s type: ``an array``, ``a string``, ``null``, ..."""
    names = {list: "an array", dict: "an object", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")
