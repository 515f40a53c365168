"""Bringing a loaded workflow document into version 4 form, and writing v4 YAML.

Submission, ``fuzzball workflow validate`` and ``fuzzball workflow upgrade`` all read a file
the same way: load it, run ``normalize_document`` (which upgrades v1 and applies the reading
rules every version shares), then validate the result as a v4 model.

v1 differs from v4 in two places: ``requires: [NAME, ...]`` becomes ``depends-on`` entries
with ``status: FINISHED`` (``RUNNING`` for a service: jobs use a service while it serves,
and it serves until they have all ended), and mounts keyed by volume
(``{VOLUME: {location: PATH}}``) are re-keyed by path (``{PATH: {volume: VOLUME}}``), in
jobs, services and ``defaults.job``.
Reading rules for both versions: a ``depends-on`` entry naming a service without a
``status`` waits for it to run (``RUNNING``: ready, when it has a readiness probe), one
naming a job for it to finish (``FINISHED``, the model's default);
``policy.restart: on-node-fault`` is read as ``policy.retry: {on: [node]}`` with a
deprecation warning, ``policy`` on a service is dropped with a warning, a mount given in
Fuzzball v4's short form, the volume's name alone (``/data: data``), is read as
``/data: {volume: data}``, and the five fields Fuzzball's API spells in camelCase (its
swagger's names: ``byCore``, ``decryptionSecret``, ``procsPerNode``, ``exposeTcp``,
``exposeUdp``) are read as the kebab-case names files use.

The functions here never trust the document's shape: anything malformed is left in place
for the typed model to report, so every error is reported once, at its path.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import yaml

SUPPORTED_VERSIONS = ("v1", "v4")
_STEP_SECTIONS = ("jobs", "services")
#: Fields Fuzzball's API (the proto JSON names its swagger shows) spells in camelCase -> the
#: names workflow files and this model use.
API_SPELLINGS = {
    "byCore": "by-core",
    "decryptionSecret": "decryption-secret",
    "procsPerNode": "procs-per-node",
    "exposeTcp": "expose-tcp",
    "exposeUdp": "expose-udp",
}
#: Where those fields sit under a step (and, for memory, under each level of defaults).
_STEP_SPELLING_SPOTS = (("image",), ("resource", "memory"), ("multinode",), ("network",))


@dataclass
class NormalizedDocument:
    """A document in v4 form plus what reading it produced."""

    document: Any
    #: The version the file declared ("v1" or "v4"); None when it declared no usable one.
    source_version: str | None
    warnings: list[str] = field(default_factory=list)
    #: (path, message) problems found while upgrading (before the typed model sees it).
    errors: list[tuple[str, str]] = field(default_factory=list)
    #: v4 path -> the path the user wrote in the v1 file, for error messages.
    path_aliases: dict[str, str] = field(default_factory=dict)

    def written_path(self, path: str) -> str:
        """Translate a v4 field path back to where the user wrote that field."""
        if not self.path_aliases:
            return path
        probe = path
        while probe:
            written = self.path_aliases.get(probe)
            if written is not None:
                return written + path[len(probe) :]
            cut = max(probe.rfind("."), probe.rfind("["))
            probe = probe[:cut] if cut > 0 else ""
        return path


def normalize_document(document: Any) -> NormalizedDocument:
    """Return ``document`` (already loaded) in v4 form; the input is never modified."""
    if not isinstance(document, dict):
        result = NormalizedDocument(document, None)
        result.errors.append(("", "a workflow file is a YAML mapping with version and jobs"))
        return result
    version = document.get("version")
    if version not in SUPPORTED_VERSIONS:
        result = NormalizedDocument(document, None)
        problem = "is required" if version is None else "must be v1 or v4"
        result.errors.append(("version", f"{problem} (v1 files are upgraded to v4)"))
        return result
    result = NormalizedDocument(dict(document), version)
    doc = result.document
    doc["version"] = "v4"
    upgrading = version == "v1"
    services = doc.get("services")
    service_names = set(services) if isinstance(services, dict) else set()
    defaults = doc.get("defaults")
    if isinstance(defaults, dict):
        doc["defaults"] = defaults = dict(defaults)
        _read_short_mounts(defaults, "defaults", result)
        _read_api_spellings(defaults, ("resource", "memory"), "defaults", result)
        if isinstance(defaults.get("job"), dict):
            defaults["job"] = job_defaults = dict(defaults["job"])
            if upgrading:
                _rekey_mounts(job_defaults, "defaults.job", result)
            _read_short_mounts(job_defaults, "defaults.job", result)
            _read_api_spellings(job_defaults, ("resource", "memory"), "defaults.job", result)
            _read_restart(job_defaults, "defaults.job", result)
        if isinstance(defaults.get("service"), dict):
            defaults["service"] = service_defaults = dict(defaults["service"])
            _read_short_mounts(service_defaults, "defaults.service", result)
            _read_api_spellings(
                service_defaults, ("resource", "memory"), "defaults.service", result
            )
    for section in _STEP_SECTIONS:
        steps = doc.get(section)
        if not isinstance(steps, dict):
            continue
        doc[section] = steps = dict(steps)
        for name, step in steps.items():
            if not isinstance(step, dict):
                continue
            steps[name] = step = dict(step)
            path = f"{section}.{name}"
            if upgrading:
                _rekey_mounts(step, path, result)
            _read_short_mounts(step, path, result)
            for spot in _STEP_SPELLING_SPOTS:
                _read_api_spellings(step, spot, path, result)
            _read_requires(step, path, result, upgrading, service_names)
            _read_service_dependencies(step, service_names)
            if section == "services":
                if "policy" in step:
                    del step["policy"]
                    result.warnings.append(
                        f"{path}.policy: services have no execution policy; ignored"
                    )
            else:
                _read_restart(step, path, result)
    _read_uri_spellings(doc, result)
    return result


def _read_api_spellings(
    holder: dict[str, Any], keys: tuple[str, ...], path: str, result: NormalizedDocument
) -> None:
    """Rename the API's camelCase fields in the mapping at ``keys`` under ``holder`` (copied
    on the way down, only when something is renamed)."""
    child = holder.get(keys[0])
    if not isinstance(child, dict):
        return
    at = f"{path}.{keys[0]}"
    if len(keys) > 1:
        inner = child.get(keys[1])
        if isinstance(inner, dict) and any(api in inner for api in API_SPELLINGS):
            holder[keys[0]] = child = dict(child)
            _read_api_spellings(child, keys[1:], at, result)
        return
    if not any(api in child for api in API_SPELLINGS):
        return
    holder[keys[0]] = child = dict(child)
    _rename_api_spellings(child, at, result)


def _rename_api_spellings(mapping: dict[str, Any], at: str, result: NormalizedDocument) -> None:
    for api, name in API_SPELLINGS.items():
        if api not in mapping:
            continue
        value = mapping.pop(api)
        if name in mapping:
            result.errors.append((f"{at}.{api}", f"is {name} again; set it once"))
            continue
        mapping[name] = value
        result.path_aliases[f"{at}.{name}"] = f"{at}.{api}"


def _read_uri_spellings(doc: dict[str, Any], result: NormalizedDocument) -> None:
    """``decryptionSecret`` in volume transfers and image builds (small sections: copied
    whole when one needs renaming)."""
    for section, ends in (("volumes", ("source", "destination")), ("images", ("from",))):
        entries = doc.get(section)
        if not isinstance(entries, dict) or "decryptionSecret" not in repr(entries):
            continue
        doc[section] = entries = copy.deepcopy(entries)
        for name, entry in entries.items():
            if not isinstance(entry, dict):
                continue
            places = [(f"{section}.{name}", entry)]
            if section == "volumes":
                places = [
                    (f"volumes.{name}.{direction}[{index}]", transfer)
                    for direction in ("ingress", "egress")
                    if isinstance(entry.get(direction), list)
                    for index, transfer in enumerate(entry[direction])
                    if isinstance(transfer, dict)
                ]
            for at, place in places:
                for end in ends:
                    if isinstance(place.get(end), dict):
                        _rename_api_spellings(place[end], f"{at}.{end}", result)


def _rekey_mounts(step: dict[str, Any], path: str, result: NormalizedDocument) -> None:
    """v1 ``{VOLUME: {location: PATH}}`` -> v4 ``{PATH: {volume: VOLUME}}``."""
    mounts = step.get("mounts")
    if not isinstance(mounts, dict):
        return
    rekeyed: dict[str, Any] = {}
    for volume, mount in mounts.items():
        written = f"{path}.mounts.{volume}"
        location = mount.get("location") if isinstance(mount, dict) else None
        if not isinstance(location, str) or not location:
            result.errors.append((f"{written}.location", "is required (the path to mount at)"))
            continue
        extra = sorted(k for k in mount if k != "location")
        if extra:
            result.errors.append((f"{written}.{extra[0]}", "unknown field"))
            continue
        if location in rekeyed:
            other = rekeyed[location]["volume"]
            result.errors.append(
                (f"{written}.location", f"{location} is already the mount point of volume {other}")
            )
            continue
        rekeyed[location] = {"volume": volume}
        result.path_aliases[f"{path}.mounts.{location}.volume"] = written
        result.path_aliases[f"{path}.mounts.{location}"] = written
    step["mounts"] = rekeyed


def _read_short_mounts(holder: dict[str, Any], path: str, result: NormalizedDocument) -> None:
    """v4's short form ``{PATH: VOLUME}`` -> ``{PATH: {volume: VOLUME}}``."""
    mounts = holder.get("mounts")
    if not isinstance(mounts, dict) or not any(isinstance(m, str) for m in mounts.values()):
        return
    holder["mounts"] = {
        location: {"volume": mount} if isinstance(mount, str) else mount
        for location, mount in mounts.items()
    }
    for location, mount in mounts.items():
        if isinstance(mount, str):  # errors about the volume point at what the user wrote
            result.path_aliases[f"{path}.mounts.{location}.volume"] = f"{path}.mounts.{location}"


