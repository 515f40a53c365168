"""Rules that relate one part of a workflow to another.

These run on the normalized (v4-shaped) document rather than on the typed model, so they are
reported together with every field error even when other parts of the file are malformed:
anything of the wrong shape is skipped here because the model reports it.

Checked: at least one job or service; jobs and services do not share names; every dependency
names a job or service, ``RUNNING`` dependencies name services, and dependencies form no
cycle; every mount names a declared volume; every step's (and built image's) ``files`` entry
puts at an absolute path either a declared top-level file (``file://NAME``) or its content
written inline; workflow-built images are not built from each other in a cycle; every
endpoint proxies to a declared port and endpoint names are unique; no image, ingress or egress
URI carries credentials (``user:password@``), which would be stored and shown with the
workflow.
Warned: nameless persistent volume references (and ``use: persistent`` without a name),
``policy.retry`` without ``on``, and a volume's egress that can never run because a service
mounting it serves until the workflow is stopped (``persist: true``, or a workflow of
services alone), and a stop cancels egress.
Cycle detection is linear in the number of steps and dependencies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from fuzzball_core.spec.names import dns_label

Violation = tuple[str, str]
_BUILT_IMAGE_SCHEMES = ("fuzzball://", "fb://")
#: how a step's ``files`` entry names one of the workflow's top-level ``files``
FILE_SCHEME = "file://"


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def check_references(document: dict[str, Any]) -> tuple[list[Violation], list[str]]:
    """Return (errors, warnings) for the cross-references of a normalized document."""
    errors: list[Violation] = []
    warnings: list[str] = []
    jobs = _mapping(document.get("jobs"))
    services = _mapping(document.get("services"))
    volumes = _mapping(document.get("volumes"))
    if not jobs and not services:
        errors.append(("jobs", "a workflow needs at least one job or service"))
    for name in services:
        if name in jobs:
            errors.append((f"services.{name}", f"a job is also named {name}"))

    _check_volumes(volumes, warnings)
    all_defaults = _mapping(document.get("defaults"))
    _check_mounts(all_defaults.get("mounts"), "defaults", volumes, errors)
    _check_mounts(
        _mapping(all_defaults.get("service")).get("mounts"), "defaults.service", volumes, errors
    )
    defaults = _mapping(all_defaults.get("job"))
    _check_mounts(defaults.get("mounts"), "defaults.job", volumes, errors)
    workflow_files = _mapping(document.get("files"))
    _check_retry(defaults.get("policy"), "defaults.job", warnings)

    step_kinds = {name: "jobs" for name in jobs}
    step_kinds.update({name: "services" for name in services if name not in jobs})
    dependencies: dict[str, list[tuple[int, str]]] = {}
    for section, steps in (("jobs", jobs), ("services", services)):
        for name, step in steps.items():
            if not isinstance(step, dict):
                continue
            path = f"{section}.{name}"
            _check_mounts(step.get("mounts"), path, volumes, errors)
            _check_step_files(step.get("files"), path, workflow_files, errors)
            if section == "jobs":
                _check_retry(step.get("policy"), path, warnings)
            else:
                _check_endpoints(step, path, errors, warnings)
            if section == "services" and name in jobs:
                continue  # already an error; keep the dependency graph keyed by unique names
            dependencies[f"{section}.{name}"] = _step_dependencies(
                step, path, step_kinds, services, errors
            )
    for cycle in find_cycles(dependencies):
        first, second = cycle[0], cycle[1]
        index = next(i for i, target in dependencies[first] if target == second)
        chain = " -> ".join(cycle)
        errors.append((f"{first}.depends-on[{index}].name", f"dependency cycle: {chain}"))

    for name, image in _mapping(document.get("images")).items():
        _check_step_files(_mapping(image).get("files"), f"images.{name}", workflow_files, errors)
    errors.extend(_check_image_builds(_mapping(document.get("images"))))
    errors.extend(_check_image_credentials(document))
    errors.extend(_check_transfer_credentials(_mapping(document.get("volumes"))))
    _check_unique_endpoint_names(services, errors)
    _check_host_names(services, errors)
    _check_egress_behind_services(volumes, services, all_defaults, bool(jobs), warnings)
    return errors, warnings


#: what follows ``@`` in a reference pinned by digest (``alpine@sha256:HEX``): the digest, not
#: a host after credentials
_DIGEST = re.compile(r"[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-fA-F]{32,}")
_CREDENTIALS = (
    "the URI carries credentials (user[:password]@ before the registry); remove them: a"
    " workflow's image URIs are stored and shown with it"
)
_TRANSFER_CREDENTIALS = (
    "the URI carries credentials (user[:password]@ before the host); remove them and name a"
    " secret in 'secret' instead: a workflow's transfer URIs are stored and shown with it"
)


def has_credentials(uri: str) -> bool:
    """Whether a URI names credentials in its authority (``docker://user:pw@host/x``),
    as opposed to a digest (``docker://alpine@sha256:...``)."""
    _, separator, rest = uri.partition("://")
    authority = rest.split("/", 1)[0] if separator else ""
    _, at, after = authority.rpartition("@")
    return bool(at) and not _DIGEST.fullmatch(after)


def _check_image_credentials(document: dict[str, Any]) -> list[Violation]:
    """Every image URI that carries credentials, by its field path; the value is never
    repeated (the password would be in the error, and the error in logs and replies)."""
    images: list[tuple[str, Any]] = []
    for section in ("jobs", "services"):
        for name, step in _mapping(document.get(section)).items():
            images.append((f"{section}.{name}.image", _mapping(step).get("image")))
    defaults = _mapping(document.get("defaults"))
    for kind in ("job", "service"):
        images.append((f"defaults.{kind}.image", _mapping(defaults.get(kind)).get("image")))
    for name, build in _mapping(document.get("images")).items():
        images.append((f"images.{name}.from", _mapping(build).get("from")))
    return [
        (f"{path}.uri", _CREDENTIALS)
        for path, image in images
        if isinstance(uri := _mapping(image).get("uri"), str) and has_credentials(uri)
    ]


def _check_transfer_credentials(volumes: dict[str, Any]) -> list[Violation]:
    """Every ingress or egress URI that carries credentials, by its field path; the value
    is never repeated. A transfer's credentials belong in a secret (``secret:``)."""
    errors: list[Violation] = []
    for name, volume in volumes.items():
        for direction in ("ingress", "egress"):
            transfers = _mapping(volume).get(direction)
            for index, transfer in enumerate(transfers if isinstance(transfers, list) else []):
                for end in ("source", "destination"):
                    uri = _mapping(_mapping(transfer).get(end)).get("uri")
                    if isinstance(uri, str) and has_credentials(uri):
                        path = f"volumes.{name}.{direction}[{index}].{end}.uri"
                        errors.append((path, _TRANSFER_CREDENTIALS))
    return errors


def _check_volumes(volumes: dict[str, Any], warnings: list[str]) -> None:
    for name, volume in volumes.items():
        volume = _mapping(volume)
        reference = volume.get("reference")
        if reference is None and volume.get("use") == "persistent" and not volume.get("name"):
            warnings.append(
                f"volumes.{name}.use: persistent without a name resolves to the default "
                "persistent volume; name it (name: NAME)"
            )
        named = volume.get("name")
        # v1's name is a copy of the key; only v4's use: persistent (or a name alone) reads it
        kind_given = reference is not None or volume.get("type") is not None or volume.get("use")
        if (
            kind_given
            and named is not None
            and str(named) != name
            and volume.get("use") != "persistent"
        ):
            warnings.append(
                f"volumes.{name}.name: ignored; the key names the volume, and its "
                f"{'reference' if reference is not None else 'type or use'} says which it is"
            )
        if not isinstance(reference, str):
            continue
        parts = [p for p in reference.removeprefix("volume://").split("/") if p]
        if reference.startswith("volume://") and parts[1:] == ["persistent"]:
            warnings.append(
                f"volumes.{name}.reference: nameless persistent reference resolves to the "
                f"default persistent volume; name it, e.g. volume://{parts[0]}/persistent/NAME"
            )


def _check_egress_behind_services(
    volumes: dict[str, Any],
    services: dict[str, Any],
    defaults: dict[str, Any],
    has_jobs: bool,
    warnings: list[str],
) -> None:
    """Warn of each volume's egress that waits for a service serving until the workflow is
    stopped: the stop cancels the egress, so its files would never be sent."""
    sent = {name for name, volume in volumes.items() if _list(_mapping(volume).get("egress"))}
    if not sent:
        return
    # what a service inherits, as fuzzball_core.spec.defaults.service_defaults merges it
    inherited = {
        **_mapping(defaults.get("mounts")),
        **_mapping(_mapping(defaults.get("job")).get("mounts")),
        **_mapping(_mapping(defaults.get("service")).get("mounts")),
    }
    for name, service in services.items():
        service = _mapping(service)
        # the document keeps scalars as written: YAML true may still be text here
        if has_jobs and str(service.get("persist")).lower() != "true":
            continue  # stopped once the jobs end, then the egress runs
        mounts = {**inherited, **_mapping(service.get("mounts"))}
        for volume in dict.fromkeys(_mapping(m).get("volume") for m in mounts.values()):
            if volume in sent:
                why = "persist: true" if has_jobs else "a workflow of services alone"
                warnings.append(
                    f"volumes.{volume}.egress: never runs: services.{name} mounts the volume and"
                    f" serves until the workflow is stopped ({why}), and stopping a workflow"
                    " cancels its egress; mount the volume only in steps that end"
                )


def _check_mounts(mounts: Any, path: str, volumes: dict[str, Any], errors: list[Violation]) -> None:
    for location, mount in _mapping(mounts).items():
        volume = _mapping(mount).get("volume")
        if isinstance(volume, str) and volume and volume not in volumes:
            errors.append(
                (f"{path}.mounts.{location}.volume", f"volume {volume} is not declared in volumes")
            )


def _check_step_files(
    files: Any, path: str, workflow_files: dict[str, Any], errors: list[Violation]
) -> None:
    for location, source in _mapping(files).items():
        field = f"{path}.files.{location}"
        if not location.startswith("/"):
            errors.append((field, "the path in the container must be absolute"))
        if not isinstance(source, str) or not source.startswith(FILE_SCHEME):
            continue  # the file's content, written inline
        name = source.removeprefix(FILE_SCHEME)
        if not name:
            errors.append((field, f"must name a top-level file as {FILE_SCHEME}NAME"))
        elif name not in workflow_files:
            errors.append((field, f"file {name} is not declared in files"))


def step_file_contents(
    files: Mapping[str, str] | None, workflow_files: Mapping[str, str] | None
) -> dict[str, str]:
    """What each of a step's ``files`` entries puts at its path: the top-level file a
    ``file://NAME`` entry names (checked when the workflow was read), or the entry itself,
    which is the content written inline."""
    available = workflow_files or {}
    return {
        path: available[source.removeprefix(FILE_SCHEME)]
        if source.startswith(FILE_SCHEME)
        else source
        for path, source in (files or {}).items()
    }


def _check_retry(policy: Any, path: str, warnings: list[str]) -> None:
    retry = _mapping(policy).get("retry")
    if isinstance(retry, dict) and not retry.get("on"):
        warnings.append(
            f"{path}.policy.retry.on: not set, so nothing is retried; "
            "list node and/or exit codes to retry on"
        )


def _step_dependencies(
    step: dict[str, Any],
    path: str,
    step_kinds: dict[str, str],
    services: dict[str, Any],
    errors: list[Violation],
) -> list[tuple[int, str]]:
    """Check ``depends-on`` and return (index, "section.name") for each valid entry."""
    found: list[tuple[int, str]] = []
    for index, dependency in enumerate(_list(step.get("depends-on"))):
        if not isinstance(dependency, dict):
            continue
        name = dependency.get("name")
        if not isinstance(name, str) or not name:
            continue
        section = step_kinds.get(name)
        if section is None:
            errors.append(
                (f"{path}.depends-on[{index}].name", f"no job or service is named {name}")
            )
            continue
        status = dependency.get("status")
        if isinstance(status, str) and status.upper() == "RUNNING" and name not in services:
            errors.append(
                (f"{path}.depends-on[{index}].status", "RUNNING applies to services only")
            )
        found.append((index, f"{section}.{name}"))
    return found


def find_cycles(graph: dict[str, list[tuple[int, str]]]) -> list[list[str]]:
    """Return cycles of ``graph`` (node -> [(index, node it depends on)]), each closed.

    Kahn's algorithm removes every node that is not on or behind a cycle; from what remains,
    following any remaining dependency must return to a node already seen, which closes a
    cycle. Each node is visited a bounded number of times, so this is O(nodes + edges).
    A cycle is written in dependency order and repeats its first node at the end:
    ``["jobs.a", "jobs.b", "jobs.a"]`` means a depends on b, which depends on a.
    """
    pending = {node: len({target for _, target in targets}) for node, targets in graph.items()}
    dependents: dict[str, list[str]] = {node: [] for node in graph}
    for node, targets in graph.items():
        for target in {target for _, target in targets}:
            dependents.setdefault(target, []).append(node)
            pending.setdefault(target, 0)
    ready = [node for node, count in pending.items() if count == 0]
    while ready:
        node = ready.pop()
        for dependent in dependents.get(node, ()):
            pending[dependent] -= 1
            if pending[dependent] == 0:
                ready.append(dependent)
    remaining = {node for node, count in pending.items() if count > 0}
    cycles: list[list[str]] = []
    visited: set[str] = set()
    for start in _in_order(graph, remaining):
        if start in visited:
            continue
        walk: list[str] = []
        position: dict[str, int] = {}
        node = start
        while node not in position and node not in visited:
            position[node] = len(walk)
            walk.append(node)
            node = next(t for _, t in graph.get(node, []) if t in remaining)
        visited.update(walk)
        if node in position:  # a new cycle, not a path into one already reported
            cycle = walk[position[node] :]
            cycles.append([*cycle, cycle[0]])
    return cycles


def _in_order(graph: dict[str, Any], nodes: set[str]) -> Iterable[str]:
    return (node for node in graph if node in nodes)


def built_image_name(uri: Any, images: dict[str, Any]) -> str | None:
    """The ``images`` key a ``fuzzball://SCOPE/NAME`` URI refers to, if the workflow builds it."""
    if not isinstance(uri, str) or not uri.startswith(_BUILT_IMAGE_SCHEMES):
        return None
    scope, _, name = uri.split("://", 1)[1].partition("/")
    image = images.get(name)
    if not isinstance(image, dict):
        return None
    declared = image.get("scope")
    declared_scope = declared.lower() if isinstance(declared, str) else "user"
    return name if scope == declared_scope else None


def _check_image_builds(images: dict[str, Any]) -> list[Violation]:
    graph: dict[str, list[tuple[int, str]]] = {}
    for name, image in images.items():
        source = _mapping(_mapping(image).get("from")).get("uri")
        parent = built_image_name(source, images)
        graph[f"images.{name}"] = [(0, f"images.{parent}")] if parent is not None else []
    return [
        (f"{cycle[0]}.from.uri", f"image build cycle: {' -> '.join(cycle)}")
        for cycle in find_cycles(graph)
    ]


def _check_endpoints(
    service: dict[str, Any], path: str, errors: list[Violation], warnings: list[str]
) -> None:
    network = _mapping(service.get("network"))
    ports: dict[str, tuple[int, Any]] = {}
    for index, port in enumerate(_list(network.get("ports"))):
        name = _mapping(port).get("name")
        if not isinstance(name, str):
            continue
        if name in ports:
            errors.append(
                (
                    f"{path}.network.ports[{index}].name",
                    f"port name {name} is already given to network.ports[{ports[name][0]}]",
                )
            )
        else:
            ports[name] = (index, _mapping(port).get("protocol"))
    endpoints = _list(network.get("endpoints"))
    for index, endpoint in enumerate(endpoints):
        port_name = _mapping(endpoint).get("port-name")
        if not isinstance(port_name, str) or not port_name:
            continue
        where = f"{path}.network.endpoints[{index}].port-name"
        if port_name not in ports:
            errors.append((where, f"no port named {port_name} in network.ports"))
        elif str(ports[port_name][1]).lower() == "udp":
            errors.append((where, f"port {port_name} is udp; an endpoint proxies TCP streams"))
    scale = _mapping(service.get("scale"))
    if str(scale.get("min")) == "0" and not endpoints:
        errors.append(
            (
                f"{path}.scale.min",
                "0 starts the service on the first request to one of its endpoints, and it "
                "declares none (network.endpoints), so it would never start",
            )
        )
    if scale.get("idle-timeout") is not None and str(scale.get("min")) != "0":
        warnings.append(
            f"{path}.scale.idle-timeout: has no effect unless scale.min is 0 (a service scaled "
            "to zero stops after this long without a request)"
        )


def _check_host_names(services: dict[str, Any], errors: list[Violation]) -> None:
    """Services reach each other by name (and its DNS label, :func:`dns_label`): two whose
    names give one host name would each hide the other."""
    taken: dict[str, str] = {}
    for name in services:
        for host in dict.fromkeys((name, dns_label(name))):
            if host in taken and taken[host] != name:
                errors.append(
                    (
                        f"services.{name}",
                        f"answers to host name {host}, as services.{taken[host]} does; "
                        "rename one of them",
                    )
                )
                break
            taken[host] = name


def _check_unique_endpoint_names(services: dict[str, Any], errors: list[Violation]) -> None:
    seen: dict[str, str] = {}
    for name, service in services.items():
        network = _mapping(_mapping(service).get("network"))
        for index, endpoint in enumerate(_list(network.get("endpoints"))):
            endpoint_name = _mapping(endpoint).get("name")
            if not isinstance(endpoint_name, str):
                continue
            path = f"services.{name}.network.endpoints[{index}].name"
            if endpoint_name in seen:
                errors.append(
                    (path, f"endpoint {endpoint_name} is already declared at {seen[endpoint_name]}")
                )
            else:
                seen[endpoint_name] = path
