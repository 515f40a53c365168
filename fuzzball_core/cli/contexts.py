"""The CLI's contexts file, in the real ``fuzzball`` CLI's format (``reference/cli-config.md``).

``${XDG_CONFIG_HOME:-~/.config}/fuzzball/config.yaml`` holds ``activeContext`` and a list of
``contexts`` (name, address, oidcServerURL, auth.credentials.token, currentaccountid,
accounts; and ``cafile``, ours: the CA a context's https server is verified with, as
``fuzzball local up`` writes it for its own CA). Other tools read and write this file too, so
the document is edited in place: fields this module does not know survive every rewrite. The
file holds bearer tokens, so it is written atomically and readable by its owner only.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from fuzzball_core.client import shown_url
from fuzzball_core.errors import AlreadyExists, InvalidArgument, NotFound
from fuzzball_core.tls import client_ssl_context


def contexts_path() -> Path:
    """``$XDG_CONFIG_HOME/fuzzball/config.yaml`` (``~/.config`` when the variable is unset)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "fuzzball" / "config.yaml"


class Context:
    """One entry of ``contexts``: typed access to the mapping it edits in place."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.entry = entry

    @property
    def name(self) -> str:
        return str(self.entry.get("name", ""))

    @property
    def address(self) -> str:
        return str(self.entry.get("address") or "")

    @property
    def oidc_server_url(self) -> str:
        return str(self.entry.get("oidcServerURL") or "")

    @property
    def current_account_id(self) -> str:
        return str(self.entry.get("currentaccountid") or "")

    @current_account_id.setter
    def current_account_id(self, value: str) -> None:
        self.entry["currentaccountid"] = value

    @property
    def accounts(self) -> list[dict[str, Any]]:
        return list(self.entry.get("accounts") or [])

    @accounts.setter
    def accounts(self, value: list[dict[str, Any]]) -> None:
        """The user's accounts, each ``{accountid, accountalias}`` as the real CLI keeps
        them."""
        self.entry["accounts"] = value

    @property
    def ca_file(self) -> str:
        """The CA file this context's server certificate is checked against; empty: the
        system's roots."""
        return str(self.entry.get("cafile") or "")

    @ca_file.setter
    def ca_file(self, value: str) -> None:
        if value:
            self.entry["cafile"] = value
        else:
            self.entry.pop("cafile", None)

    def verify(self) -> ssl.SSLContext:
        """What clients of this context verify its server's certificate with."""
        return client_ssl_context(self.ca_file or None)

    @property
    def token(self) -> str:
        return self._credential("token")

    @token.setter
    def token(self, value: str) -> None:
        self._credentials()["token"] = value

    @property
    def refresh_token(self) -> str:
        """The OIDC refresh token ``context login`` keeps (``auth.credentials.refreshToken``),
        which renews the API token once it expired."""
        return self._credential("refreshToken")

    @refresh_token.setter
    def refresh_token(self, value: str) -> None:
        if value:
            self._credentials()["refreshToken"] = value
        else:
            self._credentials().pop("refreshToken", None)

    def log_out(self) -> bool:
        """Remove the API token and the refresh token (``auth.credentials`` keeps its other
        fields, and ``token``, empty, as the real CLI's files have it); whether there was
        one."""
        held = bool(self.token or self.refresh_token)
        self.token = ""
        self.refresh_token = ""
        return held

    def _credential(self, key: str) -> str:
        auth = self.entry.get("auth")
        credentials = auth.get("credentials") if isinstance(auth, dict) else None
        return str(credentials.get(key) or "") if isinstance(credentials, dict) else ""

    def _credentials(self) -> dict[str, Any]:
        """``auth.credentials``, made a mapping if it is missing or is not one."""
        auth = self.entry.setdefault("auth", {})
        if not isinstance(auth, dict):
            auth = self.entry["auth"] = {}
        credentials = auth.setdefault("credentials", {})
        if not isinstance(credentials, dict):
            credentials = auth["credentials"] = {}
        return credentials

    def summary(self, *, active: bool) -> dict[str, Any]:
        """What ``context list`` shows: everything but the token (only whether there is one)
        and a user name or password in the address (``***``)."""
        return {
            "name": self.name,
            "active": active,
            "address": shown_url(self.address),
            "oidcServerURL": self.oidc_server_url,
            "currentaccountid": self.current_account_id,
            "accounts": self.accounts,
            "loggedIn": bool(self.token),
        }


