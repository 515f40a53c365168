"""The compiled C core (``fuzzball_runtime._native``) and the error check around its calls.

Importing this module checks that the compiled module speaks the C interface this package was
written for (``fbrt_abi_version()`` against :data:`ABI_VERSION`), so that a stale build fails
at once, naming both versions, instead of misreading a struct later.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fuzzball_runtime._native import ffi, lib

from .errors import AbiMismatch, RuntimeFailure

__all__ = ["ABI_VERSION", "INIT_PATH", "check", "check_abi", "ffi", "lib", "new_error"]

#: The C ABI this package calls; equal to ``FBRT_ABI_VERSION`` in ``csrc/fbrt.h``.
ABI_VERSION = 9

#: The static container init, built next to the module at install time.
INIT_PATH = Path(__file__).with_name("fbrt-init")


def check_abi(compiled: int, expected: int = ABI_VERSION) -> None:
    """Raise :class:`AbiMismatch` unless the compiled module's ABI version is ``expected``."""
    if compiled != expected:
        raise AbiMismatch(
            f"fuzzball_runtime._native implements C ABI version {compiled}, but this "
            f"fuzzball_runtime needs version {expected}: the compiled module is stale; rebuild "
            "it by reinstalling fuzzball (pip install -e . in a checkout)"
        )


check_abi(lib.fbrt_abi_version())


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
