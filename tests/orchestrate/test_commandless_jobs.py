"""A job with nothing to run is refused at submission, naming its ``command`` field; only the
pinned image's config can tell, so an image the backend could not read is left to the node.
An object-cache image's config is the one its object in the object cache names."""

from __future__ import annotations

import pytest

from fuzzball_core.config import parse_config
from fuzzball_core.drivers import ImageConfig
from fuzzball_core.errors import InvalidArgument, NotFound
from fuzzball_core.orchestrate.capabilities import commandless
from fuzzball_core.orchestrate.image_stages import configure_images
from fuzzball_core.spec.models import Job
from fuzzball_core.store.object_cache import CacheAddress, ObjectCache


def _job(**fields: object) -> Job:
    return Job.model_validate({"image": {"uri": "docker://cfg/bare:1"}, **fields})


def test_no_command_args_script_entrypoint_or_cmd_is_refused_naming_the_command_field() -> None:
    (problem,) = commandless("jobs.a", _job(env=["A=1"]), ImageConfig(env=("A=1",)))

    assert problem == (
        "jobs.a.command",
        "none of command, args and script is set, and the image docker://cfg/bare:1 sets no"
        " Entrypoint or Cmd: there is nothing to run",
    )


def test_the_images_cmd_or_entrypoint_is_enough() -> None:
    assert commandless("jobs.a", _job(), ImageConfig(cmd=("/bin/sh",))) == []
    assert commandless("jobs.a", _job(), ImageConfig(entrypoint=("/bin/serve",))) == []


def test_a_script_or_args_are_enough_whatever_the_image() -> None:
    assert commandless("jobs.a", _job(script="true"), ImageConfig()) == []
    assert commandless("jobs.a", _job(args=["/bin/true"]), ImageConfig()) == []


def test_an_image_whose_config_is_unknown_is_left_to_the_node() -> None:
    assert commandless("jobs.a", _job(), None) == []


# -- through submission, with images held by the object cache ------------------------------------

COMMANDLESS = """
version: v1
jobs:
  a:
    image: {uri: fuzzball://user/tools}
    env: [A=1]
"""


@pytest.fixture
def cache(harness, tmp_path) -> ObjectCache:
    """The harness with image stages on, and its object cache."""
    config = parse_config({"data-dir": str(tmp_path / "data")})
    return configure_images(harness.engine, harness.service, config)


def _store(harness, cache: ObjectCache, config: ImageConfig) -> str:
    """Put the user's ``tools`` image, with ``config``, in the object cache; its digest."""
    address = CacheAddress.checked(harness.user.account_id, "user", "tools")
    entry = cache.store(address, [b"x"], config=cache.store_config(config.as_oci()))
    return entry.digest


def test_a_cached_image_without_entrypoint_or_cmd_refuses_a_commandless_job(
    harness, cache: ObjectCache
) -> None:
    _store(harness, cache, ImageConfig(env=("A=1",)))

    with pytest.raises(
        InvalidArgument, match=r"jobs\.a\.command: none of command, args and script"
    ):
        harness.submit(COMMANDLESS)


def test_a_cached_image_with_a_cmd_takes_a_commandless_job(harness, cache: ObjectCache) -> None:
    _store(harness, cache, ImageConfig(cmd=("/bin/sh",)))

    assert harness.status(harness.submit(COMMANDLESS)) == "STARTED"


def test_an_image_is_stored_only_with_a_config_the_object_cache_holds(
    harness, cache: ObjectCache
) -> None:
    absent = "sha256:" + "ab" * 32
    address = CacheAddress.checked(harness.user.account_id, "user", "tools")

    with pytest.raises(NotFound, match="holds no config"):
        cache.store(address, [b"x"], config=absent)
    assert cache.read_config(absent) is None
    assert cache.lookup(address) is None
