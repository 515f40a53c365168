"""The steps drivers share while preparing a run's container: the run's claims on the node
(its directory, its workflow's volumes, its devices), the job's volumes, files and script,
the device plugins' preparation, and the container's hostname, command, environment,
working directory and user. (Volume ingress is
:func:`fuzzball_core.substrate.ingress.fetch_ingress`.)

The image's config applies as Docker and Podman apply it (``docker run IMAGE ARGS``, the
job's ``command`` and ``args`` being the ARGS): its ``Env`` under the job's ``env``; its
``Entrypoint`` before the job's ``command`` and ``args``, which replace only its ``Cmd``;
``Entrypoint`` + ``Cmd`` when the job gives none of ``command``, ``args`` and ``script``; a
``script`` runs as ``/bin/sh SCRIPT ARGS`` with neither (as ``apptainer exec`` ignores the
runscript: the script is the whole command); its ``WorkingDir`` unless the job sets
``cwd``; and its ``User``, resolved in the image's own /etc/passwd and /etc/group, until the
submitting user's identity decides.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from fuzzball_core.drivers import ImageConfig, VolumeLocation
from fuzzball_core.hookspecs import ContainerPreparation, Device
from fuzzball_core.spec.models import Job, Service
from fuzzball_core.spec.names import dns_label
from fuzzball_core.substrate.drivers.base import LogSink, NodeServices, RunRequest
from fuzzball_core.substrate.drivers.image_progress import PROGRESS_STREAM
from fuzzball_core.substrate.ranks import RankLayout
from fuzzball_runtime import Bind
from fuzzball_runtime.spec import DEFAULT_PATH
from fuzzball_runtime.users import Identity

#: an image that says nothing about running it
NO_CONFIG = ImageConfig()

#: Where a job's script appears inside its container (read-only).
SCRIPT_DIR = "/.fuzzball"


class RunClaims:
    """What one run holds on the node, freed together by :meth:`release`: its directory
    under the node's runs directory, its workflow's volumes (and its place among the users
    of its persistent volumes) and its devices."""

    def __init__(self, node: NodeServices, request: RunRequest) -> None:
        self._node = node
        self._request = request
        self._run_dir: Path | None = None
        self._volumes = False
        self._taken: list[VolumeLocation] = []
        self._devices: list[Device] = []

    @property
    def run_dir(self) -> Path:
        """The run's own directory (named after the run; removed on release)."""
        if self._run_dir is None:
            self._run_dir = self._node.runs_dir / str(self._request.run_id)
        return self._run_dir

    def directory(self, name: str) -> Path:
        """A directory ``name`` under the run's own, created."""
        path = self.run_dir / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def claim_volumes(self) -> None:
        """Keep the workflow's volumes on this node while this run needs them, and count the
        run among the users of its persistent volumes (once; blocking: a volume no other run
        uses may first be resized). Raises the driver's error naming a volume it could not
        prepare, holding none."""
        if not self._volumes:
            self._taken = self._node.volumes.take(self._request.volume_locations.values())
            self._node.volumes.acquire(self._request.workflow_id)
            self._volumes = True

    def allocate_devices(self, wanted: dict[str, int]) -> list[Device]:
        """Take ``wanted`` devices (kind -> count) from the node's pool for this run."""
        self._devices = self._node.devices.allocate(self._request.run_id, wanted)
        return list(self._devices)

    def release(self) -> None:
        """Give back the devices, remove the directory, drop the volumes' claim (idempotent)."""
        if self._devices:
            self._node.devices.release(self._request.run_id)
            self._devices = []
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None
        if self._volumes:
            self._node.volumes.let_go(self._taken)
            self._taken = []
            self._node.volumes.release(self._request.workflow_id, time.time())
            self._volumes = False


def volume_binds(
    node: NodeServices, claims: RunClaims, request: RunRequest, user: Identity | None = None
) -> list[Bind]:
    """The job's ``mounts``: each workflow volume's directory bound at its path.

    A job running as a user other than root gets volumes it can write to: their directory
    becomes writable by all, with the sticky bit (as /tmp), since the jobs of a workflow
    sharing a volume may run as different users of their images."""
    job = request.job
    if job is None or not job.mounts:
        return []
    claims.claim_volumes()
    binds = []
    for path, mount in job.mounts.items():
        directory = node.volumes.locate(
            request.workflow_id, mount.volume, request.volume_locations.get(mount.volume)
        )
        if user is not None and user.uid != 0:
            os.chmod(directory, 0o1777)
        binds.append(Bind(str(directory), str(path)))
    return binds


