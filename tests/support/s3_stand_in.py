"""An S3 stand-in for tests and the bench: moto's server mode on loopback.

moto's server speaks S3's wire protocol over HTTP (signed requests, multipart uploads, ranged
GETs), which makes it the best stand-in for S3 here; boto3 talks to it exactly as it talks
to AWS. It runs as its own process with request signing enforced: the first three requests
(made by :func:`S3StandIn.start`) create an IAM user allowed ``s3:*`` and its access key,
and every later request must be signed with that key, so a transfer without the right s3
secret is refused as it would be by S3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import boto3
import httpx

from support.ports import free_port

REGION = "us-east-1"
#: requests moto answers before it starts checking signatures (the set-up below)
_SETUP_REQUESTS = 3
_ALLOW_S3 = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
}


@dataclass
class S3StandIn:
    """A running moto server and the access key it accepts."""

    process: subprocess.Popen[bytes]
    endpoint: str
    access_key_id: str
    secret_access_key: str

    @classmethod
    def start(cls) -> S3StandIn:
        """Start moto's server on a free loopback port and make its one access key."""
        port = free_port()
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_SETUP_REQUESTS)}
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                # not counted as an action: moto's own status page
                httpx.get(f"{endpoint}/moto-api/", timeout=2)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.2)
        iam = boto3.client(
            "iam",
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName="fuzzball-tests")
        iam.put_user_policy(
            UserName="fuzzball-tests", PolicyName="s3", PolicyDocument=json.dumps(_ALLOW_S3)
        )
        key = iam.create_access_key(UserName="fuzzball-tests")["AccessKey"]
        return cls(process, endpoint, key["AccessKeyId"], key["SecretAccessKey"])

    def client(self) -> Any:
        """A boto3 client signing with the stand-in's key."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
        )

    def secret_fields(self) -> dict[str, str]:
        """The body of an s3 secret holding the stand-in's key (the swagger's field names)."""
        return {
            "accessKeyId": self.access_key_id,
            "secretAccessKey": self.secret_access_key,
            "region": REGION,
            "endpoint": self.endpoint,
        }

    def stop(self) -> None:
        """Stop the server (its buckets are in its memory: gone with it)."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
