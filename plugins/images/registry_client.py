"""A client for the OCI Distribution API (Docker Registry HTTP API v2), pull side.

It speaks to one registry through an ordered list of endpoints (configured mirrors first, the
registry itself last), answers Basic and Bearer-token challenges with the job's credentials,
retries with backoff while a registry is unreachable, verifies every manifest and blob against
its digest, and resumes interrupted blob downloads with HTTP ``Range`` requests.

An endpoint that stops answering in the middle of a reply (a mirror that dies mid-pull) is
passed over like one that does not answer at all: the read starts again from the next
endpoint (a blob resumes where it was cut), and the whole round is retried with backoff while
none answers. Error messages name the registry and repository, and the endpoint that failed
(``mirror URL of REGISTRY`` or ``registry REGISTRY at URL``), never a credential; a failure
after every endpoint was tried names each one and what it did.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import ssl
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from fuzzball_core.backoff import Backoff
from fuzzball_core.credentials_fingerprints import credentials_fingerprint
from fuzzball_core.errors import (
    FailedPrecondition,
    FuzzballError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from fuzzball_plugins.images.authorizations import (
    AUTHORIZATIONS,
    STATIC_SECONDS,
    token_seconds,
)
from fuzzball_plugins.images.reference import ImageReference
from fuzzball_plugins.images.settings import ImageSettings

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_MANIFEST_LIST})
MANIFEST_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
_ACCEPT = ", ".join([OCI_INDEX, DOCKER_MANIFEST_LIST, OCI_MANIFEST, DOCKER_MANIFEST])

#: Manifests larger than this are refused (the OCI spec's recommended limit).
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
_CHUNK = 1024 * 1024
_RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_CHALLENGE_PARAM = re.compile(r'(\w+)\s*=\s*(?:"([^"]*)"|([^,\s]*))')

T = TypeVar("T")


class BlobDigestMismatch(FailedPrecondition):
    """Content from a registry does not hash to the digest that names it; it was discarded."""


@dataclass(frozen=True)
class Manifest:
    """A manifest or index as the registry served it, verified against ``digest``."""

    data: bytes
    media_type: str
    digest: str

    def json(self) -> dict[str, Any]:
        """The parsed document."""
        return json.loads(self.data)


class _EndpointFailure(Exception):
    """One endpoint could not answer; the next endpoint (or a retry) may."""

    def __init__(self, error: FuzzballError, *, retryable: bool) -> None:
        super().__init__(error.message)
        self.error = error
        self.retryable = retryable


@dataclass(frozen=True)
class _Cut:
    """A reply an endpoint stopped sending midway: what to say of it if the read fails after
    all, and which endpoint to try last from now on (None: not known)."""

    message: str
    endpoint: str | None


def _url_of(error: httpx.TransportError) -> str | None:
    """The URL of the request ``error`` broke, if it had got as far as one."""
    try:
        return str(error.request.url)
    except RuntimeError:
        return None


def _every_endpoint_failed(failures: Sequence[_EndpointFailure]) -> FuzzballError:
    """The error of a round in which every endpoint failed: the kind of the one that decides
    (the last that retrying cannot help, else the last), its message naming them all."""
    final = next((f for f in reversed(failures) if not f.retryable), failures[-1])
    if len(failures) == 1:
        return final.error
    return type(final.error)("; ".join(f.error.message for f in failures))


def sha256_digest(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _hasher_for(digest: str) -> Any:
    algorithm, _, _ = digest.partition(":")
    if algorithm not in ("sha256", "sha512"):
        raise InvalidArgument(f"unsupported digest algorithm {algorithm!r} in {digest}")
    return hashlib.new(algorithm)


def _parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    scheme, _, params = header.strip().partition(" ")
    found = {
        m.group(1).lower(): m.group(2) or m.group(3) or ""
        for m in _CHALLENGE_PARAM.finditer(params)
    }
    return scheme.lower(), found


def _registry_error_codes(response: httpx.Response) -> str:
    try:
        errors = response.json().get("errors") or []
        return ", ".join(str(e.get("code")) for e in errors if isinstance(e, Mapping))
    except (ValueError, AttributeError):
        return ""


def _resumes_at(response: httpx.Response, offset: int) -> bool:
    """True when ``response`` is a partial answer starting exactly at ``offset``."""
    if response.status_code != 206:
        return False
    match = re.match(r"bytes (\d+)-", response.headers.get("content-range", ""))
    return match is not None and int(match.group(1)) == offset


@functools.cache
def verifying_context() -> ssl.SSLContext:
    """httpx's default certificate-verifying TLS context, built once per process.

    Building one loads the whole CA bundle (about 30 ms of CPU here); a client is made for
    every image pinned at submission and every tag a node re-resolves, so each used to pay
    that before its first byte. A context is safe to share between clients and threads.
    """
    return httpx.create_ssl_context()


def http_client(settings: ImageSettings) -> httpx.Client:
    """An HTTP client (a connection pool) for registry requests under ``settings``."""
    return httpx.Client(timeout=settings.timeout, follow_redirects=True, verify=verifying_context())


class RegistryClient:
    """Pull-side access to one repository of one registry.

    ``credentials`` is the job's ``image.secret``: ``{"username": ..., "password": ...}`` or
    ``{"token": ...}`` (a bearer token used as is); ``None`` pulls anonymously. ``http`` is a
    connection pool shared with other clients, which :meth:`close` leaves open; by default
    the client makes its own.
    """

    def __init__(
        self,
        reference: ImageReference,
        settings: ImageSettings,
        credentials: Mapping[str, str] | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        http: httpx.Client | None = None,
    ) -> None:
        self.reference = reference
        self.registry = reference.registry
        self.repository = reference.repository
        self.endpoints = settings.endpoints_for(reference)
        self.retry: Backoff = settings.retry
        self._credentials = dict(credentials or {})
        self._fingerprint = credentials_fingerprint(self._credentials)
        #: each endpoint's Authorization header, and how long one just made may be kept
        self._authorization: dict[str, str] = {}
        self._lifetime: dict[str, float] = {}
        self._sleep = sleep
        self._owns_http = http is None
        self._http = http_client(settings) if http is None else http

    def close(self) -> None:
        """Release the connection pool, unless it is a shared one."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- manifests and small blobs ---------------------------------------------------------

    def get_manifest(self, reference: str | None = None) -> Manifest:
        """Fetch the manifest or index for a tag or digest (default: the reference's own).

        A manifest fetched by digest must hash to that digest; one fetched by tag must hash
        to the ``Docker-Content-Digest`` the registry announces, when it announces one.
        """
        wanted = reference or self.reference.reference
        path = f"/v2/{self.repository}/manifests/{wanted}"

        def read(r: httpx.Response) -> tuple[bytes, str, str | None]:
            data = self._read_limited(r, MAX_MANIFEST_BYTES, f"manifest {self._name(wanted)}")
            media_type = r.headers.get("content-type", "").split(";")[0].strip()
            return data, media_type, r.headers.get("docker-content-digest")

        data, media_type, announced = self._fetch(
            path, {"Accept": _ACCEPT}, f"image {self._name(wanted)}", read
        )
        expected = wanted if wanted.startswith(("sha256:", "sha512:")) else announced
        digest = self._verify_bytes(data, expected, f"manifest {self._name(wanted)}")
        try:
            document = json.loads(data)
        except ValueError:
            raise InvalidArgument(f"manifest {self._name(wanted)} is not JSON") from None
        media_type = document.get("mediaType") or media_type
        if media_type not in INDEX_TYPES | MANIFEST_TYPES:
            raise InvalidArgument(
                f"{self._name(wanted)} has media type {media_type!r}, "
                "which is neither an image manifest nor an index"
            )
        return Manifest(data=data, media_type=media_type, digest=digest)

    def head_manifest(self, reference: str | None = None) -> str | None:
        """The digest the registry names for a tag or digest now (default: the reference's
        own), from a HEAD of its manifest: its ``Docker-Content-Digest``, None when it names
        none. Docker Hub counts a GET of a manifest as a pull against its rate limit and a
        HEAD not. Raises as :meth:`get_manifest` does for a missing image or refused
        credentials."""
        wanted = reference or self.reference.reference
        path = f"/v2/{self.repository}/manifests/{wanted}"
        what = f"image {self._name(wanted)}"
        with self._open("HEAD", path, {"Accept": _ACCEPT}, what=what) as response:
            response.read()  # nothing: read to its end, the connection goes back to the pool
            announced = response.headers.get("docker-content-digest")
        return announced or None

    def get_blob_bytes(self, digest: str, max_bytes: int = MAX_MANIFEST_BYTES) -> bytes:
        """Fetch a small blob (an image config) into memory, verified against ``digest``."""
        path = f"/v2/{self.repository}/blobs/{digest}"
        data = self._fetch(
            path,
            {},
            f"blob {digest} of {self.reference.name}",
            lambda r: self._read_limited(r, max_bytes, f"blob {digest}"),
        )
        self._verify_bytes(data, digest, f"blob {digest} of {self.reference.name}")
        return data

    def get_blob_range(self, digest: str, start: int, length: int) -> bytes:
        """Read ``length`` bytes of a blob from ``start`` (unverified: for peeking at headers)."""
        headers = {"Range": f"bytes={start}-{start + length - 1}"}
        path = f"/v2/{self.repository}/blobs/{digest}"

        def read(r: httpx.Response) -> bytes:
            if r.status_code == 200 and start:
                raise Unavailable(f"{self._where(str(r.request.url))} ignored a Range request")
            return self._read_limited(r, length, f"blob {digest}", truncate=True)

        return self._fetch(path, headers, f"blob {digest} of {self.reference.name}", read)

    # -- layer downloads -------------------------------------------------------------------

    def download_blob(
        self,
        digest: str,
        size: int,
        destination: Path,
        *,
        on_bytes: Callable[[int, int], None] | None = None,
    ) -> Path:
        """Download a blob to ``destination``, resuming a ``.partial`` file left by a cut pull.

        The partial file grows with ``Range`` requests across retries (and across processes);
        the finished file is renamed into place only after its digest and size check out.
        """
        partial = destination.with_name(destination.name + ".partial")
        hasher = _hasher_for(digest)
        have = 0
        if partial.exists():
            with partial.open("rb") as existing:
                while chunk := existing.read(_CHUNK):
                    hasher.update(chunk)
                    have += len(chunk)
            if have > size:
                partial.unlink()
                hasher, have = _hasher_for(digest), 0
        what = f"blob {digest} of {self.reference.name}"
        path = f"/v2/{self.repository}/blobs/{digest}"
        delays = self.retry.delays()
        #: the last reply cut midway, for the error if the pull fails after all
        cut: _Cut | None = None
        while have < size:
            headers = {"Range": f"bytes={have}-"} if have else {}
            try:
                with self._open("GET", path, headers, what=what, cut=cut) as response:
                    if have and not _resumes_at(response, have):
                        # The endpoint ignored Range: start the file over.
                        hasher, have = _hasher_for(digest), 0
                        partial.unlink(missing_ok=True)
                    with partial.open("ab") as out:
                        for chunk in response.iter_bytes(_CHUNK):
                            if have + len(chunk) > size:
                                partial.unlink(missing_ok=True)
                                raise BlobDigestMismatch(
                                    f"{what} is larger than the {size} bytes its manifest "
                                    "declares; refused"
                                )
                            out.write(chunk)
                            hasher.update(chunk)
                            have += len(chunk)
                            if on_bytes:
                                on_bytes(have, size)
            except httpx.TransportError as exc:
                # the next round starts from the next endpoint that answers, at byte `have`
                cut = self._cut(
                    _url_of(exc),
                    f"stopped answering while sending {what} "
                    f"({have} of {size} bytes kept for a later resume)",
                )
                delay = next(delays, None)
                if delay is None:
                    raise Unavailable(cut.message) from exc
                self._sleep(delay)
                continue
            if have < size:
                # The stream ended early without an error: treat as an interruption.
                cut = self._cut(str(response.request.url), f"sent only {have}/{size} of {what}")
                delay = next(delays, None)
                if delay is None:
                    raise Unavailable(cut.message)
                self._sleep(delay)
        actual = f"{digest.split(':')[0]}:{hasher.hexdigest()}"
        if actual != digest:
            partial.unlink(missing_ok=True)
            raise BlobDigestMismatch(f"{what} is corrupt: its content hashes to {actual}; refused")
        partial.replace(destination)
        return destination

    # -- HTTP plumbing ---------------------------------------------------------------------

    def _name(self, reference: str) -> str:
        separator = "@" if reference.startswith(("sha256:", "sha512:")) else ":"
        return f"{self.reference.name}{separator}{reference}"

    def _verify_bytes(self, data: bytes, expected: str | None, what: str) -> str:
        if expected:
            hasher = _hasher_for(expected)
            hasher.update(data)
            actual = f"{expected.split(':')[0]}:{hasher.hexdigest()}"
            if actual != expected:
                raise BlobDigestMismatch(
                    f"{what} is corrupt: it hashes to {actual}, not {expected}"
                )
            return expected
        return sha256_digest(data)

    @staticmethod
    def _read_limited(
        response: httpx.Response, limit: int, what: str, *, truncate: bool = False
    ) -> bytes:
        parts: list[bytes] = []
        total = 0
        for chunk in response.iter_bytes(_CHUNK):
            parts.append(chunk)
            total += len(chunk)
            if total > limit:
                if truncate:
                    break
                raise InvalidArgument(f"{what} is larger than {limit} bytes; refused")
        return b"".join(parts)[:limit]

    def _endpoint_of(self, url: str) -> str | None:
        """The endpoint (a base URL of :attr:`endpoints`) ``url`` was sent to."""
        for endpoint in self.endpoints:
            if url == endpoint or url.startswith(f"{endpoint}/"):
                return endpoint
        return None

    def _where(self, url: str) -> str:
        """The endpoint ``url`` belongs to, as messages name it: ``mirror URL of REGISTRY``
        or ``registry REGISTRY at URL``."""
        endpoint = self._endpoint_of(url)
        if endpoint is not None and endpoint != self.endpoints[-1]:
            return f"mirror {endpoint} of {self.registry}"
        return f"registry {self.registry} at {self.endpoints[-1]}"

    def _cut(self, url: str | None, what_happened: str) -> _Cut:
        """The :class:`_Cut` of a reply from ``url`` (None: unknown) that ``what_happened``."""
        if url is None:
            return _Cut(f"registry {self.registry} {what_happened}", None)
        return _Cut(f"{self._where(url)} {what_happened}", self._endpoint_of(url))

    def _fetch(
        self, path: str, headers: Mapping[str, str], what: str, read: Callable[[httpx.Response], T]
    ) -> T:
        """GET ``path`` and ``read`` the reply; a reply cut midway (the endpoint died) is
        fetched again, from the next endpoint that answers, with backoff."""
        delays = self.retry.delays()
        cut: _Cut | None = None
        while True:
            try:
                with self._open("GET", path, headers, what=what, cut=cut) as response:
                    return read(response)
            except httpx.TransportError as exc:
                cut = self._cut(_url_of(exc), f"stopped answering while sending {what}")
                delay = next(delays, None)
                if delay is None:
                    raise Unavailable(cut.message) from exc
                self._sleep(delay)

    @contextmanager
    def _open(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        *,
        what: str,
        cut: _Cut | None = None,
    ) -> Iterator[httpx.Response]:
        """Send a request through the endpoints in order, with retries; yield an OK response.

        Unreachable endpoints and server errors fall through to the next endpoint; a mirror
        that lacks the content or refuses the credentials does too. When every endpoint
        failed only transiently the whole round is retried with backoff. ``cut`` is a reply
        cut midway before this request: its endpoint is tried last, and the error says it
        if every endpoint fails now.
        """
        delays = self.retry.delays()
        # stable: the endpoint that cut its reply moves to the end, the rest keep their order
        endpoints = sorted(self.endpoints, key=lambda e: cut is not None and e == cut.endpoint)
        while True:
            failures: list[_EndpointFailure] = []
            for index, endpoint in enumerate(endpoints):
                is_last = index == len(endpoints) - 1
                try:
                    response = self._send(endpoint, method, path, headers, what=what)
                except _EndpointFailure as failure:
                    failures.append(failure)
                    if not failure.retryable and is_last:
                        raise self._failed(failures, cut) from None
                    continue
                try:
                    yield response
                finally:
                    response.close()
                return
            delay = next(delays, None)
            if delay is None or not all(f.retryable for f in failures):
                raise self._failed(failures, cut) from None
            self._sleep(delay)

    @staticmethod
    def _failed(failures: Sequence[_EndpointFailure], cut: _Cut | None) -> FuzzballError:
        error = _every_endpoint_failed(failures)
        return type(error)(f"{cut.message}; then {error.message}") if cut else error

    def _send(
        self, endpoint: str, method: str, path: str, headers: Mapping[str, str], *, what: str
    ) -> httpx.Response:
        url = endpoint + path
        request_headers = dict(headers)
        key = (endpoint, self.repository, self._fingerprint)
        if endpoint not in self._authorization:
            kept = AUTHORIZATIONS.get(key)  # an earlier client's, for the same credentials
            if kept is not None:
                self._authorization[endpoint] = kept
        for attempt in range(2):
            if endpoint in self._authorization:
                request_headers["Authorization"] = self._authorization[endpoint]
            try:
                response = self._http.send(
                    self._http.build_request(method, url, headers=request_headers), stream=True
                )
            except httpx.TransportError as exc:
                where = self._where(endpoint)
                unreachable = (
                    f"{where} is unreachable"
                    if where.startswith("mirror")
                    else f"registry {self.registry} is unreachable at {endpoint}"
                )
                raise _EndpointFailure(
                    Unavailable(f"{unreachable} ({type(exc).__name__})"), retryable=True
                ) from None
            if response.status_code == 401 and attempt == 0:
                challenge = response.headers.get("www-authenticate", "")
                response.close()
                refused = self._authorization.get(endpoint)
                if refused is not None:
                    AUTHORIZATIONS.forget(key, refused)  # expired or revoked early
                try:
                    self._authorization[endpoint] = self._answer_challenge(endpoint, challenge)
                except FuzzballError as exc:
                    raise _EndpointFailure(exc, retryable=isinstance(exc, Unavailable)) from None
                continue
            if response.status_code < 300:
                if attempt:  # the header just made was accepted
                    accepted = self._authorization.get(endpoint, "")
                    AUTHORIZATIONS.keep(key, accepted, self._lifetime.pop(endpoint, 0.0))
                return response
            response.read()
            response.close()
            raise self._failure_for(response, endpoint, what)
        raise AssertionError("unreachable")  # pragma: no cover

    def _failure_for(self, response: httpx.Response, endpoint: str, what: str) -> _EndpointFailure:
        status = response.status_code
        codes = _registry_error_codes(response)
        if status in (401, 403):
            return _EndpointFailure(self._refusal(), retryable=False)
        if status == 404:
            # a mirror's 404 names the mirror: the next endpoint's failure follows it
            where = self._where(endpoint)
            if not where.startswith("mirror "):
                where = f"registry {self.registry}"
            return _EndpointFailure(NotFound(f"{what} not found in {where}"), retryable=False)
        if status in _RETRYABLE_STATUS:
            return _EndpointFailure(
                Unavailable(f"{self._where(endpoint)} answered HTTP {status}"),
                retryable=True,
            )
        detail = f" ({codes})" if codes else ""
        return _EndpointFailure(
            InvalidArgument(f"registry {self.registry} refused {what}: HTTP {status}{detail}"),
            retryable=False,
        )

    def _refusal(self) -> FuzzballError:
        """The registry's refusal of this caller: credentials it requires when none were
        given (FailedPrecondition), else credentials it rejected (PermissionDenied). Never
        Unauthenticated: that is what a client reads as its own token refused."""
        if self._credentials:
            return PermissionDenied(
                f"registry {self.registry} rejected the credentials for {self.repository}"
            )
        return FailedPrecondition(
            f"registry {self.registry} requires credentials for {self.repository} "
            "(give them in image.secret)"
        )

    def _answer_challenge(self, endpoint: str, challenge: str) -> str:
        """Turn a ``WWW-Authenticate`` challenge into an ``Authorization`` header value."""
        scheme, params = _parse_challenge(challenge)
        username = self._credentials.get("username")
        password = self._credentials.get("password")
        token = self._credentials.get("token")
        if scheme == "basic":
            if username is None or password is None:
                return ""  # the retry then fails with a clear "requires credentials"
            raw = f"{username}:{password}".encode()
            self._lifetime[endpoint] = STATIC_SECONDS
            return "Basic " + base64.b64encode(raw).decode()
        if scheme != "bearer":
            raise FailedPrecondition(
                f"registry {self.registry} asks for unsupported authentication {scheme!r}"
            )
        if token:
            self._lifetime[endpoint] = STATIC_SECONDS
            return f"Bearer {token}"
        realm = params.get("realm")
        if not realm:
            raise FailedPrecondition(
                f"registry {self.registry} sent a bearer challenge without realm"
            )
        query = {"scope": params.get("scope") or f"repository:{self.repository}:pull"}
        if params.get("service"):
            query["service"] = params["service"]
        auth = (username, password) if username is not None and password is not None else None
        try:
            reply = self._http.get(realm, params=query, auth=auth)
        except httpx.TransportError:
            raise Unavailable(
                f"the token service of registry {self.registry} is unreachable"
            ) from None
        if reply.status_code in (401, 403):
            raise self._refusal()
        if reply.status_code >= 300:
            raise Unavailable(
                f"the token service of registry {self.registry} answered HTTP {reply.status_code}"
            )
        try:
            body = reply.json()
            issued = body.get("token") or body.get("access_token")
            self._lifetime[endpoint] = token_seconds(body.get("expires_in"))
        except (ValueError, AttributeError):
            issued = None
        if not issued:
            raise Unavailable(f"the token service of registry {self.registry} sent no token")
        return f"Bearer {issued}"
