"""A container's processes hold only the capabilities of its set (``ContainerSpec.
capabilities``, Podman's default set unless given): a job running as root is not root over
the node."""

from __future__ import annotations

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_runtime import Container, ContainerSpec
from fuzzball_runtime.capabilities import DEFAULT, NUMBERS, mask, normalized

pytestmark = pytest.mark.root


def held(run, field: str, **fields) -> int:
    """The mask of ``field`` (CapBnd, CapEff, ...) of the container's command."""
    status, output = run(f"grep ^{field}: /proc/self/status", **fields)
    assert status.exit_code == 0, output
    return int(output.split()[1], 16)


def test_a_root_job_holds_only_the_default_set(run) -> None:
    assert held(run, "CapEff") == mask(DEFAULT)
    assert held(run, "CapPrm") == mask(DEFAULT)


def test_what_the_set_leaves_out_is_gone_from_the_bounding_set(run) -> None:
    # no exec, of a set-user-ID root program or of anything as root, gets them back
    assert held(run, "CapBnd") == mask(DEFAULT)
    assert held(run, "CapAmb") == 0


def test_a_root_job_cannot_mount(run) -> None:
    status, _ = run("mkdir -p /mnt/x && mount -t tmpfs scratch /mnt/x")
    assert status.exit_code != 0


def test_a_root_job_can_still_chown_and_switch_users(run) -> None:
    status, output = run("touch /f && chown 1000:1000 /f && su -s /bin/sh nobody -c id 2>&1 || id")
    assert status.exit_code == 0, output


def test_a_set_named_in_the_spec_is_what_the_job_holds(run) -> None:
    assert held(run, "CapEff", capabilities=frozenset({"SETUID", "SETGID", "NET_ADMIN"})) == (
        mask(frozenset({"SETUID", "SETGID", "NET_ADMIN"}))
    )


def test_none_keeps_every_capability_the_agent_has(run) -> None:
    with open("/proc/self/status") as status:
        ours = next(int(line.split()[1], 16) for line in status if line.startswith("CapBnd:"))
    assert held(run, "CapBnd", capabilities=None) == ours


def test_a_job_of_another_user_holds_none(run) -> None:
    assert held(run, "CapEff", uid=1000, gid=1000) == 0


def test_an_unknown_capability_is_refused_naming_it(image, state_dir) -> None:
    spec = ContainerSpec(
        image=image, command=["true"], state_dir=state_dir, capabilities=frozenset({"WIZARD"})
    )
    with pytest.raises(InvalidArgument, match=r"spec.capabilities: unknown capability WIZARD"):
        Container(spec).start()


def test_names_are_read_with_or_without_cap_and_in_any_case() -> None:
    assert normalized(["cap_chown", "Net_Raw"], "x") == frozenset({"CHOWN", "NET_RAW"})
    assert normalized(["ALL"], "x") is None
    assert NUMBERS["BPF"] == 39  # capabilities(7)
