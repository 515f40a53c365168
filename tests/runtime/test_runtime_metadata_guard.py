"""The instance metadata guard (``ContainerSpec.metadata_guard``, ``fuzzball_runtime.guard``):
the host's check, a job never started unguarded, metering beside it, kept groups.

What a guarded job reaches (and does not) over real interfaces is tested with the other
network tests, in network namespaces (``test_runtime_network.py``)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from fuzzball_runtime import (
    Bind,
    Container,
    ContainerSpec,
    MetadataGuardError,
    cgroups,
    check_metadata_guard,
    guard,
    kept,
)
from fuzzball_runtime.native import lib

pytestmark = pytest.mark.root


class RefusingAttach:
    """The compiled module, but its guard attach fails as a kernel refusing it would."""

    def __getattr__(self, name: str) -> Any:
        return getattr(lib, name)

    @staticmethod
    def fbrt_guard_attach(cgroup_dir: bytes, err: Any) -> int:
        err.err = errno.EPERM
        err.msg = b"bpf BPF_PROG_ATTACH cgroup_skb/egress metadata guard: Operation not permitted"
        return -errno.EPERM


def test_this_host_passes_the_metadata_guard_check() -> None:
    check_metadata_guard()  # the program loads and judges the test packets rightly


def test_a_host_without_cgroup_v2_fails_the_check_naming_the_setting(monkeypatch) -> None:
    monkeypatch.setattr(cgroups, "detect_layout", lambda: cgroups.CgroupLayout(None))

    with pytest.raises(MetadataGuardError, match=r"^substrate\.metadata-guard: .*cgroup v2"):
        check_metadata_guard()


def test_a_job_whose_guard_cannot_be_attached_is_not_started(
    image, state_dir, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(guard, "lib", RefusingAttach())
    spec = ContainerSpec(
        image=image,
        command=["touch", "/out/ran"],
        binds=[Bind(str(tmp_path), "/out")],
        metadata_guard=True,
        state_dir=state_dir,
    )

    with pytest.raises(MetadataGuardError, match=r"substrate\.metadata-guard") as refused:
        Container(spec).start()

    assert "not started" in refused.value.message
    assert refused.value.errno == errno.EPERM
    assert not (tmp_path / "ran").exists()  # and the state_dir fixture finds nothing left


def test_a_guarded_job_is_metered_as_well(image, state_dir) -> None:
    script = "nc -l -p 9000 >/dev/null & sleep 0.2; echo payload | nc 127.0.0.1 9000; wait"
    spec = ContainerSpec(
        image=image,
        command=["sh", "-c", script],
        network=True,
        metering=True,
        metadata_guard=True,
        state_dir=state_dir,
    )

    with Container(spec).start() as handle:
        assert handle.wait(timeout=30).exit_code == 0
        counters = handle.metering()

    assert handle.warnings == ()
    assert counters is not None and counters.egress_bytes > 0


def test_a_kept_group_goes_only_to_a_job_with_the_same_guard(image, state_dir) -> None:
    def shape(guarded: bool) -> kept.Shape | None:
        spec = ContainerSpec(
            image=image,
            command=["true"],
            keep_cgroups="owner",
            metadata_guard=guarded,
            state_dir=state_dir,
        )
        return kept.shape_of(spec, "group")

    assert shape(True) != shape(False)


def test_a_job_asking_for_the_guard_alone_gets_a_cgroup_for_it(image) -> None:
    spec = ContainerSpec(image=image, command=["true"], metadata_guard=True)

    assert spec.needs_cgroups()
