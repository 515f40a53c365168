"""Invariants of the default scheduler over random clusters, queues, releases and holds."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.scheduler_cluster import GPU, GiB, cluster, job, pinned_node, topology

from fuzzball_core.scheduling import CpuAffinity, CpuPinning, Hold, JobRequest, NodeInfo, Resources

HOLD = Hold("cordon", "admin", "property test")

nodes_strategy = st.lists(
    st.tuples(
        st.integers(1, 16),  # cores
        st.integers(1, 64),  # memory GiB
        st.sampled_from([0, 0, 2, 4]),  # gpus
        st.sampled_from([None, "a", "b"]),  # zone
        st.sampled_from([True, True, True, False]),  # ready
        st.sampled_from([False, False, False, True]),  # device plugin failed
    ),
    min_size=1,
    max_size=6,
)

job_strategy = st.tuples(
    st.integers(0, 12),  # cores
    st.integers(0, 40),  # memory GiB
    st.sampled_from([0, 0, 0, 1, 2]),  # gpus
    st.sampled_from([1, 1, 1, 2, 3]),  # nodes
    st.sampled_from([False, False, False, True]),  # exclusive
    st.sampled_from([None, None, "a", "b"]),  # zone
    st.sampled_from([None, 10.0, 100.0, 1000.0]),  # expected runtime
    st.integers(0, 2),  # priority
    st.sampled_from(["", "x", "y"]),  # account: several accounts' jobs are ordered by fair share
)


def _node_info(node_id, spec, held):
    cores, memory, gpus, zone, ready, plugin_failed = spec
    return NodeInfo(
        node_id,
        Resources(cores, memory * GiB, {GPU: gpus} if gpus else {}),
        annotations={"zone": zone} if zone else {},
        holds=(HOLD,) if held else (),
        ready=ready,
        device_plugin_failed=plugin_failed,
    )


def _job(job_id, spec, submitted_at):
    cores, memory, gpus, nodes, exclusive, zone, runtime, priority, account = spec
    return JobRequest(
        job_id,
        Resources(cores, memory * GiB, {GPU: gpus} if gpus else {}),
        nodes=nodes,
        exclusive=exclusive,
        annotations={"zone": zone} if zone else {},
        submitted_at=submitted_at,
        priority=priority,
        expected_runtime=runtime,
        account=account,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes_strategy, st.data())
def test_placements_never_over_commit_a_node_and_every_waiting_job_is_diagnosed(specs, data):
    held = {f"n{i}": data.draw(st.booleans(), label=f"n{i} held") for i in range(len(specs))}
    infos = {f"n{i}": _node_info(f"n{i}", spec, held[f"n{i}"]) for i, spec in enumerate(specs)}
    scheduler = cluster(*infos.values())
    running: dict[str, tuple[JobRequest, tuple[str, ...]]] = {}
    pending: dict[str, JobRequest] = {}
    serial = 0
    for step in range(data.draw(st.integers(1, 6), label="passes")):
        for spec in data.draw(st.lists(job_strategy, max_size=8), label="arrivals"):
            serial += 1
            pending[f"j{serial}"] = _job(f"j{serial}", spec, submitted_at=serial)
        now = step * 50.0
        result = scheduler.schedule(list(pending.values()), now)

        placed_ids = {placement.job_id for placement in result.placements}
        assert placed_ids.isdisjoint(result.diagnoses)
        assert placed_ids | set(result.diagnoses) == set(pending)
        for diagnosis in result.diagnoses.values():
            counted = diagnosis.nodes_available + sum(diagnosis.groups.values())
            assert counted == diagnosis.nodes_considered == len(infos)

        for placement in result.placements:
            job = pending.pop(placement.job_id)
            assert len(set(placement.node_ids)) == len(placement.node_ids) == job.nodes
            for node_id in placement.node_ids:
                info = infos[node_id]
                assert info.takes_new_work
                assert all(info.annotations.get(k) == v for k, v in job.annotations.items())
                assert not (job.resources.devices and info.device_plugin_failed)
            running[job.id] = (job, placement.node_ids)

        for node_id, info in infos.items():
            on_node = [job for job, node_ids in running.values() if node_id in node_ids]
            if any(job.exclusive for job in on_node):
                assert len(on_node) == 1
                continue
            capacity = info.capacity
            assert sum(job.resources.cores for job in on_node) <= capacity.cores
            assert sum(job.resources.memory for job in on_node) <= capacity.memory
            for kind, count in capacity.devices.items():
                assert sum(job.resources.devices.get(kind, 0) for job in on_node) <= count
            for job in on_node:
                assert set(job.resources.devices) <= set(capacity.devices)

        for job_id in data.draw(st.lists(st.sampled_from(sorted(running) or ["-"])), label="ends"):
            if job_id in running:
                scheduler.release(job_id)
                del running[job_id]
        toggled = data.draw(st.sampled_from(sorted(infos)), label="hold toggled")
        held[toggled] = not held[toggled]
        infos[toggled] = _node_info(toggled, specs[int(toggled[1:])], held[toggled])
        scheduler.upsert_node(infos[toggled])


layout_strategy = st.tuples(
    st.integers(1, 2),  # sockets
    st.integers(1, 2),  # NUMA nodes per socket
    st.integers(1, 4),  # cores per NUMA node
    st.integers(1, 2),  # threads per core
)

pinned_job_strategy = st.tuples(
    st.integers(1, 6),  # cores
    st.sampled_from([None, CpuAffinity.CORE, CpuAffinity.SOCKET, CpuAffinity.NUMA]),
    st.sampled_from([None, None, 1, 2]),  # sockets
    st.booleans(),  # threads
    st.sampled_from([False, False, False, True]),  # exclusive
    st.sampled_from([frozenset(), frozenset({"tcp/80"}), frozenset({"tcp/80", "udp/53"})]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(layout_strategy, min_size=1, max_size=3), st.data())
def test_pinned_jobs_never_share_a_core_and_a_host_port_is_held_once_per_node(layouts, data):
    infos = {f"n{i}": pinned_node(f"n{i}", topology(*layout)) for i, layout in enumerate(layouts)}
    scheduler = cluster(*infos.values())
    #: job id -> (request, its nodes, its CPUs per node)
    running: dict[str, tuple[JobRequest, tuple[str, ...], dict[str, tuple[int, ...]]]] = {}
    serial = 0
    for _ in range(data.draw(st.integers(1, 5), label="passes")):
        pending = []
        for cores, affinity, sockets, threads, exclusive, ports in data.draw(
            st.lists(pinned_job_strategy, max_size=6), label="arrivals"
        ):
            serial += 1
            pin = CpuPinning(affinity, sockets, threads) if affinity or sockets or threads else None
            pending.append(
                job(f"j{serial}", cores, 0, exclusive=exclusive, cpu=pin, host_ports=ports)
            )
        result = scheduler.schedule(pending, now=0)
        by_id = {request.id: request for request in pending}
        for placement in result.placements:
            request = by_id[placement.job_id]
            cpus = dict(placement.cpus)
            assert set(cpus) == (set(placement.node_ids) if request.cpu else set())
            running[request.id] = (request, placement.node_ids, cpus)

        for node_id, info in infos.items():
            on_node = [(r, c) for r, nodes, c in running.values() if node_id in nodes]
            held = [cpu for _, cpus in on_node for cpu in cpus.get(node_id, ())]
            assert len(held) == len(set(held)), "two pinned jobs share a logical CPU"
            for request, cpus in on_node:
                if request.cpu is None or request.exclusive:
                    continue
                given = set(cpus[node_id])
                cores = [core for core in info.cpu_topology if given & set(core.threads)]
                assert len(cores) == max(request.resources.cores, 1)
            ports = [port for request, _ in on_node for port in request.host_ports]
            assert len(ports) == len(set(ports)), "a host port is held twice on one node"

        for job_id in data.draw(st.lists(st.sampled_from(sorted(running) or ["-"])), label="ends"):
            if job_id in running:
                scheduler.release(job_id)
                del running[job_id]
