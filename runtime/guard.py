"""The instance metadata guard: what a job sends to the addresses where clouds serve
instance metadata and credentials is dropped, whatever the job's network.

On GCP and OCI a provisioned node's user data, holding its registration token, is read from
the metadata service at 169.254.169.254; AWS, Azure and OpenStack serve instance credentials
there too. The guard is a cgroup_skb egress program (``csrc/bpf_guard.c``, raw BPF
instructions, loaded once per process) attached to each job's cgroup v2 group beside
metering: it drops IPv4 to ``169.254.0.0/16`` except DNS (TCP and UDP port 53: GCP's
resolver is its metadata server, AWS's 169.254.169.253), and IPv6 to ``fd00:ec2::254``
(AWS) and ``fe80::a9fe:a9fe`` (OpenStack). Jobs on the node's network are covered as well as
isolated ones: the program follows the job's sockets, not its namespace.

A job asking for the guard (``ContainerSpec.metadata_guard``) never starts without it: a
group it cannot be attached to (no cgroup v2 hierarchy, a failed attach) refuses the start
with :class:`MetadataGuardError`, naming ``substrate.metadata-guard``. The agent runs
:func:`check_metadata_guard` at start-up and refuses to start on a kernel that cannot guard
at all.
"""

from __future__ import annotations

import os

from . import cgroups
from .errors import MetadataGuardError, RuntimeFailure
from .native import check, lib, new_error

#: the setting that turns the guard off, named by every refusal
SETTING = "substrate.metadata-guard"
#: what a refusal says a site may do about it
REMEDY = (
    f"fix the node (cgroup v2 and eBPF cgroup_skb are needed), or set {SETTING}: false "
    "where jobs may read the instance metadata and credentials"
)


def check_metadata_guard() -> None:
    """Raise :class:`MetadataGuardError` unless this host can guard its jobs: a cgroup v2
    hierarchy to attach to, and the guard's program loaded and test-run on packets to the
    guarded addresses and to others (it must drop exactly the former)."""
    if cgroups.detect_layout().unified is None:
        raise MetadataGuardError(
            f"{SETTING}: the instance metadata guard needs a cgroup v2 hierarchy, and none is "
            f"mounted; {REMEDY}"
        )
    err = new_error()
    try:
        check(lib.fbrt_guard_check(err), err, MetadataGuardError)
    except MetadataGuardError as exc:
        raise MetadataGuardError(
            f"{SETTING}: the instance metadata guard does not work on this kernel: {exc}; {REMEDY}",
            errno=exc.errno,
        ) from None


def attach_metadata_guard(job: cgroups.JobCgroups) -> None:
    """Attach the guard to ``job``'s v2 group; raises :class:`MetadataGuardError` (the job
    must not start) when it has none or the attach fails."""
    if job.v2_dir_name is None:
        raise MetadataGuardError(
            f"{SETTING}: the job was not started: the instance metadata guard needs a cgroup "
            f"v2 group for it, and this host has no cgroup v2 hierarchy; {REMEDY}"
        )
    err = new_error()
    try:
        check(lib.fbrt_guard_attach(os.fsencode(job.v2_dir_name), err), err)
    except RuntimeFailure as exc:
        raise MetadataGuardError(
            f"{SETTING}: the job was not started without its instance metadata guard: {exc}; "
            f"{REMEDY}",
            errno=exc.errno,
        ) from None
