"""The image backends' registry settings: mirrors first, then the registry itself."""

from __future__ import annotations

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_plugins.images.reference import parse_reference
from fuzzball_plugins.images.settings import ImageSettings


def test_mirrors_come_first_then_the_registry_over_https() -> None:
    settings = ImageSettings.from_config(
        {"registries": {"docker.io": {"mirrors": ["http://127.0.0.1:5000/"]}}}
    )
    endpoints = settings.endpoints_for(parse_reference("docker://alpine:latest"))
    assert endpoints[0] == "http://127.0.0.1:5000"
    assert endpoints[1].startswith("https://")


def test_an_insecure_registry_is_reached_over_plain_http() -> None:
    settings = ImageSettings.from_config({"registries": {"registry.lab:5000": {"insecure": True}}})
    endpoints = settings.endpoints_for(parse_reference("docker://registry.lab:5000/tools:1"))
    assert endpoints == ["http://registry.lab:5000"]


def test_other_registries_stay_on_https() -> None:
    settings = ImageSettings.from_config({"registries": {"registry.lab:5000": {"insecure": True}}})
    endpoints = settings.endpoints_for(parse_reference("docker://quay.io/org/tool:1"))
    assert endpoints == ["https://quay.io"]


def test_insecure_must_be_a_boolean() -> None:
    with pytest.raises(InvalidArgument, match=r"registries\.registry\.lab\.insecure"):
        ImageSettings.from_config({"registries": {"registry.lab": {"insecure": "yes"}}})
