"""Hook specifications: every point where a ``fuzzball.plugins`` entry point can join in.

A hook plugin is a module (or object) with functions decorated by :data:`hookimpl` whose names
match the specs below. It is registered through the ``fuzzball.plugins`` entry-point group::

    # pyproject.toml of a site's package
    [project.entry-points."fuzzball.plugins"]
    mysite = "mysite_fuzzball.hooks"

    # mysite_fuzzball/hooks.py
    from fuzzball_core.hookspecs import hookimpl

    @hookimpl
    def fuzzball_validate_workflow(workflow, source):
        ...

Every implementation is called (pluggy calls the most recently registered first) and the
results are collected into a list, except for hooks marked ``firstresult``, where the first
non-``None`` answer wins. An implementation may accept any subset of a spec's arguments.

The hooks are grouped by where they fire: node start-up, job preparation, workflow submission,
metrics scrape, Federate routing, and events.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pluggy

PROJECT_NAME = "fuzzball"

#: Decorator marking the specifications below (used only in this module).
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
#: Decorator plugin authors put on their implementations.
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@dataclass(frozen=True)
class Device:
    """A device a node offers to jobs.

    ``kind`` is the resource name jobs request (``nvidia.com/gpu``), ``id`` is unique among the
    node's devices of that kind, ``paths`` are the device nodes a job given this device needs,
    and ``attributes`` carries what schedulers may match on (model, memory, NVLink domain).
    """

    kind: str
    id: str
    paths: tuple[str, ...] = ()
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass
class ContainerPreparation:
    """The parts of a job's container that device plugins may add to.

    Plugins append to the lists and set environment variables; the node agent hands the result
    to the runtime unchanged.
    """

    #: host device nodes recreated at the same path inside
    device_paths: list[str] = field(default_factory=list)
    #: variables set over the job's own (the image's, then the job's ``env``)
    env: MutableMapping[str, str] = field(default_factory=dict)
    #: ``(host path, container path)`` pairs, each bound read-only (a device plugin hands
    #: the job the host's files, never a way to change them)
    binds: list[tuple[str, str]] = field(default_factory=list)
    #: ``(host path, container path)`` pairs bound read-write: the sockets (or a directory of
    #: them) of host daemons the job's libraries talk to, such as NVIDIA's persistence daemon
    #: and MPS, which a client must be able to write to
    socket_binds: list[tuple[str, str]] = field(default_factory=list)
    #: directories that path-list variables (``PATH``, ``LD_LIBRARY_PATH``) must include:
    #: each appended to the variable's final value (after ``env``) unless already in it
    search_paths: MutableMapping[str, list[str]] = field(default_factory=dict)
    #: what the job should be told about its devices' set-up that did not stop it: each
    #: becomes one ``stage_warning`` event of the job's stage
    warnings: list[str] = field(default_factory=list)


# -------------------------------------------------------------------------------------------------
# Node start-up (fuzzball-substrate)
# -------------------------------------------------------------------------------------------------


@hookspec
def fuzzball_node_discover_devices(node_config: Mapping[str, Any]) -> Sequence[Device]:
    """Report the devices this node can give to jobs.

    Called once when Substrate starts, before it registers with Orchestrate, and again when it
    re-registers. The lists from every plugin are concatenated; the node advertises one resource
    per distinct ``Device.kind`` with the count of its devices.

    :param node_config: the ``substrate`` section of the configuration, as a mapping.
    :return: the devices found (an empty sequence when none). Raising marks the node's device
        plugin as failed; the node still registers, and the scheduler reports
        ``device_plugin_failed`` for jobs that needed those devices.
    """


# -------------------------------------------------------------------------------------------------
# Job preparation (fuzzball-substrate, before the container starts)
# -------------------------------------------------------------------------------------------------


@hookspec
def fuzzball_job_prepare_container(
    job: Mapping[str, Any],
    devices: Sequence[Device],
    container: ContainerPreparation,
) -> None:
    """Adjust a job's container for the devices it was given.

    Called on the node once per job start, after placement and before the runtime builds the
    container. Typical work: add GPU device nodes, set ``NVIDIA_VISIBLE_DEVICES`` and
    ``NVIDIA_IMEX_CHANNELS``, bind driver libraries (read-only) and put their directory on
    ``LD_LIBRARY_PATH`` (``search_paths``), bind the driver's daemons' sockets (read-write,
    ``socket_binds``), say what is missing (``warnings``).

    :param job: the job's v4 definition as a mapping (``resource``, ``env``, ``multinode``...).
    :param devices: the devices the scheduler allocated to this job on this node.
    :param container: mutable description of the container; change it in place.
    :return: nothing; raising fails the job's start with the plugin's message.
    """


# -------------------------------------------------------------------------------------------------
# Workflow submission (fuzzball-orchestrate and `fuzzball workflow validate`)
# -------------------------------------------------------------------------------------------------


@hookspec
def fuzzball_validate_workflow(workflow: Any, source: str) -> Sequence[tuple[str, str]] | None:
    """Add site rules to workflow validation.

    Called after the built-in rules accept a workflow (already upgraded to v4), on submission and
    in ``fuzzball workflow validate``.

    :param workflow: the validated v4 workflow model.
    :param source: where the workflow came from (a file name or ``<api>``), for messages.
    :return: ``(field_path, message)`` pairs, one per problem, e.g.
        ``("jobs.train.resource.devices", "GPU jobs must set policy.timeout.execute")``;
        an empty sequence or ``None`` when the workflow is acceptable. Any problem rejects the
        submission with InvalidArgument listing every pair.
    """


# -------------------------------------------------------------------------------------------------
# Metrics scrape (fuzzball-substrate's metrics endpoint)
# -------------------------------------------------------------------------------------------------


@hookspec
def fuzzball_node_collect_metrics(node_id: str) -> Mapping[str, float] | None:
    """Contribute samples to the node's metrics endpoint.

    Called on every scrape of the node's metrics endpoint, so it must be cheap.

    :param node_id: the node's registered id.
    :return: metric name (Prometheus syntax, labels allowed:
        ``fuzzball_node_gpu_temperature_celsius{gpu="0"}``) to value; ``None`` to add nothing.
    """


# -------------------------------------------------------------------------------------------------
# Federate routing (fuzzball-federate)
# -------------------------------------------------------------------------------------------------


@hookspec
def fuzzball_federate_score_cluster(workflow: Mapping[str, Any], cluster: Any) -> float | None:
    """Score how well a member cluster suits a workflow.

    Called by Federate's router once per (workflow, eligible cluster) pair. The router adds the
    scores of every plugin to its own; the highest total wins.

    :param workflow: the submitted workflow's v4 definition as a mapping.
    :param cluster: a :class:`fuzzball_core.drivers.ClusterOffer` describing the member.
    :return: a score to add (any float); ``float("-inf")`` excludes the cluster;
        ``None`` abstains.
    """


# -------------------------------------------------------------------------------------------------
# Events (every process that records events)
# -------------------------------------------------------------------------------------------------


@hookspec
def fuzzball_event(event: Mapping[str, Any]) -> None:
    """Be told of an event after it has been recorded.

    Called for every workflow, stage and node event (``workflow_started``, ``stage_failed``,
    ``node_hold_added``...), after the event's transaction commits. Use it for notifications
    (mail, chat, a site's accounting); it must not block for long. An exception raised here is
    logged with the plugin's name and does not affect the workflow.

    :param event: ``{"kind": str, "time": float, "workflow_id": str | None,
        "stage": str | None, "node_id": str | None, "message": str, "data": dict}``.
    :return: nothing.

    ``kind`` is one of :class:`fuzzball_core.vocabulary.EventKind` (a ``StrEnum``: compare with
    its members or their plain values); the kinds are a public contract, renaming one is a
    breaking change:

    - a workflow's life: ``workflow_started``, ``workflow_finished``, ``workflow_failed``,
      ``workflow_canceled``; on Federate, ``workflow_rerouted`` (``data``: ``from``, ``to``,
      ``reason``) and ``workflow_routed`` (``data``: ``cluster``, ``costEstimate``,
      ``candidates``, ``rejected``);
    - a stage's life: ``stage_started``, ``stage_finished``, ``stage_failed``,
      ``stage_canceled``, ``scheduled``, ``scheduling_blocked`` (``data.reason`` says why),
      ``container_exited``, ``service_ready``, ``retried``, ``retries_exhausted``,
      ``evicted``, ``stage_warning`` (a node's word on how a run was set up, which did
      not stop it: ``data.warning``; ``node_id`` the node that said it);
    - image stages: ``image_resolved``, ``image_cached``, ``image_progress``,
      ``image_written_back``, ``image_write_back_retrying``, ``image_write_back_abandoned``;
    - nodes (``node_id`` set, ``workflow_id`` None): ``node_registered``, ``node_online``,
      ``node_offline``, ``node_removed``, ``node_hold_added``, ``node_hold_released``,
      ``node_hold_refused`` (monitoring's, past the ceiling or for a node with
      ``health.disabled``), ``node_deprovisioned``;
    - volume stages: ``volume_transfer`` (an ingress or egress transfer's progress, size and
      time);
    - provisioned instances (``node_id`` set once the node exists): ``instance_requested``,
      ``instance_create_failed``, ``instance_found``, ``instance_registered``,
      ``instance_idle``, ``instance_deleting``, ``instance_deleted``,
      ``instance_never_registered``.
    """
