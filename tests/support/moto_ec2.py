"""moto's server standing in for EC2, over real HTTP on loopback.

moto is the best stand-in for EC2 this machine has: it answers boto3's real requests with EC2's
XML and keeps the instances' state (user data, tags, lifecycle) between calls. It is not EC2:
it starts no machines (the boot hook in :mod:`support.cloud_boot` starts a Substrate for each
instance instead) and checks no AMI or quota.

:class:`MotoEc2` serves moto's WSGI app in a thread behind a thin recorder, so a test can count
the EC2 actions the driver sent (``TerminateInstances`` once, say) without any hook in the
driver itself.
"""

from __future__ import annotations

import base64
import io
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

import boto3
import httpx
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import WSGIRequestHandler, make_server

REGION = "us-east-1"
#: moto's fake credentials: anything is accepted; these are what the driver signs with
ACCESS_KEY_ID = "AKIAFUZZBALLTEST0001"
SECRET_ACCESS_KEY = "moto-secret-access-key-never-logged-0123456789"

Environ = dict[str, Any]
StartResponse = Callable[..., Any]


class _Recorder:
    """WSGI middleware noting each EC2 query action and its ``InstanceId.N`` arguments."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.lock = threading.Lock()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        form = parse_qs(body.decode(errors="replace"))
        action = (form.get("Action") or [""])[0]
        ids = tuple(v[0] for k, v in sorted(form.items()) if k.startswith("InstanceId."))
        with self.lock:
            self.calls.append((action, ids))
        # moto reads the body again
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return self.app(environ, start_response)


class _Quiet(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        """Not every request on the test's output."""


class MotoEc2:
    """moto's server on ``127.0.0.1`` (a free port), recording the actions it is sent."""

    def __init__(self) -> None:
        self._recorder = _Recorder(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(
            "127.0.0.1", 0, self._recorder, threaded=True, request_handler=_Quiet
        )
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.reset()
        self.client = boto3.client(
            "ec2",
            region_name=REGION,
            endpoint_url=self.url,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
        )

    def reset(self) -> None:
        """Forget every instance and recorded call (moto's backends live in this process's
        memory, shared by every server it starts). Resetting walks every backend moto has
        loaded, which takes seconds on a loaded CI machine: hence the long timeout."""
        httpx.post(f"{self.url}/moto-api/reset", timeout=120).raise_for_status()
        with self._recorder.lock:
            self._recorder.calls.clear()

    def driver_config(self, **more: Any) -> dict[str, Any]:
        """The aws provisioner's configuration for this stand-in."""
        return {
            "region": REGION,
            "endpoint-url": self.url,
            "access-key-id": ACCESS_KEY_ID,
            "secret-access-key": SECRET_ACCESS_KEY,
            **more,
        }

    def calls(self, action: str) -> list[tuple[str, ...]]:
        """The instance ids of each ``action`` request received, in order."""
        with self._recorder.lock:
            return [ids for name, ids in self._recorder.calls if name == action]

    def instance(self, instance_id: str) -> dict[str, Any]:
        """DescribeInstances' record of one instance."""
        answer = self.client.describe_instances(InstanceIds=[instance_id])
        return dict(answer["Reservations"][0]["Instances"][0])

    def user_data(self, instance_id: str) -> str:
        """The instance's user data, as the instance would read it (DescribeInstanceAttribute)."""
        answer = self.client.describe_instance_attribute(
            InstanceId=instance_id, Attribute="userData"
        )
        return base64.b64decode(answer["UserData"]["Value"]).decode()

    def states(self) -> dict[str, str]:
        """Every instance's id and state name."""
        found: dict[str, str] = {}
        for reservation in self.client.describe_instances()["Reservations"]:
            for instance in reservation["Instances"]:
                found[instance["InstanceId"]] = instance["State"]["Name"]
        return found

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
