"""The secret key: a 0600 file in the data directory, made on first use, rotated by
``fuzzball-orchestrate secrets rotate-key`` with every secret still readable after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import select
from support.secret_stack import SecretStack, secret_stack

from fuzzball_core.errors import Internal
from fuzzball_core.orchestrate.server import cli
from fuzzball_core.service.secrets import Secrets
from fuzzball_core.store.models import AuditEntry
from fuzzball_core.store.models import Secret as SecretRow
from fuzzball_core.store.secret_box import KEY_FILE, SecretBox


@pytest.fixture
def secrets(tmp_path) -> Iterator[SecretStack]:
    with secret_stack(tmp_path) as stack:
        yield stack


def _rotate(stack: SecretStack) -> str:
    """Run ``fuzzball-orchestrate secrets rotate-key`` against the stack's store."""
    config = stack.data_dir / "orchestrate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "data-dir": str(stack.data_dir),
                "database": {"url": f"sqlite:///{stack.data_dir / 'orchestrate.db'}"},
            }
        )
    )
    result = CliRunner().invoke(cli, ["--config", str(config), "secrets", "rotate-key"])
    assert result.exit_code == 0, result.output
    return result.output


def _ciphertexts(stack: SecretStack) -> list[str]:
    with stack.sessions() as session:
        return list(session.scalars(select(SecretRow.ciphertext).order_by(SecretRow.name)))


def test_the_key_file_is_made_0600_on_first_use(tmp_path):
    box = SecretBox(tmp_path / "data")
    locked = box.encrypt(b"hello")

    assert box.decrypt(locked) == b"hello"
    assert (tmp_path / "data" / KEY_FILE).stat().st_mode & 0o777 == 0o600


def test_rotate_key_reencrypts_every_secret_and_keeps_it_readable(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    owner = Secrets.owner_of(secrets.service.identity.login_principal(alice.user_id))
    with secrets.client(alice.token) as api:
        for name, value in (("a", "first"), ("b", "second")):
            body = {"name": name, "scope": "SECRET_SCOPE_USER", "value": {"value": value}}
            assert api.put("/v3/secrets", json=body).status_code == 200
        body = {"name": "c", "scope": "SECRET_SCOPE_GROUP", "map": {"map": {"k": "third"}}}
        assert api.put("/v3/secrets", json=body).status_code == 200
    key_before = (secrets.data_dir / KEY_FILE).read_bytes()
    before = _ciphertexts(secrets)

    output = _rotate(secrets)

    assert "Re-encrypted 3 secrets" in output
    assert (secrets.data_dir / KEY_FILE).read_bytes().count(b"\n") == 1  # the old key is gone
    assert (secrets.data_dir / KEY_FILE).read_bytes() != key_before
    assert all(a != b for a, b in zip(before, _ciphertexts(secrets), strict=True))
    # the running service reads the new key file by itself
    resolved = [
        secrets.secrets.resolve(owner, reference)
        for reference in ("secret://user/a", "secret://user/b", "secret://group/c/k")
    ]
    assert resolved == ["first", "second", "third"]


def test_rotation_is_in_the_audit_log(secrets):
    _rotate(secrets)
    with secrets.sessions() as session:
        actions = list(session.scalars(select(AuditEntry.action)))
    assert "secret_key_rotated" in actions


def test_a_secret_no_key_opens_fails_naming_the_key_file_not_the_data(tmp_path):
    locked = SecretBox(tmp_path / "one").encrypt(b"the-plaintext")
    other = SecretBox(tmp_path / "two")
    other.encrypt(b"x")  # makes its own key

    with pytest.raises(Internal) as error:
        other.decrypt(locked)
    assert KEY_FILE in str(error.value)
    assert "the-plaintext" not in str(error.value)
