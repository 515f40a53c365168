"""A whole cluster over TLS: Substrate processes dial Orchestrate's gRPC verifying its
certificate against ``tls.ca-file``, and write a pulled image back to the object cache and
fetch it again over https with the same CA."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.cluster import Cluster

from fuzzball_core.certificates import CertificateAuthority, local_hosts

pytestmark = [pytest.mark.root, pytest.mark.slow]

HELLO = (
    "version: v1\njobs:\n  hi:\n    image: {uri: docker://alpine:latest}\n"
    "    command: [/bin/cat, /etc/alpine-release]\n"
)
FROM_THE_CACHE = (
    "version: v1\njobs:\n  again:\n    image: {uri: fuzzball://group/docker/alpine:latest}\n"
    "    command: [/bin/cat, /etc/alpine-release]\n"
)


def test_nodes_work_over_tls_and_fetch_the_object_cache_over_https(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca")
    server = ca.issue_server_certificate(tmp_path / "s.crt", tmp_path / "s.key", local_hosts())
    tls = {
        "ca-file": str(ca.cert_file),
        "cert-file": str(server.cert_file),
        "key-file": str(server.key_file),
    }
    cluster = make_cluster(agents=1, images={"cache-write-back": True}, tls=tls)
    orchestrate = cluster.orchestrate
    assert orchestrate.rest_url.startswith("https://")

    pulled = orchestrate.start_workflow(HELLO, name="over-tls")
    assert orchestrate.wait_for(pulled, timeout=120).status == "FINISHED"
    written = [e.kind for e in orchestrate.events(pulled) if e.kind == "image_written_back"]
    assert written == ["image_written_back"]

    reuse = orchestrate.start_workflow(FROM_THE_CACHE, name="from-the-cache")
    assert orchestrate.wait_for(reuse, timeout=120).status == "FINISHED"
    assert orchestrate.logs(reuse, "jobs.again") == "3.99.0\n"
