"""Per-job traffic metering with cgroup_skb programs written as raw BPF instructions."""

from __future__ import annotations

import pytest

from fuzzball_runtime import Container, ContainerSpec

pytestmark = pytest.mark.root

TRANSFER = 4_000_000
TOLERANCE = 0.05

# A TCP transfer over the container's own loopback: both ends are in the job's cgroup, so the
# payload is counted once leaving (egress) and once arriving (ingress).
TRANSFER_SCRIPT = f"""
head -c {TRANSFER} /dev/zero > /tmp/payload
nc -l -p 9000 -e dd of=/dev/null bs=65536 2>/dev/null &
sleep 0.3
nc 127.0.0.1 9000 < /tmp/payload
wait
"""


def test_loopback_transfer_is_counted_within_five_percent(image, state_dir) -> None:
    spec = ContainerSpec(
        image=image,
        command=["sh", "-c", TRANSFER_SCRIPT],
        network=True,
        metering=True,
        state_dir=state_dir,
    )
    with Container(spec).start() as handle:
        assert handle.metering_enabled
        status = handle.wait(timeout=30)
        counters = handle.metering()
    assert status.exit_code == 0
    assert counters is not None
    assert abs(counters.egress_bytes - TRANSFER) / TRANSFER < TOLERANCE
    assert abs(counters.ingress_bytes - TRANSFER) / TRANSFER < TOLERANCE
    assert counters.egress_packets > 0 and counters.ingress_packets > 0


def test_counters_are_readable_while_the_job_runs(image, state_dir) -> None:
    spec = ContainerSpec(
        image=image, command=["sleep", "30"], network=True, metering=True, state_dir=state_dir
    )
    with Container(spec).start() as handle:
        counters = handle.metering()
        assert counters is not None
        assert counters.egress_bytes == 0


def test_each_job_counts_only_its_own_traffic(image, state_dir) -> None:
    # the programs are shared by every job of the process; each attachment counts apart
    def spec(command: list[str]) -> ContainerSpec:
        return ContainerSpec(
            image=image, command=command, network=True, metering=True, state_dir=state_dir
        )

    with Container(spec(["sleep", "30"])).start() as idle:
        with Container(spec(["sh", "-c", TRANSFER_SCRIPT])).start() as busy:
            assert busy.wait(timeout=30).exit_code == 0
            busy_counters = busy.metering()
        idle_counters = idle.metering()
    assert busy_counters is not None and idle_counters is not None
    assert busy_counters.egress_bytes >= TRANSFER
    assert (idle_counters.egress_bytes, idle_counters.ingress_bytes) == (0, 0)


def test_network_namespace_has_only_loopback_up(run) -> None:
    _, output = run("cat /proc/net/dev | tail -n +3 | cut -d: -f1", network=True)
    assert output.split() == ["lo"]


def test_metering_off_is_none(image, state_dir) -> None:
    spec = ContainerSpec(image=image, command=["true"], state_dir=state_dir)
    with Container(spec).start() as handle:
        handle.wait(timeout=10)
        assert handle.metering() is None


def test_a_failed_attach_names_the_step_and_errno(tmp_path) -> None:
    from fuzzball_runtime.errors import MeteringError
    from fuzzball_runtime.native import check, lib, new_error

    err = new_error()
    with pytest.raises(MeteringError) as caught:
        # A plain directory is no cgroup: loading works, attaching cannot.
        check(lib.fbrt_meter_attach(str(tmp_path).encode(), err), err, MeteringError)
    assert f"bpf BPF_PROG_ATTACH cgroup_skb/ingress to {tmp_path}" in str(caught.value)
    assert caught.value.errno > 0


def test_metering_that_cannot_be_attached_warns_instead_of_going_silent(
    image, state_dir, monkeypatch
) -> None:
    from fuzzball_runtime import RuntimeWarningMessage, cgroups

    real = cgroups.detect_layout()
    # A host whose v1 controllers have no cgroup v2 tree next to them.
    monkeypatch.setattr(
        cgroups, "detect_layout", lambda: cgroups.CgroupLayout(unified=None, v1=real.v1)
    )
    spec = ContainerSpec(image=image, command=["true"], metering=True, state_dir=state_dir)
    with pytest.warns(RuntimeWarningMessage, match="metering is off"):
        handle = Container(spec).start()
    with handle:
        status = handle.wait(timeout=10)
        assert handle.metering() is None
    assert any("metering is off" in note for note in status.warnings)