def _read_requires(
    step: dict[str, Any],
    path: str,
    result: NormalizedDocument,
    upgrading: bool,
    service_names: set[str],
) -> None:
    """``requires: [NAME]`` -> ``depends-on: [{name: NAME, status: FINISHED}]``, or
    ``status: RUNNING`` where NAME is a service (one serves until every job has ended, so
    waiting for it to finish would keep the step waiting for ever)."""
    if "requires" not in step:
        return
    requires = step.pop("requires")
    if requires is None:
        return
    if "depends-on" in step:
        result.warnings.append(f"{path}.requires: ignored because depends-on is set")
        return
    if not isinstance(requires, list):
        result.errors.append((f"{path}.requires", "must be a list of job or service names"))
        return
    if not upgrading:
        result.warnings.append(
            f"{path}.requires: deprecated, read as depends-on "
            "(FINISHED for a job, RUNNING for a service)"
        )
    dependencies: list[dict[str, str]] = []
    for index, name in enumerate(requires):
        if not isinstance(name, str):
            result.errors.append((f"{path}.requires[{index}]", "must be a job or service name"))
            continue
        written = f"{path}.requires[{index}]"
        result.path_aliases[f"{path}.depends-on[{len(dependencies)}]"] = written
        result.path_aliases[f"{path}.depends-on[{len(dependencies)}].name"] = written
        status = "RUNNING" if name in service_names else "FINISHED"
        dependencies.append({"name": name, "status": status})
    step["depends-on"] = dependencies