def readable_file(path: Path, content: str, mode: int = 0o644) -> Path:
    """Write ``content`` to ``path`` readable by every user (whoever the job runs as reads
    it through a bind, which skips the host directories above it)."""
    path.write_text(content)
    path.chmod(mode)
    path.parent.chmod(0o755)
    return path


def script_bind(claims: RunClaims, script: str) -> tuple[Bind, str]:
    """The job's script in a read-only directory (executable by every user: a script
    naming its interpreter is run itself), and its path inside the container."""
    script_dir = claims.directory("script")
    readable_file(script_dir / "script", script, mode=0o755)
    return Bind(str(script_dir), SCRIPT_DIR, readonly=True), f"{SCRIPT_DIR}/script"


def file_binds(claims: RunClaims, files: dict[str, str]) -> list[Bind]:
    """The job's ``files`` (container path -> content, resolved by Orchestrate), each a
    copy of its own bound over its path: bound rather than written into the root so that
    paths under the container's /tmp tmpfs and inside volumes work as well."""
    if not files:
        return []
    files_dir = claims.directory("files")
    binds = []
    for index, (path, content) in enumerate(sorted(files.items())):
        copy = readable_file(files_dir / str(index), content)
        binds.append(Bind(str(copy), path))
    return binds


def prepare_devices(
    node: NodeServices, claims: RunClaims, request: RunRequest, wanted: dict[str, int]
) -> ContainerPreparation:
    """Allocate the ``wanted`` devices and let the device plugins adjust the container
    (``fuzzball_job_prepare_container``); what they added."""
    devices = claims.allocate_devices(wanted) if wanted else []
    preparation = ContainerPreparation()
    node.hooks.fuzzball_job_prepare_container(
        job=request.definition, devices=devices, container=preparation
    )
    return preparation


def device_binds(preparation: ContainerPreparation) -> list[Bind]:
    """The device plugins' binds: their files each read-only (the host's files, never a way
    to change them), their daemons' sockets read-write (a client writes to them)."""
    return [Bind(src, dst, readonly=True) for src, dst in preparation.binds] + [
        Bind(src, dst) for src, dst in preparation.socket_binds
    ]


def with_search_paths(env: dict[str, str], search_paths: Mapping[str, list[str]]) -> None:
    """Append to ``env``'s path-list variables the directories the device plugins need on
    them (``LD_LIBRARY_PATH`` for the driver's libraries), each unless already there: the
    image's and the job's own entries come first, as Apptainer's ``--nv`` appends its
    library directory."""
    for name, directories in search_paths.items():
        entries = [e for e in env.get(name, "").split(":") if e]
        entries += [d for d in dict.fromkeys(directories) if d not in entries]
        if entries:
            env[name] = ":".join(entries)


def report_warnings(sink: LogSink, run_id: int, warnings: list[str]) -> None:
    """Send each of the device plugins' warnings to Orchestrate (on the run's progress
    stream, from the event loop's thread), which records each as a ``stage_warning`` event
    of the job."""
    for warning in dict.fromkeys(warnings):
        sink(run_id, PROGRESS_STREAM, json.dumps({"warning": warning}).encode())


def container_hostname(request: RunRequest, ranks: RankLayout | None = None) -> str:
    """The job's name as a DNS label (``-<task id>`` appended for array tasks, ``-<node
    index>`` for the parts of a multinode job, which MPI tells apart by hostname)."""
    base = _hostname_base(request.job_name)
    suffix = f"-{request.task_id}" if request.task_id is not None else ""
    if ranks is not None:
        suffix += f"-{ranks.part}"
    return base[: 63 - len(suffix)].rstrip("-") + suffix


@functools.lru_cache(maxsize=256)
def _hostname_base(job_name: str) -> str:
    """A job name as a DNS label (a function of the name alone: every task of an array
    shares it)."""
    return dns_label(job_name) or "job"


