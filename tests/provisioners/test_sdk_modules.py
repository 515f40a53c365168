"""Cloud SDK modules loaded on first use (provisioners/sdk_modules.py) work as imported ones
do: a driver's first client is made in a process that never imported its SDK before."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_the_aws_drivers_first_client_is_made_in_a_fresh_process():
    # botocore.exceptions is loaded lazily beside boto3; boto3's own import of it used to
    # find it in sys.modules unbound on botocore, and the first client failed
    script = textwrap.dedent(
        """
        from fuzzball_provisioners import aws
        settings = aws.AwsSettings.model_validate(
            {"region": "us-east-1", "access-key-id": "a", "secret-access-key": "b"}
        )
        aws._connect(settings)
        print("connected")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "connected" in done.stdout
