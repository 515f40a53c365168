"""The fingerprint that tells registry credentials apart in the pin and authorization caches."""

from fuzzball_core.credentials_fingerprints import credentials_fingerprint

SECRET = {"username": "alice", "password": "s3cret-Pa55"}


def test_no_credentials_have_the_empty_fingerprint() -> None:
    assert credentials_fingerprint({}) == ""


def test_the_same_credentials_in_any_order_have_one_fingerprint() -> None:
    reordered = {"password": "s3cret-Pa55", "username": "alice"}
    assert credentials_fingerprint(SECRET) == credentials_fingerprint(reordered)


def test_another_password_or_user_has_another_fingerprint() -> None:
    fingerprints = {
        credentials_fingerprint(SECRET),
        credentials_fingerprint({**SECRET, "password": "s3cret-Pa56"}),
        credentials_fingerprint({**SECRET, "username": "bob"}),
        credentials_fingerprint({"username": "alice=password", "password": "s3cret-Pa55"}),
    }
    assert len(fingerprints) == 4 and "" not in fingerprints


def test_the_fingerprint_holds_no_credential_in_the_clear() -> None:
    fingerprint = credentials_fingerprint(SECRET)
    assert "alice" not in fingerprint and "s3cret" not in fingerprint
    assert len(fingerprint) == 64  # an HMAC-SHA256 in hex