def job_command(
    job: Job | Service, script_path: str | None, image: ImageConfig = NO_CONFIG
) -> list[str]:
    """The argv: the script with the job's ``args``, run by the interpreter its ``#!`` line
    names (the kernel reads it, as a shell runs an executable script) or else by /bin/sh;
    else the image's ``Entrypoint`` then the job's ``command`` and ``args`` or, when it
    gives neither, the image's ``Cmd``. Empty when nothing names a command."""
    args = list(job.args or [])
    if script_path is not None:
        if (job.script or "").startswith("#!"):
            return [script_path, *args]
        return ["/bin/sh", script_path, *args]
    given = [*(job.command or []), *args]
    return [*(image.entrypoint or ()), *(given or image.cmd or ())]


def image_environment(image: ImageConfig = NO_CONFIG) -> dict[str, str]:
    """What a container of ``image`` starts with: its ``Env`` over the default PATH (which
    stays only when the image sets none). HOME is the runtime's to fill in when nothing sets
    it: the passwd entry's of whom the command runs as, as runc does."""
    return {"PATH": DEFAULT_PATH, **variables(image.env)}


def job_environment(
    request: RunRequest, hostname: str, image: ImageConfig = NO_CONFIG
) -> dict[str, str]:
    """The container's environment: HOSTNAME, the image's (:func:`image_environment`), the
    job's ``env``, then the ``FB_*`` variables (each later one wins)."""
    assert request.job is not None, "an image stage's run has no job environment"
    env = {"HOSTNAME": hostname, **image_environment(image), **variables(request.job.env)}
    env.update(run_variables(request))
    return env


def run_variables(request: RunRequest) -> dict[str, str]:
    """The ``FB_*`` variables naming the run's workflow, job and task."""
    named = {"FB_WORKFLOW_ID": request.workflow_id, "FB_JOB_NAME": request.job_name}
    if request.task_id is not None:
        named["FB_TASK_ID"] = str(request.task_id)
    return named


def job_variable_names(request: RunRequest) -> set[str]:
    """The names of the variables the job sets itself (its ``env``) and the ``FB_*`` ones:
    of :func:`job_environment`'s, those not from the defaults or the image."""
    assert request.job is not None, "an image stage's run has no job environment"
    return set(variables(request.job.env)) | run_variables(request).keys()


def variables(entries: Iterable[str] | None) -> dict[str, str]:
    """``NAME=VALUE`` entries (an image's ``Env``, a job's ``env``) as a mapping; a later
    entry of a name wins."""
    env = {}
    for entry in entries or ():
        name, _, value = str(entry).partition("=")
        env[name] = value
    return env


def own_variables(job: Job | Service, image: ImageConfig = NO_CONFIG) -> frozenset[str]:
    """The names the image's ``Env`` or the job's ``env`` sets: a node's default for one of
    them (a multinode job's interfaces, say) yields to it."""
    return frozenset(variables(image.env)) | frozenset(variables(job.env))


def job_cwd(job: Job | Service, image: ImageConfig = NO_CONFIG) -> str:
    """The working directory: the job's ``cwd``, else :func:`image_cwd`."""
    return str(job.cwd) if job.cwd else image_cwd(image)


def image_cwd(image: ImageConfig = NO_CONFIG) -> str:
    """The image's ``WorkingDir`` (taken from the root when it is relative, as Docker does),
    else /."""
    return "/" + image.working_dir.lstrip("/") if image.working_dir else "/"


def cpu_limits(request: RunRequest, cores: int) -> tuple[float | None, str | None]:
    """The container's CPU quota (in cores) and cpuset (a CPU list such as ``0-3``).

    A pinned run (Orchestrate named this node's CPUs for it) gets those CPUs as its cpuset and
    no quota: the cores are its own. An exclusive job owns the node and is not throttled.
    Otherwise cores are a quota only when the job asks for them: a job without
    ``resource.cpu`` runs unthrottled, without a per-job cgroup to create.
    """
    job = request.job
    resource = job.resource if job is not None else None
    if request.cpuset:
        return None, request.cpuset
    if resource is None or resource.exclusive or resource.cpu is None:
        return None, None
    return float(cores), None
