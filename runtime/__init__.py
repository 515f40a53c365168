"""fuzzball_runtime: the node runtime's Python face over the C core in runtime/csrc.

Every job on a compute node starts through this package. The C core (``csrc/``, built by cffi
at install time) does the kernel work; this package decides policy and raises typed errors.

Containers::

    from fuzzball_runtime import Container, ContainerSpec, PIPE

    handle = Container(ContainerSpec(image="/var/cache/img.erofs", command=["/bin/true"],
                                     memory=512 << 20, metering=True, stdout=PIPE)).start()
    handle.pid            # host pid of the container's PID 1 (reaps, forwards signals)
    handle.stdout         # a binary file when stdout=PIPE
    handle.kill(signal.SIGTERM)
    status = handle.wait(timeout=None)  # ExitStatus(exit_code, signal, oom_killed, warnings)
    handle.metering()     # Metering(ingress_bytes, ingress_packets, egress_..., egress_...)
    handle.close()        # kills if needed; frees mounts, loop devices, cgroups, bpf map

``ContainerSpec`` fields: image, command, env, cwd, hostname, uid, gid, groups, binds
(``Bind(src, dst, readonly)``), devices, memory (bytes: cgroup limit and RLIMIT_MEMLOCK),
cpus (quota in cores), cpuset, pids_limit, network (new net namespace, lo up), isolated
(``IsolatedNetwork(subnet, expose_tcp, expose_udp)``: the job's own namespace on the node's
bridge with an address, NAT out and the exposed ports forwarded; ``handle.address``; see
:mod:`fuzzball_runtime.network`), node_ports (``tcp/8080``: what a container on the node's
network serves, open to the node's isolated jobs), stdin/stdout/stderr (None inherit, PIPE,
DEVNULL, a path or a descriptor), metering, metadata_guard (what the job sends to the clouds'
instance metadata addresses is dropped, whatever its network: :mod:`fuzzball_runtime.guard`),
state_dir, scratch_dir (host directory for the writable layer instead of tmpfs), resolv_conf,
extra_hosts.

Start-up failures raise :class:`ContainerStartError` (a ``fuzzball_core.errors.Internal``)
carrying ``errno`` and a message naming the step; a job asking for the metadata guard that
cannot have it is refused with :class:`MetadataGuardError` (one), never started unguarded,
and ``check_metadata_guard()`` tells at an agent's start-up whether the host can guard at
all. A job that starts but not exactly as asked (RLIMIT_MEMLOCK clamped to the hard limit,
metering unavailable) gets a :class:`RuntimeWarningMessage` through :mod:`warnings` and the
text in ``handle.warnings`` and ``ExitStatus.warnings``.

Crash recovery: PID 1 of every container watches a lifeline pipe held by the agent process
that started it and ends the job when the agent dies. ``sweep(state_dir)``, run at agent
start-up, kills any container whose agent died that is still running and frees their cgroups,
image mounts (whose loop devices detach themselves), network and records; it leaves
containers of live agents alone. A job whose spec sets ``keep_cgroups`` may leave its emptied
groups to the next job with the same key (:mod:`fuzzball_runtime.kept`: no process left, the
limits written again, metering counted from the job's start); ``release_kept_cgroups()``
removes them at the agent's stop, and the sweep removes those of a dead agent. Layout of the
state directory: see :mod:`fuzzball_runtime.state`.

PID 1 of a container is ``fbrt-init`` (``csrc/init.c``), a small statically linked program
built at install time next to the compiled module: it starts the command, forwards signals to
it, reaps orphans and reports the command's exact wait status. The agent copies it once into a
sealed memfd and every container executes it from there, so it runs whatever the image holds
and nothing inside can modify it. The container's first process is cloned with
``CLONE_VM | CLONE_VFORK`` (no copy of the agent's page tables) and executes the init as soon
as the root is built; ``csrc/container.h`` lists the files of the start path.
When ``argv[0]`` has no slash it is searched in the job's ``PATH`` as execvp does: an empty
element means the working directory.

Users (``fuzzball_runtime.users``): ``image_identity(image, "app", state_dir)`` resolves an
image's ``User`` in the image's own /etc/passwd and /etc/group, as runc does, into the
``uid``, ``gid``, ``groups`` (and home) a ``ContainerSpec`` takes; the command drops to them
in the process PID 1 forks for it, after the root is built. A working directory missing from
the image is created. A spec whose ``env`` sets no HOME gets the home of its uid's passwd entry
in the image (root's too), ``/`` without one, as runc sets it.

Images (``fuzzball_runtime.erofs``): ``build_from_dir(src, out)``,
``build_from_layers([layer.tar, ...], out)`` (OCI whiteouts and opaque directories applied),
``ImageCache(dir, max_bytes)`` converting each content digest once per node.
"""

from .container import Container, ContainerHandle
from .errors import (
    ContainerStartError,
    MetadataGuardError,
    MeteringError,
    RuntimeFailure,
    RuntimeWarningMessage,
)
from .guard import check_metadata_guard
from .kept import release_kept_cgroups
from .spec import DEVNULL, PIPE, Bind, ContainerSpec, ExitStatus, Metering
from .sweep import sweep

__all__ = [
    "DEVNULL",
    "PIPE",
    "Bind",
    "Container",
    "ContainerHandle",
    "ContainerSpec",
    "ContainerStartError",
    "ExitStatus",
    "MetadataGuardError",
    "Metering",
    "MeteringError",
    "RuntimeFailure",
    "RuntimeWarningMessage",
    "check_metadata_guard",
    "release_kept_cgroups",
    "sweep",
]
