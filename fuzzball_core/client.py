"""A small client of Fuzzball's REST API (the one the ``fuzzball`` CLI uses).

The API's versioned base is found the way the real CLI finds it (``reference/cli-config.md``):
probe ``{address}/v2/version``, ``/v3/version``, ... and take the first that answers below 400
with a version reply (``{"version": "..."}``): a web server answering every path with a page is
not taken for the API. Every reply is decoded here; one that is no JSON is an ``Unavailable``
saying the address did not answer as a Fuzzball API, never a decoding traceback.
Over https the server's certificate is verified (``verify``: the CA a context names in
``cafile``, else the system's roots). Error replies (google.rpc.Status bodies) come back as
the typed ``FuzzballError`` they stand for; a server that cannot be reached is
``Unavailable``. Replies are returned as the ``fuzzball.v1`` messages their JSON maps to
(``fuzzball_core.api.rest_messages``), so callers read typed fields; what this client does
not know of a newer server's reply is dropped.
"""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Iterator
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from google.protobuf.message import Message

from fuzzball_core.api.following import NEXT_PAGE_TOKEN
from fuzzball_core.api.rest_messages import read_reply
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import FuzzballError, Internal, InvalidArgument, Unavailable
from fuzzball_core.service.contract import LOG_PAGE

M = TypeVar("M", bound=Message)

#: API versions probed, in order.
PROBED_VERSIONS = ("v2", "v3", "v4", "v5")
DEFAULT_TIMEOUT = 30.0


def address_url(address: str) -> str:
    """A URL for a context's address: ``host:port`` gets ``https://``, or ``http://`` for
    loopback hosts; a URL is kept as it is (without a trailing slash)."""
    address = address.strip()
    if not address:
        raise InvalidArgument("address: empty; give host:port or a URL")
    if "://" in address:
        # the scheme is told before the trailing slashes go: "http://" is a URL without a
        # host, not the host "http"
        url = address.rstrip("/")
    else:
        address = address.rstrip("/")
        host = address.rsplit(":", 1)[0] if address.count(":") == 1 else address
        loopback = host in ("localhost", "127.0.0.1", "[::1]")
        url = f"{'http' if loopback else 'https'}://{address}"
    _check_url(url, address)
    return url


def context_address(address: str) -> str:
    """``address`` as ``context create`` keeps it: one :func:`address_url` takes, without a
    user name or password in it (the API's token goes in ``auth.credentials.token``; a
    password in the address would be shown wherever the address is)."""
    if httpx.URL(address_url(address)).userinfo:
        raise InvalidArgument(
            f"address: {shown_url(address)!r} holds a user name or password: give the address"
            " without it, and the API token with --token or 'fuzzball context login'"
        )
    return address


def shown_url(url: str) -> str:
    """``url`` (or a context's address) as errors and listings show it: a user name or
    password in it replaced by ``***``, so that a file holding one never has it printed."""
    return _USERINFO.sub(r"\1***@", url)


#: the user name and password of a URL (``https://user:pw@``) or of an address (``user@host``)
_USERINFO = re.compile(r"^((?:[A-Za-z][A-Za-z0-9+.-]*://)?)[^/@?#]*@")


