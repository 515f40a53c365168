"""Which settings are credentials (the drivers' ``SecretStr`` fields), and how the central
configuration's document is redacted and restored in its own text
(orchestrate/central_config_secrets.py)."""

from __future__ import annotations

import pytest
import yaml
from pydantic import BaseModel, SecretStr

from fuzzball_core.drivers import secret_fields
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate.central_config_secrets import REDACTED, redact, restore
from fuzzball_provisioners.aws import AwsProvisioner
from fuzzball_provisioners.oci import OciProvisioner

PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"


def credentials(driver: str) -> frozenset[tuple[str, ...]]:
    """The paths the central configuration seals, for the shipped cloud drivers; every value
    of ``config`` for a driver it does not know."""
    known = {"aws": AwsProvisioner(), "oci": OciProvisioner()}.get(driver)
    if known is None:
        return frozenset({("config",)})
    return frozenset(("config", *path) for path in known.secret_settings())


def oci_document(key_content: str = "|\n          " + PEM.replace("\n", "\n          ")) -> str:
    return f"""\
provisioner:
  definitions:
    - id: oracle  # the tenancy's capacity
      driver: oci
      cores: 2
      memory: 4GiB
      config:
        tenancy: ocid1.tenancy.oc1..t
        key-content: {key_content.rstrip()}
        pass-phrase: "open sesame"
        region: eu-frankfurt-1
"""


def config_of(text: str, index: int = 0) -> dict:
    return yaml.safe_load(text)["provisioner"]["definitions"][index]["config"]


def test_the_cloud_drivers_credentials_are_their_secret_settings():
    assert {"access-key-id", "secret-access-key", "session-token"} <= {
        path[0] for path in AwsProvisioner().secret_settings()
    }
    assert {"key-content", "pass-phrase"} <= {
        path[0] for path in OciProvisioner().secret_settings()
    }


def test_secret_fields_finds_optional_and_nested_secrets_by_alias_and_name():
    class Inner(BaseModel):
        token: SecretStr

    class Outer(BaseModel):
        plain: str = ""
        password: SecretStr | None = None
        inner: Inner | None = None

    assert secret_fields(Outer) == {("password",), ("inner", "token")}


def test_a_block_scalar_key_is_redacted_and_the_rest_of_the_text_kept():
    shown = redact(oci_document(), credentials)

    assert PEM.splitlines()[1] not in shown
    assert "open sesame" not in shown
    assert config_of(shown) == {
        "tenancy": "ocid1.tenancy.oc1..t",
        "key-content": REDACTED,
        "pass-phrase": REDACTED,
        "region": "eu-frankfurt-1",
    }
    assert "# the tenancy's capacity" in shown


def test_restoring_a_redacted_document_gives_the_values_back():
    original = oci_document()

    restored = restore(redact(original, credentials), credentials, original)

    assert config_of(restored) == config_of(original)


def test_a_credential_given_anew_is_kept_as_given():
    original = oci_document()
    edited = redact(original, credentials).replace(
        f"pass-phrase: {REDACTED}", "pass-phrase: new-phrase"
    )

    restored = restore(edited, credentials, original)

    assert config_of(restored)["pass-phrase"] == "new-phrase"
    assert config_of(restored)["key-content"] == PEM


def test_an_empty_credential_is_shown_as_it_is():
    shown = redact(oci_document().replace('"open sesame"', "null"), credentials)
    assert config_of(shown)["pass-phrase"] is None


def test_a_credential_shared_through_an_anchor_is_redacted_everywhere_it_is_read():
    text = """\
provisioner:
  definitions:
    - id: a
      driver: aws
      config: &account {region: us-east-1, secret-access-key: &key s3cr3t, access-key-id: AK}
    - id: b
      driver: aws
      config:
        <<: *account
        image: ami-1
"""
    shown = redact(text, credentials)

    assert "s3cr3t" not in shown
    assert config_of(shown, 1)["secret-access-key"] == REDACTED
    assert config_of(restore(shown, credentials, text), 1)["secret-access-key"] == "s3cr3t"


def test_every_value_of_a_driver_not_known_is_redacted():
    text = "provisioner:\n  definitions:\n    - {id: x, driver: gone, config: {a: 1, b: [c]}}\n"
    assert config_of(redact(text, credentials)) == {"a": REDACTED, "b": [REDACTED]}


def test_a_redacted_credential_with_nothing_stored_is_refused_naming_it():
    shown = redact(oci_document(), credentials)
    with pytest.raises(InvalidArgument) as refused:
        restore(shown.replace("id: oracle", "id: other"), credentials, oci_document())
    assert "provisioner.definitions[other].config.key-content" in refused.value.message
