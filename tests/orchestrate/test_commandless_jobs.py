"""A job with nothing to run is refused at submission, naming its ``command`` field; only the
pinned image's config can tell, so an image the backend could not read is left to the node."""

from __future__ import annotations

from fuzzball_core.drivers import ImageConfig
from fuzzball_core.orchestrate.capabilities import commandless
from fuzzball_core.spec.models import Job


def _job(**fields: object) -> Job:
    return Job.model_validate({"image": {"uri": "docker://cfg/bare:1"}, **fields})


def test_no_command_script_entrypoint_or_cmd_is_refused_naming_the_command_field() -> None:
    (problem,) = commandless("jobs.a", _job(args=["x"]), ImageConfig(env=("A=1",)))

    assert problem == (
        "jobs.a.command",
        "neither command nor script is set, and the image docker://cfg/bare:1 sets no"
        " Entrypoint or Cmd: there is nothing to run",
    )


def test_the_images_cmd_or_entrypoint_is_enough() -> None:
    assert commandless("jobs.a", _job(), ImageConfig(cmd=("/bin/sh",))) == []
    assert commandless("jobs.a", _job(), ImageConfig(entrypoint=("/bin/serve",))) == []


def test_a_script_is_enough_whatever_the_image() -> None:
    assert commandless("jobs.a", _job(script="true"), ImageConfig()) == []


def test_an_image_whose_config_is_unknown_is_left_to_the_node() -> None:
    assert commandless("jobs.a", _job(), None) == []