class ContextsFile:
    """The whole document; ``save()`` writes it back with unknown fields preserved."""

    def __init__(self, path: Path, document: dict[str, Any]) -> None:
        self.path = path
        self.document = document

    @classmethod
    def load(cls, path: Path | None = None) -> ContextsFile:
        """Read the file (an absent or empty one is an empty document)."""
        path = path or contexts_path()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(path, {})
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"{path}: cannot read the contexts file: {exc}") from None
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidArgument(f"{path}: not valid YAML: {exc}") from None
        document = {} if document is None else document
        _check_document(path, document)
        return cls(path, document)

    @property
    def active_name(self) -> str:
        return str(self.document.get("activeContext") or "")

    @property
    def contexts(self) -> list[Context]:
        return [Context(entry) for entry in self.document.get("contexts") or []]

    def get(self, name: str) -> Context:
        """The context called ``name``; ``NotFound`` lists the known ones."""
        for context in self.contexts:
            if context.name == name:
                return context
        known = ", ".join(c.name for c in self.contexts) or "none yet"
        raise NotFound(f"context {name!r} does not exist (known contexts: {known})")

    def active(self) -> Context:
        """The active context; ``NotFound`` with the command to run when there is none."""
        if not self.active_name:
            raise NotFound(
                f"no active context in {self.path}: run 'fuzzball context create NAME "
                "--address ADDRESS' and 'fuzzball context use NAME'"
            )
        return self.get(self.active_name)

    def create(
        self, name: str, address: str, *, oidc_server_url: str = "", token: str = ""
    ) -> Context:
        """Add a context in the real CLI's shape; the first one becomes active."""
        if not name.strip():
            raise InvalidArgument("name: a context needs a name")
        if any(c.name == name for c in self.contexts):
            raise AlreadyExists(f"context {name!r} already exists")
        entry: dict[str, Any] = {
            "name": name,
            "address": address,
            "oidcServerURL": oidc_server_url,
            "auth": {"credentials": {"token": token}},
            "currentaccountid": "",
            "accounts": [],
        }
        self.document.setdefault("contexts", []).append(entry)
        if not self.active_name:
            self.use(name)
        return Context(entry)

    def use(self, name: str) -> None:
        """Make ``name`` the active context."""
        self.get(name)
        # activeContext comes first in the real CLI's files; keep it there when adding it.
        if "activeContext" not in self.document:
            self.document = {"activeContext": name, **self.document}
        self.document["activeContext"] = name

    def delete(self, name: str) -> None:
        """Remove the context ``name`` with its credentials; when it was the active one, no
        context is active afterwards (``activeContext`` is removed)."""
        self.get(name)
        self.document["contexts"] = [
            entry for entry in self.document.get("contexts") or [] if entry.get("name") != name
        ]
        if self.active_name == name:
            self.document.pop("activeContext", None)

    def save(self) -> None:
        """Write the document atomically (owner read/write only)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(self.document, sort_keys=False, default_flow_style=False)
        fd, temporary = tempfile.mkstemp(prefix=".config-", suffix=".yaml", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(temporary, 0o600)
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def _check_document(path: Path, document: Any) -> None:
    """``InvalidArgument`` naming the file and the path in it of the first field whose shape
    this CLI cannot use (a hand edit or another tool's): never a traceback or a value shown
    as a Python object."""
    if not isinstance(document, Mapping):
        raise InvalidArgument(f"{path}: the contexts file must be a mapping")
    contexts = document.get("contexts")
    if contexts is None:
        return
    if not isinstance(contexts, list):
        raise InvalidArgument(f"{path}: contexts: must be a list")
    first_of_name: dict[str, int] = {}
    for index, entry in enumerate(contexts):
        where = f"{path}: contexts[{index}]"
        if not isinstance(entry, dict):
            raise InvalidArgument(f"{where}: must be a mapping")
        for key in ("name", "address"):
            if not isinstance(entry.get(key, ""), str):
                raise InvalidArgument(f"{where}.{key}: must be a string")
        for key in _OPTIONAL_STRINGS:
            if entry.get(key) is not None and not isinstance(entry[key], str):
                raise InvalidArgument(f"{where}.{key}: must be a string")
        accounts = entry.get("accounts")
        if accounts is not None and not isinstance(accounts, list):
            raise InvalidArgument(f"{where}.accounts: must be a list")
        for number, account in enumerate(accounts or []):
            if not isinstance(account, dict):
                raise InvalidArgument(f"{where}.accounts[{number}]: must be a mapping")
        name = entry.get("name", "")
        if name in first_of_name:
            raise InvalidArgument(
                f"{where}.name: {name!r} is already the name of contexts[{first_of_name[name]}];"
                " context names must be unique"
            )
        first_of_name[name] = index


#: a context's fields that may be absent or empty but, when given, are strings
_OPTIONAL_STRINGS = ("oidcServerURL", "currentaccountid", "cafile")
