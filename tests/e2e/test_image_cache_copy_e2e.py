"""A node whose cache lacks an image the object cache holds (written back by an earlier
pull) gets the converted copy from Orchestrate instead of pulling the layers again."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.cluster import Cluster

from fuzzball_core.store.object_cache import CacheAddress

pytestmark = [pytest.mark.root, pytest.mark.slow]

PULL_STAGE = "images.docker://alpine:latest"
HELLO = (
    "version: v1\njobs:\n  hi:\n    image: {uri: docker://alpine:latest}\n"
    "    command: [/bin/cat, /etc/alpine-release]\n"
)


def test_a_node_without_the_image_fetches_the_written_back_copy_not_the_layers(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(agents=1, images={"cache-write-back": True})
    orchestrate = cluster.orchestrate
    first = orchestrate.start_workflow(HELLO, name="first")
    assert orchestrate.wait_for(first, timeout=120).status == "FINISHED"
    stored = orchestrate.call(
        lambda: orchestrate.service.object_cache.lookup(
            # the group of the account that submitted it: its own, as it has no organization
            CacheAddress.checked(
                "",
                "group",
                "docker/alpine:latest",
                group=orchestrate.service.object_cache.group_of(orchestrate.admin.account_id),
            )
        )
    )
    assert stored is not None
    # the node's cache as a fresh node's: empty
    for cached in (cluster.directory / "node-1" / "cache" / "images").iterdir():
        cached.unlink()

    second = orchestrate.start_workflow(HELLO, name="second")

    assert orchestrate.wait_for(second, timeout=120).status == "FINISHED"
    assert orchestrate.logs(second, "jobs.hi") == "3.99.0\n"
    downloads = {
        e.data["step"]
        for e in orchestrate.events(second)
        if e.stage_name == PULL_STAGE
        and e.kind == "image_progress"
        and str(e.data.get("step", "")).startswith("download ")
    }
    assert downloads == {f"download {stored.content}"}
