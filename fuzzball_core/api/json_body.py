"""Reading a request's JSON body within bounds: every way a body can be bad is a 400.

``json.loads`` alone turns several hostile bodies into exceptions that are not a client error
to the caller (a ``UnicodeDecodeError``, a ``ValueError`` for an integer of more than 4,300
digits, a ``RecursionError`` for arrays nested a thousand deep), and accepts things that break
later steps (a lone UTF-16 surrogate such as ``"\\ud800"``, which no UTF-8 text can hold).
:func:`parse_json_body` refuses each with ``InvalidArgument`` naming what is wrong and, where
it can, where. (Non-finite numbers are read, and refused where the field is known.)
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from fuzzball_core.errors import InvalidArgument

#: Deepest nesting of arrays and objects a body may have. A workflow definition is about ten
#: deep; the bound keeps every recursive step after parsing (protobuf, pydantic) far from
#: Python's recursion limit.
MAX_JSON_DEPTH = 64
#: Most digits an integer in a body may have: every integer the API takes fits in 64 bits
#: (19 digits); the range itself is checked where the field is known.
MAX_INTEGER_DIGITS = 40

_PREFIX = "request body"
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def parse_json_body(data: bytes) -> Any:
    """The JSON value of a request body; ``InvalidArgument`` for anything that is not
    UTF-8 JSON within :data:`MAX_JSON_DEPTH` and :data:`MAX_INTEGER_DIGITS`, or that holds
    a lone surrogate."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(
            f"{_PREFIX}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    if not text.strip():
        raise InvalidArgument(f"{_PREFIX}: expected a JSON object, got an empty body")
    _check_depth(text)
    try:
        value = json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(
            f"{_PREFIX}: invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    _check_strings(value)
    return value


def _check_depth(text: str) -> None:
    """Refuse nesting past :data:`MAX_JSON_DEPTH` before the recursive parser sees it.

    Brackets inside strings do not count; a malformed text is left for ``json.loads`` to
    describe.
    """
    brackets = _BRACKET.findall(_STRING.sub("", text))
    steps = (1 if bracket in "[{" else -1 for bracket in brackets)
    if max(accumulate(steps), default=0) > MAX_JSON_DEPTH:
        raise InvalidArgument(f"{_PREFIX}: JSON nested deeper than {MAX_JSON_DEPTH} levels")


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise InvalidArgument(
            f"{_PREFIX}: an integer of {len(digits)} characters; "
            f"at most {MAX_INTEGER_DIGITS} digits are accepted"
        )
    return int(digits)


def _check_strings(value: Any) -> None:
    """Refuse a string or key holding a lone surrogate, naming where it is.

    JSON's ``\\ud800`` escape can spell one, but no UTF-8 text (a proto string, a database
    column, a log line) can hold it.
    """
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                where = f"{path}.{key}" if path else str(key)
                if not _is_utf8(key):
                    raise InvalidArgument(f"{_PREFIX}: a key in {path or 'the body'} {_SURROGATE}")
                pending.append((where, child))
        elif isinstance(item, list):
            pending.extend((f"{path}[{index}]", child) for index, child in enumerate(item))
        elif isinstance(item, str) and not _is_utf8(item):
            raise InvalidArgument(f"{path or _PREFIX}: {_SURROGATE}")


_SURROGATE = "holds a lone UTF-16 surrogate, which is not a character"


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