def _check_url(url: str, address: str) -> None:
    """InvalidArgument naming ``address`` unless ``url`` is an http(s) URL with a host and,
    if any, a port (``not a url`` became ``https://not a url`` and failed at the first call)."""
    shown = shown_url(address)
    try:
        parsed = httpx.URL(url)  # a port that is no number is refused here
    except (httpx.InvalidURL, ValueError) as exc:
        raise InvalidArgument(f"address: {shown!r} is not host:port or a URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host or " " in url:
        raise InvalidArgument(f"address: {shown!r} is not host:port or an http(s) URL")


def _error_of(response: httpx.Response) -> FuzzballError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "code" in body and "message" in body:
        return FuzzballError.from_status(body)
    text = response.text.strip()[:200] or response.reason_phrase
    kind = Unavailable if response.status_code in (502, 503, 504) else Internal
    return kind(
        f"{response.request.method} {response.request.url.path}: HTTP "
        f"{response.status_code}: {text}"
    )


def _not_the_api(where: str, response: httpx.Response) -> Unavailable:
    """The error of an answer that is no Fuzzball API reply (a proxy's or web server's page):
    naming ``where`` (the address, or a Federate member's cluster), the status, the content
    type and the start of the body."""
    kind = response.headers.get("content-type", "").split(";", 1)[0].strip() or "no content type"
    start = " ".join(response.text.split())[:_BODY_SHOWN]
    shown = f": {start!r}" if start else ", empty body"
    return Unavailable(
        f"{where} did not answer as a Fuzzball API (HTTP {response.status_code}, {kind}{shown})"
    )


#: how much of a body that is no API reply an error shows
_BODY_SHOWN = 60


def _json_reply(response: httpx.Response, where: str) -> dict[str, Any]:
    """The decoded JSON object of a reply (every API reply is one), or :func:`_not_the_api`
    when it is none."""
    try:
        body = response.json()
    except ValueError:  # json's and the text decoding's errors both are ValueErrors
        body = None
    if not isinstance(body, dict):
        raise _not_the_api(where, response)
    return body


def _json_line(line: str, response: httpx.Response, where: str) -> dict[str, Any]:
    """One line of a JSON-lines reply (a log page or stream) as a mapping."""
    try:
        decoded = json.loads(line)
    except ValueError:
        decoded = None
    if not isinstance(decoded, dict):
        raise Unavailable(
            f"{where} did not answer as a Fuzzball API (a log line is no JSON object:"
            f" {line[:_BODY_SHOWN]!r})"
        )
    return decoded


def _is_version_reply(response: httpx.Response) -> bool:
    """Whether a probe's answer is ``/version``'s (``{"version": "..."}``)."""
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and isinstance(body.get("version"), str)


def _unreachable(named: str | None, root: str, exc: httpx.HTTPError) -> Unavailable:
    """The error of a call that reached nothing: naming ``named`` when given (Federate names
    a member by its cluster, never by the address it reaches it at), else the address (a
    user name or password in it shown as ``***``, in the cause too)."""
    cause = _without_userinfo(str(exc), root)
    if named:
        return Unavailable(f"{named}: unreachable ({cause})")
    return Unavailable(f"cannot reach the Fuzzball API at {shown_url(root)}: {cause}")


def _without_userinfo(text: str, url: str) -> str:
    """``text`` (an error's words) with ``url``'s user name and password, if any, as ``***``."""
    userinfo = _USERINFO.match(url)
    secret = userinfo.group(0)[len(userinfo.group(1)) : -1] if userinfo else ""
    return text.replace(secret, "***") if secret else text


def discover_base_url(
    address: str,
    token: str | None,
    *,
    transport: httpx.BaseTransport | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    verify: ssl.SSLContext | bool = True,
    auth: httpx.Auth | None = None,
    named: str | None = None,
) -> str:
    """The API's versioned base URL at ``address`` (``https://host/v3``).

    A probe answered with 401 means the API is there but refuses the token: that
    ``Unauthenticated`` is raised rather than looking further. ``auth`` sends (and renews)
    the token instead of ``token``. ``named``: what an ``Unavailable`` names instead of the
    address.
    """
    root = address_url(address)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    #: the first answer below 400 that was no version reply (what the error shows)
    impostor: httpx.Response | None = None
    with httpx.Client(
        headers=headers, transport=transport, timeout=timeout, verify=verify, auth=auth
    ) as http:
        for version in PROBED_VERSIONS:
            url = f"{root}/{version}/version"
            try:
                response = http.get(url)
            except httpx.HTTPError as exc:
                raise _unreachable(named, root, exc) from None
            if response.status_code < 400:
                if _is_version_reply(response):
                    return f"{root}/{version}"
                impostor = impostor or response
            if response.status_code == 401:
                raise _error_of(response)
    if impostor is not None:
        raise _not_the_api(named or shown_url(root), impostor)
    probed = f"probed /{', /'.join(PROBED_VERSIONS)}/version"
    if named:
        raise Unavailable(f"{named}: no Fuzzball API answers ({probed})")
    raise Unavailable(f"no Fuzzball API answers at {shown_url(root)} ({probed})")


class FuzzballClient:
    """Calls of the REST API at ``base_url`` (the versioned base) with a bearer token."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        verify: ssl.SSLContext | bool = True,
        auth: httpx.Auth | None = None,
        named: str | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        #: what an ``Unavailable`` names instead of the address (None: the address)
        self.named = named
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            transport=transport,
            timeout=timeout,
            verify=verify,
            auth=auth,
        )

    @classmethod
    def connect(cls, address: str, token: str | None, **options: Any) -> FuzzballClient:
        """A client for the API found at a context's ``address``."""
        return cls(discover_base_url(address, token, **options), token, **options)

    def close(self) -> None:
        """Close the client's connections."""
        self._http.close()

    def __enter__(self) -> FuzzballClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = self._http.request(method, _checked_path(path), **kwargs)
        except httpx.HTTPError as exc:
            raise _unreachable(self.named, self.base_url, exc) from None
        if response.status_code >= 400:
            raise _error_of(response)
        return _json_reply(response, self._where)

    @property
    def shown_url(self) -> str:
        """The versioned base as messages show it (see :func:`shown_url`)."""
        return shown_url(self.base_url)

    @property
    def _where(self) -> str:
        """What an answer that is no API reply names: the member's cluster, or the base."""
        return self.named or self.shown_url

    def call_json(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> Any:
        """A request to a route whose reply is plain JSON, not a ``fuzzball.v1`` message (the
        identity and administration routes): the decoded reply."""
        return self._request(method, path, params=params, json=body)

    def every_item(self, path: str, key: str, params: dict[str, str] | None = None) -> list[Any]:
        """Every item (under ``key``) of the paged list route ``path``, page after page as
        each answer's ``pageToken`` leads ("" on the last page)."""
        items: list[Any] = []
        token = ""
        while True:
            query = {**(params or {}), **({"pageToken": token} if token else {})}
            page = self.call_json("GET", path, params=query or None)
            items += page.get(key) or []
            token = page.get("pageToken") or ""
            if not token:
                return items

    def _call(self, method: str, path: str, reply: type[M], **kwargs: Any) -> M:
        """A request whose reply is a ``reply`` message."""
        return read_reply(self._request(method, path, **kwargs), reply)

    # -- calls --------------------------------------------------------------------------------

    def version(self) -> str:
        """The server's version string."""
        return self._call("GET", "/version", pb.GetVersionResponse).version

    def start_workflow(self, raw_specification: str, *, name: str | None = None) -> str:
        """Start a workflow from a file's text (sent unchanged); return its id."""
        return self.start_workflow_reply(raw_specification, name=name).id

    def start_workflow_reply(
        self, raw_specification: str, *, name: str | None = None
    ) -> pb.StartWorkflowResponse:
        """Start a workflow from a file's text (sent unchanged); the reply: its id and the
        server's warnings about the file."""
        body: dict[str, Any] = {"rawSpecification": raw_specification}
        if name:
            body["name"] = name
        return self._call("POST", "/workflows", pb.StartWorkflowResponse, json=body)

    def validate_workflow(self, raw_specification: str) -> list[str]:
        """Validate on the server; return its warnings."""
        body = {"rawSpecification": raw_specification}
        reply = self._call("POST", "/workflows:validate", pb.ValidateWorkflowResponse, json=body)
        return list(reply.warnings)

    def list_workflows(self) -> list[pb.Workflow]:
        """The caller's workflows (without stages), newest first."""
        return list(self._call("GET", "/workflows", pb.ListWorkflowsResponse).workflows)

    def get_workflow(self, workflow_id: str) -> pb.Workflow:
        """One workflow with its stages under ``jobs``."""
        return self._call("GET", _workflow_path(workflow_id), pb.Workflow)

    def workflow_status(self, workflow_id: str) -> pb.GetWorkflowStatusResponse:
        """A workflow's status and its stages' statuses (under ``status.stages``)."""
        return self._call(
            "GET", _workflow_path(workflow_id, ":status"), pb.GetWorkflowStatusResponse
        )

    def stop_workflow(self, workflow_id: str) -> str:
        """Cancel the workflow's unfinished stages; the answer's ``message`` (empty when the
        stop is done; a Federate whose member does not answer says it recorded the stop and
        delivers it when the member answers)."""
        answer = self._request("PATCH", _workflow_path(workflow_id, ":stop"))
        return str(answer.get("message") or "")

    def list_events(self, workflow_id: str, *, after_seq: int = 0) -> list[pb.WorkflowEvent]:
        """The workflow's events after ``after_seq``, oldest first."""
        path, params = _workflow_path(workflow_id, ":events"), {"afterSeq": after_seq}
        return list(self._call("GET", path, pb.ListEventsResponse, params=params).events)

    def list_node_events(self, node_id: str, *, after_seq: int = 0) -> list[pb.WorkflowEvent]:
        """The node's events after ``after_seq``, oldest first."""
        path, params = f"{_node_path(node_id)}:events", {"afterSeq": after_seq}
        return list(self._call("GET", path, pb.ListEventsResponse, params=params).events)

    def list_clusters(self) -> list[pb.Cluster]:
        """A Federate's member clusters with their health and free capacity."""
        return list(self._call("GET", "/clusters", pb.ListClustersResponse).clusters)

    def list_nodes(self) -> list[pb.ListNodeInfo]:
        """Every node."""
        return list(self._call("GET", "/nodes", pb.ListNodesResponse).nodes)

    def get_node(self, node_id: str) -> pb.GetNodeInfo:
        """One node by id or name."""
        return self._call("GET", _node_path(node_id), pb.GetNodeInfo)

    def remove_node(self, node_id: str) -> None:
        """Forget a node that is no longer up (offline or deprovisioned), with its holds."""
        self._request("DELETE", _node_path(node_id))

    def list_holds(self, node_id: str) -> list[pb.NodeHold]:
        """Every hold on a node, oldest first."""
        path = f"{_node_path(node_id)}/holds"
        return list(self._call("GET", path, pb.ListNodeHoldsResponse).holds)

    def add_hold(self, node_id: str, effect: str, reason: str = "") -> pb.NodeHold:
        """Place a cordon, evict or deprovision hold on a node; return it."""
        body = {"effect": effect, "reason": reason}
        return self._call("POST", f"{_node_path(node_id)}/holds", pb.NodeHold, json=body)

    def release_hold(self, node_id: str, hold_id: str | int) -> None:
        """Release one hold of a node by its id."""
        self._request("DELETE", f"{_node_path(node_id)}/holds/{path_segment(str(hold_id), 'hold')}")

    def uncordon(self, node_id: str) -> pb.UncordonNodeResponse:
        """Release the node's admin cordon holds: how many, and the holds left."""
        return self._call("POST", f"{_node_path(node_id)}:uncordon", pb.UncordonNodeResponse)

    def explain_workflow(
        self, workflow_id: str, *, include_finished: bool = False
    ) -> list[pb.StageExplanation]:
        """Why each waiting stage (every stage with ``include_finished``) is where it is."""
        params = {"all": "true"} if include_finished else {}
        path = _workflow_path(workflow_id, ":why")
        return list(self._call("GET", path, pb.ExplainWorkflowResponse, params=params).stages)

    def account_token(self, account_id: str) -> str:
        """Exchange this client's (identity-provider) token for an account's API token."""
        answer = self._request("GET", f"/accounts/{path_segment(account_id, 'account')}/token")
        token = answer.get("token")
        if not isinstance(token, str) or not token:
            raise Unavailable(
                f"{self._where} did not answer as a Fuzzball API (its account token reply"
                " holds no token)"
            )
        return token

    def read_logs(
        self, workflow_id: str, name: str | None = None, *, task_id: int | None = None
    ) -> list[pb.WorkflowLogChunk]:
        """The output of a workflow (or of one job, or one task) recorded so far."""
        return list(self.stream_logs(workflow_id, name, task_id=task_id))

    def read_log_page(
        self,
        workflow_id: str,
        name: str | None = None,
        *,
        task_id: int | None = None,
        page_size: int = LOG_PAGE,
        page_token: str = "",
        tail: int | None = None,
    ) -> tuple[list[pb.WorkflowLogChunk], str]:
        """One page of output (the last ``tail`` chunks' first page when given) and the token
        of the next page, empty when this page ends the log."""
        params = _log_params(name, task_id, tail)
        params.update(pageSize=page_size, pageToken=page_token)
        path = _workflow_path(workflow_id, ":log")
        try:
            response = self._http.get(path, params=params)
        except httpx.HTTPError as exc:
            raise _unreachable(self.named, self.base_url, exc) from None
        if response.status_code >= 400:
            raise _error_of(response)
        chunks = [
            _log_chunk(_json_line(line, response, self._where))
            for line in response.text.splitlines()
            if line
        ]
        return chunks, response.headers.get(NEXT_PAGE_TOKEN, "")

    def stream_logs(
        self,
        workflow_id: str,
        name: str | None = None,
        *,
        follow: bool = False,
        task_id: int | None = None,
        tail: int | None = None,
    ) -> Iterator[pb.WorkflowLogChunk]:
        """The output of a workflow or one of its jobs (its last ``tail`` chunks when given),
        page by page; with ``follow``, until the workflow ends."""
        if not follow:
            token = ""
            while True:
                chunks, token = self.read_log_page(
                    workflow_id, name, task_id=task_id, page_token=token, tail=tail
                )
                yield from chunks
                if not token:
                    return
        params = _log_params(name, task_id, tail)
        params["show.follow"] = "true"
        path = _workflow_path(workflow_id, ":log")
        try:
            with self._http.stream(
                "GET", _checked_path(path), params=params, timeout=None
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _error_of(response)
                for line in response.iter_lines():
                    if line.strip():
                        yield _log_chunk(_json_line(line, response, self._where))
        except httpx.HTTPError as exc:
            cause = _without_userinfo(str(exc), self.base_url)
            raise Unavailable(f"log stream from {self._where} broke off: {cause}") from None


def _log_params(name: str | None, task_id: int | None, tail: int | None) -> dict[str, Any]:
    """The query parameters that choose which output a log read is about."""
    params: dict[str, Any] = {}
    if name:
        params["name"] = name
    if task_id is not None:
        params["taskId"] = task_id
    if tail is not None:
        params["show.tail"] = tail
    return params


def path_segment(value: str, what: str = "ID") -> str:
    """``value`` (an ID or name a user typed) escaped as one segment of a request's path:
    ``a/b`` cannot reach another route, and ``.`` or ``..``, which a URL resolves against
    the path before it (``/secrets/..`` is ``/``), are refused."""
    if not value or value in _DOT_SEGMENTS:
        raise InvalidArgument(f"{what} {value!r} is not valid: it must be an ID or a name")
    return quote(value, safe="")


def _checked_path(path: str) -> str:
    """``path`` unless one of its segments is ``.`` or ``..``: every path is built here, so
    one can only come from an ID given unescaped (each goes through :func:`path_segment`;
    this keeps a forgotten one from reaching another route)."""
    if any(segment in _DOT_SEGMENTS for segment in path.split("?", 1)[0].split("/")):
        raise InvalidArgument(f"request path {path!r} has a '.' or '..' segment")
    return path


#: the segments a URL resolves away (RFC 3986, 5.2.4)
_DOT_SEGMENTS = frozenset({".", ".."})


def _workflow_path(workflow_id: str, action: str = "") -> str:
    """``/workflows/<id>`` and an ``action`` (``:status``), the id one path segment."""
    return f"/workflows/{path_segment(workflow_id, 'workflow')}{action}"


def _node_path(node_id: str) -> str:
    """``/nodes/<id or name>``, the reference escaped so it stays one path segment."""
    return f"/nodes/{path_segment(node_id, 'node')}"


def _log_chunk(line: dict[str, Any]) -> pb.WorkflowLogChunk:
    """One line of a log stream: ``{"result": chunk}``, or ``{"error": status}`` raised."""
    if "error" in line:
        raise FuzzballError.from_status(line["error"])
    return read_reply(line.get("result", {}), pb.WorkflowLogChunk)
