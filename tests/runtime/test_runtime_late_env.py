"""Variables known only once the rest of a container is set up: ``Container.start(late_env)``
(the agent's workflow token, still on its way while the image, cgroups and metering are
made ready)."""

from __future__ import annotations

import pytest

from fuzzball_runtime import PIPE, Container, ContainerSpec

pytestmark = pytest.mark.root


def test_late_variables_reach_the_command_over_the_specs(image, state_dir) -> None:
    spec = ContainerSpec(
        image=image,
        command=["sh", "-c", "echo $EARLY $LATE"],
        env={"EARLY": "spec", "LATE": "spec"},
        stdout=PIPE,
        state_dir=state_dir,
    )
    with Container(spec).start(lambda: {"LATE": "late"}) as handle:
        assert handle.stdout is not None
        output = handle.stdout.read().decode()
        handle.wait(timeout=30)
    assert output == "spec late\n"
    assert spec.env["LATE"] == "spec"  # the spec itself is left as it was


def test_a_late_env_that_fails_fails_the_start_and_releases_what_was_set_up(
    image, state_dir
) -> None:
    # memory and metering: cgroups and programs are set up before late_env is called; the
    # check after every test (conftest) finds none of them, nor the image's mount, left
    spec = ContainerSpec(
        image=image, command=["true"], memory=64 << 20, metering=True, state_dir=state_dir
    )

    def no_token() -> dict[str, str]:
        raise LookupError("no token")

    with pytest.raises(LookupError, match="no token"):
        Container(spec).start(no_token)
