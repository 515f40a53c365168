"""The compiled C core (``fuzzball_runtime._native``) and the error check around its calls."""

from __future__ import annotations

from typing import Any

from fuzzball_runtime._native import ffi, lib

from .errors import RuntimeFailure

__all__ = ["check", "ffi", "lib", "new_error"]


def new_error() -> Any:
    """A fresh ``struct fbrt_error *`` for one C call."""
    return ffi.new("struct fbrt_error *")


def check(
    rc: int, err: Any, failure: type[RuntimeFailure] = RuntimeFailure, context: str = ""
) -> int:
    """Return ``rc`` when it is not negative, else raise ``failure`` with the C message."""
    if rc >= 0:
        return rc
    message = ffi.string(err.msg).decode("utf-8", "replace")
    if context:
        message = f"{context}: {message}"
    raise failure(message, errno=err.err or -rc)
