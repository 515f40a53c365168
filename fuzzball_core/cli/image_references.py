"""A workflow file's image references, checked offline by the image backends that would pin
them (``fuzzball workflow validate``): ``docker://Alpine:latest`` is refused here, naming its
field, as the server refuses it at submission, without asking any registry."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from fuzzball_core.drivers import IMAGE_BACKENDS
from fuzzball_core.errors import FuzzballError
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.spec.models import Workflow

GROUP = IMAGE_BACKENDS

Violations = list[tuple[str, str]]


def image_reference_validator(
    registry: PluginRegistry, images_config: dict[str, Any]
) -> Callable[[Workflow], Violations]:
    """A validator of a parsed workflow's image URIs: (field, problem) for each that the
    backend of its scheme refuses (a scheme no backend serves is the server's to refuse)."""
    backends: dict[str, Any] = {}

    def backend(scheme: str) -> Any:
        if scheme not in backends:
            found = registry.find(GROUP, scheme)
            backends[scheme] = registry.driver(GROUP, scheme, images_config) if found else None
        return backends[scheme]

    def validate(model: Workflow) -> Violations:
        violations: Violations = []
        for field, uri in _image_uris(model):
            checker = backend(uri.partition("://")[0].lower())
            if checker is None:
                continue
            try:
                checker.check_reference(uri)
            except FuzzballError as exc:
                # the backend names the field as a submission's image.uri: the path says it
                violations.append((field, exc.message.removeprefix("image.uri: ")))
        return violations

    return validate


def _image_uris(model: Workflow) -> Iterator[tuple[str, str]]:
    """(field, URI) of every job's and service's image, and every build's base."""
    for kind, steps in (("jobs", model.jobs), ("services", model.services)):
        for name, step in (steps or {}).items():
            yield f"{kind}.{name}.image.uri", step.image.uri
    for name, build in (model.images or {}).items():
        yield f"images.{name}.from.uri", build.from_.uri
