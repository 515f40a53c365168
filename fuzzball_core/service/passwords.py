"""Passwords: the policy new ones must meet, their argon2 hashes, and generated ones.

The policy is Fuzzball 4.4's ("Password policy and lockout" in its release notes): at least
12 characters, upper and lower case letters, a digit and a special character, and not
containing "fuzzball", the username or the email, compared without regard to case. It applies
to passwords being set; a stored hash keeps verifying whatever today's policy would say of
its password ("existing passwords keep working until changed").

Hashing is argon2id through argon2-cffi, never hand-rolled.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Iterable

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from fuzzball_core.errors import InvalidArgument

#: The fewest characters a password may have.
MIN_LENGTH = 12
#: The word no password may contain.
FORBIDDEN_WORD = "fuzzball"
#: Names shorter than this are not looked for inside a password: a one- or two-letter
#: username would otherwise forbid every password holding that letter pair.
_MIN_NAME_CHECKED = 3
#: The special characters generated passwords draw from (every printable ASCII one counts
#: as special when a password is checked).
_GENERATED_SPECIALS = "!#%*+-.:=?@^_~"
#: How long generated passwords are.
GENERATED_LENGTH = 20

_hasher = PasswordHasher()


def policy_violations(password: str, *, username: str = "", email: str = "") -> list[str]:
    """Every rule of the policy ``password`` breaks, each named (empty: it meets them all).

    ``username`` and ``email`` are the user's; each is looked for in the password ignoring
    case (and the email's local part as well, which is how people are known by name here).
    """
    broken: list[str] = []
    if len(password) < MIN_LENGTH:
        broken.append(f"it must be at least {MIN_LENGTH} characters long")
    if not any(c.isupper() for c in password):
        broken.append("it must contain an upper case letter")
    if not any(c.islower() for c in password):
        broken.append("it must contain a lower case letter")
    if not any(c.isdigit() for c in password):
        broken.append("it must contain a digit")
    if not any(_special(c) for c in password):
        broken.append("it must contain a special character (not a letter, digit or space)")
    folded = password.casefold()
    if FORBIDDEN_WORD in folded:
        broken.append(f'it must not contain "{FORBIDDEN_WORD}"')
    if _contains(folded, [username]):
        broken.append("it must not contain the username")
    if _contains(folded, [email, email.partition("@")[0]]):
        broken.append("it must not contain the email address")
    return broken


def check_policy(password: str, *, username: str = "", email: str = "") -> None:
    """InvalidArgument listing every rule ``password`` breaks (never the password itself)."""
    broken = policy_violations(password, username=username, email=email)
    if broken:
        raise InvalidArgument("password does not meet the password policy: " + "; ".join(broken))


def _special(character: str) -> bool:
    return not (character.isalnum() or character.isspace())


def _contains(folded_password: str, names: Iterable[str]) -> bool:
    return any(
        len(name) >= _MIN_NAME_CHECKED and name.casefold() in folded_password for name in names
    )


def hash_password(password: str) -> str:
    """The argon2id hash (with its own salt and parameters) the store keeps of ``password``."""
    return _hasher.hash(password)


def verify_password(stored_hash: str | None, password: str) -> bool:
    """Whether ``password`` is the one ``stored_hash`` was made of; False for no hash (a user
    who signs in elsewhere) or a malformed one."""
    if not stored_hash:
        return False
    try:
        return _hasher.verify(stored_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(stored_hash: str) -> bool:
    """Whether ``stored_hash`` was made with weaker parameters than today's (rehash it at the
    next good sign-in)."""
    try:
        return _hasher.check_needs_rehash(stored_hash)
    except InvalidHashError:
        return True


def generate_password(*, username: str = "", email: str = "") -> str:
    """A random password (from :mod:`secrets`) that meets the policy for this user."""
    alphabet = string.ascii_letters + string.digits + _GENERATED_SPECIALS
    while True:
        candidate = "".join(secrets.choice(alphabet) for _ in range(GENERATED_LENGTH))
        if not policy_violations(candidate, username=username, email=email):
            return candidate
