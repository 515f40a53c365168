"""The image backends' settings: mirrors first, then the registry itself; the retry schedule;
what a backend that stores no images says."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzzball_core.errors import FailedPrecondition, InvalidArgument
from fuzzball_core.plugins import get_registry
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


def test_retries_follow_the_default_schedule_when_the_configuration_is_silent() -> None:
    settings = ImageSettings.from_config({})
    assert list(settings.retry.delays()) == [0.25, 0.5, 1.0, 2.0, 4.0]


def test_the_retry_setting_shapes_the_schedule() -> None:
    settings = ImageSettings.from_config(
        {"retry": {"attempts": 5, "initial-delay": 1, "max-delay": 3}}
    )
    assert list(settings.retry.delays()) == [1.0, 2.0, 3.0, 3.0]


def test_a_retry_setting_that_makes_no_schedule_is_refused() -> None:
    with pytest.raises(InvalidArgument, match=r"^retry: "):
        ImageSettings.from_config({"retry": {"initial-delay": 10, "max-delay": 1}})


def test_backends_retry_on_their_configured_schedule() -> None:
    backend = get_registry().driver("fuzzball.image_backends", "docker", {"retry": {"attempts": 2}})
    assert list(backend.retry.delays()) == [0.25]


def test_registry_backends_store_no_images() -> None:
    backend = get_registry().driver("fuzzball.image_backends", "docker", {})
    assert backend.store_unavailable() == "the docker image backend stores no images"
    with pytest.raises(FailedPrecondition, match="stores no images"):
        backend.store({"scope": "user", "name": "x"}, Path("/nonexistent"))
