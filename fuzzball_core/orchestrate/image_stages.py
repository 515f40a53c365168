"""The engine's image stages: pinning images at submission and what their runs carry.

A workflow's images are stages (``images.URI`` pulls, ``images.NAME`` builds). At
submission every pulled image is pinned to a digest through the image backend of its
scheme (a missing, private or wrong-architecture image fails the submission), and a
``fuzzball://`` image through the object cache, to the digest of its image object (content
and config, :mod:`fuzzball_core.image_objects`). A ready image stage becomes a run whose
``job_json`` is an image payload instead of a job (``"kind": "image-pull"`` or
``"image-build"``); the node reports progress as ``LogData`` on the ``progress`` stream,
JSON ``{"step", "done", "total"}``, which the engine turns into ``image_progress`` events.

A build is keyed by the hash of its definition (``from`` with its pinned digest, ``files``
and ``post``): when the object cache already holds that hash at the build's address, the
stage finishes without building.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from typing import Any

from fuzzball_core.credentials_fingerprints import credentials_fingerprint
from fuzzball_core.drivers import IMAGE_BACKENDS, ImageBackend, ImageConfig, ResolvedImage
from fuzzball_core.errors import FuzzballError, InvalidArgument, NotFound
from fuzzball_core.orchestrate.pin_flights import PinFlights
from fuzzball_core.plugins import PluginRegistry, get_registry
from fuzzball_core.spec import ImagePull, Plan, parse_duration
from fuzzball_core.spec.models import ImageBuild, Job
from fuzzball_core.store.object_cache import SCHEMES, CacheAddress, ObjectCache
from fuzzball_core.vocabulary import EventKind

GROUP = IMAGE_BACKENDS
#: how an image stage's name begins (``images.URI`` pulls, ``images.NAME`` builds)
IMAGE_STAGE_PREFIX = "images."
PULL = "image-pull"
BUILD = "image-build"
#: the LogData stream that carries an image run's structured progress
PROGRESS_STREAM = "progress"
#: what an image run asks of the scheduler: one core, no memory reservation; a pull or build
#: is the same work on any node, so a lost node's runs again elsewhere (as many times as
#: ``orchestrate.max-eviction-restarts`` allows) instead of failing the workflow
_IMAGE_RUN = Job.model_validate(
    {
        "image": {"uri": "docker://image-stage"},
        "command": ["true"],
        "policy": {"retry": {"on": ["node"]}},
    }
)


def is_object_cache_uri(uri: str) -> bool:
    """Whether ``uri`` names an object-cache image (``fuzzball://`` or ``fb://``)."""
    scheme, separator, _ = uri.partition("://")
    return bool(separator) and scheme.lower() in SCHEMES


def image_run_definition() -> Job:
    """The job an image stage's run stands for when scheduling and retrying."""
    return _IMAGE_RUN


@dataclass
class ImageStages:
    """Settings and services the engine's image stages need (off until configured)."""

    #: plan pull stages and pin images at submission
    enabled: bool = False
    builds_enabled: bool = True
    images_config: Mapping[str, Any] = field(default_factory=dict)
    registry: PluginRegistry | None = None
    object_cache: ObjectCache | None = None
    #: upload pulled images to the object cache too (``images.cache-write-back``)
    write_back: bool = False
    #: a pull's registry credentials, ``(submitter, secret://..., field path, image URI)`` ->
    #: username, password and/or token (the secrets service, for the principal submitting)
    credentials_for: Callable[[Any, str, str, str], Mapping[str, str]] | None = None
    _backends: dict[str, ImageBackend] = field(default_factory=dict)
    #: pins of one URI asked for at once (anonymous, or with the same credentials), sharing
    #: a registry round trip
    _pins: PinFlights[ResolvedImage] = field(default_factory=PinFlights)

    # -- submission ----------------------------------------------------------------------------

    def check_submission(
        self, plan: Plan, account_id: str, who: Any = None
    ) -> dict[str, ResolvedImage]:
        """Refuse builds when disabled; pin every pull stage's image (with its ``secret``'s
        credentials, read for ``who``). Returns pins by stage id.

        Raises InvalidArgument, NotFound, FailedPrecondition (credentials the registry needs)
        or PermissionDenied (credentials it rejected) naming the stage's image.
        """
        builds = [s.id for s in plan if isinstance(s.definition, ImageBuild)]
        if builds and not self.builds_enabled:
            raise InvalidArgument(
                f"{builds[0]}: workflow image builds are disabled on this cluster"
                " (orchestrate.enable-workflow-image-builds is false); build the image"
                " elsewhere and refer to it by URI",
                details=[{"field": "images", "description": "image builds are disabled"}],
            )
        if not self.enabled:
            return {}
        pins: dict[str, ResolvedImage] = {}
        for stage in plan:
            if isinstance(stage.definition, ImagePull):
                pull = stage.definition
                credentials = self._credentials(who, pull, f"{stage.id}.secret")
                pins[stage.id] = self.resolve(
                    pull.uri, account_id, stage.id, credentials, reuse_within=pull.cache_ttl
                )
        return pins

    def _credentials(self, who: Any, pull: ImagePull, where: str) -> Mapping[str, str] | None:
        if not pull.secret:
            return None
        if self.credentials_for is None or who is None:
            raise InvalidArgument(f"{where}: this cluster keeps no secrets to read it from")
        return self.credentials_for(who, pull.secret, where, pull.uri)

    def resolve(
        self,
        uri: str,
        account_id: str,
        where: str = "image.uri",
        credentials: Mapping[str, str] | None = None,
        *,
        reuse_within: float | None = None,
    ) -> ResolvedImage:
        """Pin ``uri`` for the account: object-cache images by lookup, others by backend
        (with ``credentials`` for a private registry); a registry's pin made for an earlier
        submission at most ``reuse_within`` seconds ago (the image's ``cache-ttl``) is
        reused."""
        try:
            if is_object_cache_uri(uri):
                return self._resolve_cached(uri, account_id)
            backend = self._backend(uri)
            if credentials is None:
                # what one submitter may read any may (no secret): one request serves all
                return self._pins.answer(uri, lambda: backend.resolve(uri), reuse_within)
            # and what one holder of a secret may read, every holder of the same may
            return self._pins.answer(
                (uri, credentials_fingerprint(credentials)),
                lambda: backend.resolve(uri, credentials=credentials),
                reuse_within,
            )
        except FuzzballError as exc:
            raise type(exc)(f"{where}: {exc.message}") from exc
        except Exception as exc:  # a backend's unexpected failure is still the image's
            raise InvalidArgument(f"{where}: {uri} could not be resolved: {exc}") from exc

    def _resolve_cached(self, uri: str, account_id: str) -> ResolvedImage:
        address = CacheAddress.of(uri, account_id, group=self._group_of(account_id))
        entry = self.object_cache.lookup(address) if self.object_cache is not None else None
        if entry is None:
            raise NotFound(f"the object cache holds no image {uri}")
        # the entry's own config (its object's), not one shared by everything of its content
        config = self.object_cache.read_config(entry.config) if self.object_cache else None
        return ResolvedImage(
            uri,
            entry.digest,
            entry.size,
            "",
            config=ImageConfig.from_oci(config) if config is not None else None,
        )

    def _group_of(self, account_id: str) -> str:
        """The owner of the account's ``group`` images: its organization (object_cache)."""
        return self.object_cache.group_of(account_id) if self.object_cache is not None else ""

    def _backend(self, uri: str) -> ImageBackend:
        scheme, separator, _ = uri.partition("://")
        scheme = scheme.lower() if separator else "docker"
        backend = self._backends.get(scheme)
        if backend is None:
            registry = self.registry or get_registry()
            if not registry.find(GROUP, scheme):
                raise InvalidArgument(f"no image backend serves the scheme {scheme!r}")
            backend = registry.driver(GROUP, scheme, dict(self.images_config))
            self._backends[scheme] = backend
        return backend

    # -- builds --------------------------------------------------------------------------------

    def cached_build(
        self, name: str, build: ImageBuild, account_id: str, definition_hash: str
    ) -> bool:
        """Whether the object cache holds this exact build at the build's address."""
        if self.object_cache is None:
            return False
        entry = self.object_cache.lookup(
            CacheAddress.checked(
                account_id, build.effective_scope, name, group=self._group_of(account_id)
            )
        )
        return entry is not None and entry.definition_hash == definition_hash

    # -- payloads ------------------------------------------------------------------------------

    def pull_payload(self, pull: ImagePull, pin: ResolvedImage | None, account_id: str) -> str:
        """The ``job_json`` of a pull stage's run; ``write-back`` is the object-cache address
        the node uploads the pulled image to, or None; ``cached`` is the pinned URI of the
        copy an earlier pull wrote back there (the node fetches that instead of pulling)."""
        digest = pin.digest if pin is not None else ""
        target = None
        cached = ""
        if self.write_back and not is_object_cache_uri(pull.uri):
            private = bool(pull.secret)  # an image behind credentials stays its owner's
            target = {
                "owner": account_id if private else self._group_of(account_id),
                "scope": "user" if private else "group",
                "name": write_back_name(pull.uri),
                "definition-hash": digest,
            }
            held = self._held(target) if digest else None
            if held is not None:
                cached = pinned_uri(f"fuzzball://{target['scope']}/{target['name']}", held)
                target = None
        return _json(
            {
                "kind": PULL,
                "uri": pull.uri,
                "secret": pull.secret,
                "digest": digest,
                "write-back": target,
                "cached": cached,
            }
        )

    def _held(self, target: Mapping[str, Any]) -> str | None:
        """The object digest of the copy of this image (same upstream digest) the object
        cache already holds there, or None."""
        if self.object_cache is None:
            return None
        owner = str(target["owner"])
        address = CacheAddress.checked(
            owner, str(target["scope"]), str(target["name"]), group=owner
        )
        entry = self.object_cache.lookup(address)
        if entry is None or entry.definition_hash != target["definition-hash"]:
            return None
        return entry.digest

    def build_payload(
        self,
        name: str,
        build: ImageBuild,
        account_id: str,
        from_digest: str,
        definition_hash: str,
    ) -> str:
        """The ``job_json`` of a build stage's run."""
        ttl = build.ttl
        return _json(
            {
                "kind": BUILD,
                "name": name,
                "from": {
                    "uri": str(build.from_.uri),
                    "digest": from_digest,
                    # the reference only: the node asks for its credentials as the build starts
                    **({"secret": build.from_.secret} if build.from_.secret else {}),
                },
                "files": dict(build.files or {}),
                "post": build.post or "",
                "target": {
                    "owner": account_id
                    if build.effective_scope == "user"
                    else self._group_of(account_id),
                    "scope": build.effective_scope,
                    "name": name,
                    "definition-hash": definition_hash,
                    "ttl": _seconds(ttl),
                },
            }
        )


class ImagesOnNodes:
    """Which nodes made which pinned image ready, as their pull runs reported.

    A later workflow's pull stage of an image a live node already holds finishes at once
    (the image is on the cluster), without a run and the round trip to a node and back that
    a run costs: most of an image stage's time when the image is cached. Only public pulls
    count (no registry ``secret``: a private image is checked with its owner's credentials
    on the node) with nothing to write back to the object cache.

    A hint, not a record, so it is kept in memory only: after a restart the first pull of
    each image runs again, and a job placed on a node without the image (another node, or
    one whose cache was cleared) pulls it as it starts, as any job does.
    """

    def __init__(self) -> None:
        self._holders: dict[tuple[str, str], set[str]] = {}

    def pulled(self, payload: str, node_id: str) -> None:
        """Note that ``node_id`` finished the pull run of ``payload`` (its ``job_json``)."""
        key = _public_pull(payload)
        if key is not None:
            self._holders.setdefault(key, set()).add(node_id)

    def holder(self, payload: str, live: Container[str]) -> str | None:
        """A node among ``live`` that finished a pull of what ``payload`` pulls (the same
        image at the same digest), or None; nodes no longer live are forgotten."""
        key = _public_pull(payload)
        holders = self._holders.get(key) if key is not None else None
        if not holders:
            return None
        for node_id in list(holders):
            if node_id in live:
                return node_id
            holders.discard(node_id)
        return None


def _public_pull(payload: str) -> tuple[str, str] | None:
    """``(uri, digest)`` of a pull payload with no secret and nothing to write back."""
    try:
        work = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(work, dict) or work.get("kind") != PULL:
        return None
    if work.get("secret") or work.get("write-back") or not work.get("digest"):
        return None
    return str(work["uri"]), str(work["digest"])


def definition_hash(build: ImageBuild, from_digest: str) -> str:
    """What identifies a build's result: its base (URI and digest), files and post script."""
    document = {
        "from": str(build.from_.uri),
        "from-digest": from_digest,
        "files": dict(sorted((build.files or {}).items())),
        "post": build.post or "",
    }
    return "sha256:" + hashlib.sha256(_json(document).encode()).hexdigest()


def pinned_uri(uri: str, digest: str) -> str:
    """``uri`` with its digest attached (``fuzzball://user/tools@sha256:...``)."""
    return f"{uri.split('@', 1)[0]}@{digest}"


def write_back_name(uri: str) -> str:
    """The object-cache name a pulled image is written back under: ``docker://alpine:3``
    becomes ``docker/alpine:3`` (``fuzzball://group/docker/alpine:3``)."""
    scheme, separator, rest = uri.partition("://")
    if not separator:
        scheme, rest = "docker", uri
    return f"{scheme.lower()}/{rest.split('@', 1)[0]}"


#: event kinds of the write-back's reports, by their ``status``
WRITE_BACK_EVENTS = {
    "retrying": EventKind.IMAGE_WRITE_BACK_RETRYING,
    "abandoned": EventKind.IMAGE_WRITE_BACK_ABANDONED,
    "stored": EventKind.IMAGE_WRITTEN_BACK,
}


def progress_event(stage_name: str, data: bytes) -> tuple[EventKind, str, dict[str, Any]] | None:
    """The kind, message and data of the event a progress report becomes: ``image_progress``,
    or one of :data:`WRITE_BACK_EVENTS` for a write-back's turns."""
    try:
        report = json.loads(data)
        step, done, total = str(report["step"]), int(report["done"]), int(report["total"])
        status = str(report.get("status") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    details: dict[str, Any] = {"step": step, "done": done, "total": total}
    if status in WRITE_BACK_EVENTS:
        extra = {
            k: report[k] for k in ("reason", "attempt", "delay", "address", "digest") if k in report
        }
        return (
            WRITE_BACK_EVENTS[status],
            f"{stage_name}: {_write_back_text(status, extra)}",
            {**details, "status": status, **extra},
        )
    if step.startswith(("download ", "upload", "write-back")) and total > 1:
        percent = 100 * done // total if total else 100
        text = f"{step}: {percent}% ({_size(done)} of {_size(total)})"
    elif step == "done":
        text = "image ready"
    elif done >= total:
        text = f"{step}: done"
    else:
        text = f"{step}: started"
    return EventKind.IMAGE_PROGRESS, f"{stage_name}: {text}", details


def _write_back_text(status: str, report: Mapping[str, Any]) -> str:
    reason = str(report.get("reason", ""))
    if status == "stored":
        return f"written back to the object cache as {report.get('address', '?')}"
    if status == "retrying":
        return (
            f"write-back attempt {report.get('attempt', '?')} failed ({reason});"
            f" retrying in {report.get('delay', '?')}s"
        )
    return f"write-back abandoned ({reason}); the pull itself succeeded"


def _seconds(ttl: str | None) -> float | None:
    if ttl is None:
        return None
    return float(ttl) if ttl.isdigit() else float(parse_duration(ttl))


def _size(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return str(count)


def _json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"), sort_keys=True)


def configure_images(
    engine: Any, service: Any, config: Any, registry: PluginRegistry | None = None
) -> ObjectCache:
    """Turn the engine's image stages on with Orchestrate's configuration and give the
    service the object cache (under ``data-dir/object-cache``) the REST gateway serves.

    ``config`` is the process's ``FuzzballConfig``. Returns the object cache.
    """
    cache = ObjectCache(engine.sessions, config.data_dir / "object-cache")
    engine.images = ImageStages(
        enabled=True,
        builds_enabled=config.orchestrate.enable_workflow_image_builds,
        images_config=config.images.model_dump(mode="json", by_alias=True),
        registry=registry,
        object_cache=cache,
        write_back=config.images.cache_write_back,
    )
    service.object_cache = cache
    service.node_token = config.orchestrate.node_token
    return cache
