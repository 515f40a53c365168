"""Image references are parsed and normalised the way Docker names images."""

from __future__ import annotations

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_plugins.images.reference import parse_reference

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("alpine", "docker://docker.io/library/alpine:latest"),
        ("alpine:3.19", "docker://docker.io/library/alpine:3.19"),
        ("docker://alpine:latest", "docker://docker.io/library/alpine:latest"),
        ("index.docker.io/library/alpine", "docker://docker.io/library/alpine:latest"),
        ("nvidia/cuda:12.2.0-base", "docker://docker.io/nvidia/cuda:12.2.0-base"),
        ("ghcr.io/org/tool:v1", "docker://ghcr.io/org/tool:v1"),
        ("127.0.0.1:5000/a/b", "docker://127.0.0.1:5000/a/b:latest"),
        ("localhost/app:dev", "docker://localhost/app:dev"),
        (f"alpine@{DIGEST}", f"docker://docker.io/library/alpine@{DIGEST}"),
        (f"quay.io/x/y:1@{DIGEST}", f"docker://quay.io/x/y:1@{DIGEST}"),
        ("oras://127.0.0.1:5000/sif/lolcow:1", "oras://127.0.0.1:5000/sif/lolcow:1"),
    ],
)
def test_references_normalise_to_their_canonical_uri(text: str, canonical: str) -> None:
    assert parse_reference(text).uri() == canonical


def test_digest_reference_asks_the_registry_for_the_digest() -> None:
    assert parse_reference(f"ghcr.io/a/b:1@{DIGEST}").reference == DIGEST


def test_loopback_registries_are_plain_http_and_others_https() -> None:
    assert parse_reference("127.0.0.1:5000/a").api_base == "http://127.0.0.1:5000"
    assert parse_reference("localhost:8080/a").api_base == "http://localhost:8080"
    assert parse_reference("ghcr.io/a/b").api_base == "https://ghcr.io"
    assert parse_reference("alpine").api_base == "https://registry-1.docker.io"


@pytest.mark.parametrize(
    "text", ["", "Alpine", "alpine:bad tag", "alpine@sha256:short", "a//b", "ghcr.io/UPPER/x"]
)
def test_malformed_references_are_invalid_and_name_the_field(text: str) -> None:
    with pytest.raises(InvalidArgument, match=r"^image\.uri: "):
        parse_reference(text)