def _read_service_dependencies(step: dict[str, Any], service_names: set[str]) -> None:
    """A ``depends-on`` entry naming a service without a ``status`` -> ``status: RUNNING``
    (a new list: the input is never modified): a job uses a service while it serves."""
    dependencies = step.get("depends-on")
    if not isinstance(dependencies, list) or not service_names:
        return
    step["depends-on"] = [
        {**entry, "status": "RUNNING"}
        if isinstance(entry, dict)
        and "status" not in entry
        and isinstance(entry.get("name"), str)
        and entry["name"] in service_names
        else entry
        for entry in dependencies
    ]


def _read_restart(step: dict[str, Any], path: str, result: NormalizedDocument) -> None:
    """``policy.restart: on-node-fault`` -> ``policy.retry: {on: [node]}``, with a warning."""
    policy = step.get("policy")
    if not isinstance(policy, dict) or "restart" not in policy or "retry" in policy:
        return  # both set is an error the model reports; anything malformed too
    restart = policy["restart"]
    if not isinstance(restart, str) or restart.strip().lower() != "on-node-fault":
        return
    policy = {k: v for k, v in policy.items() if k != "restart"}
    policy["retry"] = {"on": ["node"]}
    step["policy"] = policy
    result.path_aliases[f"{path}.policy.retry"] = f"{path}.policy.restart"
    result.warnings.append(f"{path}.policy.restart: deprecated, read as retry: {{on: [node]}}")


class _WorkflowDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Writes scripts and other multi-line text as literal blocks, keys in model order.

    libyaml's emitter where PyYAML was built with it (the same output; the pure-Python one
    was 0.47 of the 0.57 ms that rendering a submitted hello-world as v4 took)."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_WorkflowDumper.add_representer(str, _represent_text)


def dump_yaml(data: dict[str, Any]) -> str:
    """Write plain data as block-style YAML, keeping key order and multi-line text readable."""
    return yaml.dump(
        data,
        Dumper=_WorkflowDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )
