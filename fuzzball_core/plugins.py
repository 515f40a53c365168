"""Finding and loading plugins: stevedore for named drivers, pluggy for hooks.

Everything pluggable is found through entry points, builtins included (they are declared in
this project's ``setup.py`` exactly as a site's package declares its own):

* drivers, one chosen by name: ``fuzzball.schedulers``, ``fuzzball.provisioners``,
  ``fuzzball.image_backends``, ``fuzzball.routers`` — loaded with stevedore's
  ``DriverManager`` and checked against their interface in :mod:`fuzzball_core.drivers`;
* hook implementations, all called: ``fuzzball.plugins`` — registered into one pluggy
  ``PluginManager`` against :mod:`fuzzball_core.hookspecs`.

A plugin that fails to import, or whose hook implementations do not match the specs, does not
stop discovery: it is recorded as broken with its distribution, entry point and error. Whether
that is fatal is the caller's decision: :meth:`PluginRegistry.require` raises
:class:`PluginLoadError` for a plugin the process needs.

Hook plugins are imported at discovery (every one is called). Drivers are listed from their
entry points without importing them, and each is imported and checked against its interface
the first time it is looked at (:meth:`PluginRegistry.find`, ``require``, ``driver``), or all at
once for a listing (:attr:`PluginRegistry.records`, ``broken``): a process imports the drivers
it uses, not every provisioner's cloud SDK (boto3, google-cloud, oci) at its start.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pluggy
from stevedore import DriverManager, ExtensionManager
from stevedore.exception import MultipleMatches, NoMatches

from fuzzball_core import hookspecs
from fuzzball_core.drivers import DRIVER_INTERFACES
from fuzzball_core.errors import FailedPrecondition

log = logging.getLogger(__name__)

HOOK_GROUP = "fuzzball.plugins"
DRIVER_GROUPS: tuple[str, ...] = tuple(DRIVER_INTERFACES)

#: short kind names used in listings and messages
KIND_OF_GROUP: dict[str, str] = {
    "fuzzball.schedulers": "scheduler",
    "fuzzball.provisioners": "provisioner",
    "fuzzball.image_backends": "image_backend",
    "fuzzball.routers": "router",
    "fuzzball.storage_drivers": "storage_driver",
    HOOK_GROUP: "hooks",
}


class PluginLoadError(FailedPrecondition):
    """A plugin the process needs is missing, ambiguous or could not be loaded."""

    @classmethod
    def for_record(cls, record: PluginRecord) -> PluginLoadError:
        """The error for a broken plugin: its name, kind, entry point, distribution, error."""
        return cls(
            f"plugin {record.name!r} ({record.kind}, entry point {record.group}:"
            f" {record.name} = {record.value}, distribution {record.distribution}"
            f" {record.version}) cannot be loaded: {record.error}"
        )


@dataclass
class PluginRecord:
    """One entry point as discovery found it."""

    group: str
    name: str
    value: str
    distribution: str
    version: str
    error: str | None = None
    hooks: list[str] = field(default_factory=list)
    #: a driver's entry point not imported yet (None once checked, and for hook plugins)
    unchecked: importlib.metadata.EntryPoint | None = field(default=None, repr=False, compare=False)

    @property
    def kind(self) -> str:
        return KIND_OF_GROUP[self.group]

    @property
    def status(self) -> str:
        return "broken" if self.error else "ok"

    def to_dict(self) -> dict[str, Any]:
        """The record as listed by ``fuzzball plugin list -o json``."""
        data: dict[str, Any] = {
            "name": self.name,
            "entryPoint": self.value,
            "distribution": self.distribution,
            "version": self.version,
            "status": self.status,
        }
        if self.group == HOOK_GROUP:
            data["hooks"] = list(self.hooks)
        if self.error:
            data["error"] = self.error
        return data


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _distribution_index(groups: Iterable[str]) -> dict[tuple[str, str, str], tuple[str, str]]:
    """Map (group, name, value) of every entry point in ``groups`` to (distribution, version)."""
    wanted = set(groups)
    index: dict[tuple[str, str, str], tuple[str, str]] = {}
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group in wanted:
                key = (ep.group, ep.name, ep.value)
                index.setdefault(key, (dist.metadata["Name"] or "?", dist.version or "?"))
    return index


class PluginRegistry:
    """Every plugin installed in this Python environment, loaded once.

    ``disabled`` names hook plugins to leave out (the configuration's ``plugins.disable``).
    """

    def __init__(self, *, disabled: Iterable[str] = ()) -> None:
        self._disabled = set(disabled)
        self._dists = _distribution_index((*DRIVER_GROUPS, HOOK_GROUP))
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self._records: list[PluginRecord] = []
        for group in DRIVER_GROUPS:
            self._discover_drivers(group)
        self._discover_hooks()

    @property
    def records(self) -> list[PluginRecord]:
        """Every plugin found, each driver imported and checked (a listing's view)."""
        for record in self._records:
            self._check(record)
        return self._records

    # -- discovery -------------------------------------------------------------------------------

    def _record(self, group: str, name: str, value: str) -> PluginRecord:
        dist, version = self._dists.get((group, name, value), ("?", "?"))
        record = PluginRecord(group, name, value, dist, version)
        self._records.append(record)
        return record

    def _extensions(self, group: str) -> tuple[ExtensionManager, dict[str, PluginRecord]]:
        failed: dict[str, PluginRecord] = {}

        def on_failure(_manager: Any, entry_point: Any, exc: BaseException) -> None:
            record = self._record(group, entry_point.name, entry_point.value)
            record.error = _describe(exc)
            failed[entry_point.name] = record

        manager = ExtensionManager(
            namespace=group,
            invoke_on_load=False,
            on_load_failure_callback=on_failure,
        )
        return manager, failed

    def _discover_drivers(self, group: str) -> None:
        """Record ``group``'s entry points, imported later by :meth:`_check`."""
        seen: set[tuple[str, str]] = set()
        for entry_point in importlib.metadata.entry_points(group=group):
            # the same entry point found twice on the path (a package installed and also
            # present as '.') is one plugin, as stevedore counts them
            if (entry_point.name, entry_point.value) in seen:
                continue
            seen.add((entry_point.name, entry_point.value))
            self._record(group, entry_point.name, entry_point.value).unchecked = entry_point

    def _check(self, record: PluginRecord) -> PluginRecord:
        """Import a driver's entry point once, recording why it is broken if it is."""
        entry_point, record.unchecked = record.unchecked, None
        if entry_point is None:
            return record
        interface = DRIVER_INTERFACES[record.group]
        try:
            plugin = entry_point.load()
        except Exception as exc:  # an import error of any kind: the plugin is broken
            record.error = _describe(exc)
            return record
        if not (inspect.isclass(plugin) and issubclass(plugin, interface)):
            record.error = (
                f"{record.value} is not a subclass of {interface.__module__}.{interface.__name__}"
            )
        return record

    def _discover_hooks(self) -> None:
        manager, _failed = self._extensions(HOOK_GROUP)
        for ext in manager.extensions:
            record = self._record(HOOK_GROUP, ext.name, ext.entry_point.value)
            if ext.name in self._disabled:
                record.error = "disabled by configuration (plugins.disable)"
                continue
            record.error = self._register_hooks(ext.name, ext.plugin, record)
        self._warn_disabled_unknown()

    def _warn_disabled_unknown(self) -> None:
        """Warn of each ``plugins.disable`` name no hook plugin here has: it leaves nothing
        out (not refused: one configuration may serve hosts with other plugins installed;
        a driver is chosen in its own section, never disabled)."""
        hooks = sorted({r.name for r in self._records if r.group == HOOK_GROUP})
        drivers = {r.name for r in self._records if r.group != HOOK_GROUP}
        for name in sorted(self._disabled.difference(hooks)):
            why = (
                "it is a driver's name; drivers are chosen in their own section"
                if name in drivers
                else f"no hook plugin of that name is installed ({', '.join(hooks) or 'none'})"
            )
            log.warning("plugins.disable: %r has no effect here: %s", name, why)

    def _register_hooks(self, name: str, plugin: Any, record: PluginRecord) -> str | None:
        """Register one hook plugin; return why it is broken, or None."""
        try:
            self.pm.register(plugin, name=name)
        except Exception as exc:  # pluggy raises PluginValidationError, or ValueError on dupes
            return _describe(exc)
        callers = self.pm.get_hookcallers(plugin) or []
        impls = [caller.name for caller in callers]
        unknown = [caller.name for caller in callers if not caller.has_spec()]
        if unknown:
            self.pm.unregister(plugin)
            return f"implements unknown hook(s) {', '.join(sorted(unknown))}"
        if not impls:
            self.pm.unregister(plugin)
            return "implements no fuzzball hook (decorate functions with fuzzball_core.hookimpl)"
        record.hooks = sorted(impls)
        return None

    # -- use ------------------------------------------------------------------------------------

    def workflow_validators(self, source: str) -> list[Callable[[Any], list[tuple[str, str]]]]:
        """The ``fuzzball_validate_workflow`` hook as validators for ``parse_workflow``."""
        hook = self.pm.hook.fuzzball_validate_workflow

        def validate(model: Any) -> list[tuple[str, str]]:
            results = hook(workflow=model, source=source)
            return [
                (str(path), str(message)) for result in results for path, message in (result or [])
            ]

        return [validate] if hook.get_hookimpls() else []

    @property
    def hook(self) -> Any:
        """The pluggy hook relay: ``registry.hook.fuzzball_event(event=...)``."""
        return self.pm.hook

    def find(self, group: str, name: str) -> list[PluginRecord]:
        """Records of entry point ``name`` in ``group`` (several if distributions clash),
        checked: a driver named here is imported now."""
        return [self._check(r) for r in self._records if r.group == group and r.name == name]

    def broken(self) -> list[PluginRecord]:
        """Every plugin that failed to load (every driver is imported to tell)."""
        return [r for r in self.records if r.error]

    def require(self, group: str, name: str) -> PluginRecord:
        """Return the record of a plugin the process needs, or raise :class:`PluginLoadError`."""
        found = self.find(group, name)
        if not found:
            available = sorted(
                r.name for r in self._records if r.group == group and not self._check(r).error
            )
            raise PluginLoadError(
                f"no {KIND_OF_GROUP[group]} plugin named {name!r} is installed"
                f" (entry-point group {group}; available: {', '.join(available) or 'none'})"
            )
        if len(found) > 1:
            dists = ", ".join(f"{r.distribution} ({r.value})" for r in found)
            raise PluginLoadError(
                f"{KIND_OF_GROUP[group]} plugin {name!r} is provided by several"
                f" distributions: {dists}"
            )
        if found[0].error:
            raise PluginLoadError.for_record(found[0])
        return found[0]

    def driver(self, group: str, name: str, config: Mapping[str, Any] | None = None) -> Any:
        """Load driver ``name`` from ``group`` and instantiate it with ``config``.

        Raises :class:`PluginLoadError` (or FailedPrecondition when none or several match),
        naming the plugin, its distribution and the error.
        """
        record = self.require(group, name)
        try:
            manager: DriverManager[Any] = DriverManager(
                namespace=group,
                name=name,
                invoke_on_load=True,
                invoke_args=(dict(config or {}),),
            )
        except (NoMatches, MultipleMatches) as exc:
            raise PluginLoadError(f"{KIND_OF_GROUP[group]} plugin {name!r}: {exc}") from exc
        except Exception as exc:
            record.error = f"failed to start: {_describe(exc)}"
            raise PluginLoadError.for_record(record) from exc
        return manager.driver


_REGISTRY: PluginRegistry | None = None


def get_registry(*, disabled: Iterable[str] = ()) -> PluginRegistry:
    """The process-wide registry, discovered on first use."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = PluginRegistry(disabled=disabled)
    return _REGISTRY
