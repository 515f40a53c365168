"""Jobs' networks on this node: which network a job's container gets, which names it
resolves, and the address this node is reached at.

* A job with ``network.isolated: true`` gets its own network namespace on this node's bridge
  (:class:`fuzzball_runtime.network.IsolatedNetwork`): an address of the node's job subnet
  (``substrate.job-subnet``), NAT out, and its ``expose-tcp``/``expose-udp`` ports forwarded
  from the node's. Every other job, and every service, keeps the node's network (Fuzzball's
  default), where the ports it listens on are the node's.
* No job, whatever its network, reaches the addresses where clouds serve instance metadata
  (``substrate.metadata-guard``, on unless a site turns it off: ``ContainerSpec
  .metadata_guard``, :mod:`fuzzball_runtime.guard`); a job that cannot be guarded is not
  started.
* The ports a service declares (``network.ports``) stay reachable for the node's isolated
  jobs, which reach no other port of their node.
* A job reaches the workflow's services by name: Orchestrate sends, with each assignment,
  the services placed at that moment and their nodes' addresses
  (:mod:`fuzzball_core.orchestrate.name_resolution`), written into the container's
  ``/etc/hosts``.
* The node's address (``substrate.address``, else the local address of this node's route to
  Orchestrate) is registered with Orchestrate for that purpose.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from pyroute2 import IPRoute

from fuzzball_core.spec.models import Job, Service
from fuzzball_core.spec.names import dns_label
from fuzzball_core.spec.resources import host_ports
from fuzzball_runtime.network import DEFAULT_SUBNET, IsolatedNetwork


def node_address(configured: str, orchestrate_address: str) -> str:
    """Where this node is reached: ``configured`` when set, else the local address of the
    route to Orchestrate (a UDP socket is connected, which sends nothing); empty when
    Orchestrate's address does not resolve."""
    if configured:
        return configured
    host, _, port = orchestrate_address.rpartition(":")
    host = host.removeprefix("dns:///").strip("[]")
    try:
        family, _, _, _, destination = socket.getaddrinfo(
            host, int(port) if port.isdigit() else 1, type=socket.SOCK_DGRAM
        )[0]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(destination)
            return str(probe.getsockname()[0])
    except (OSError, IndexError, ValueError):
        return ""


@dataclass(frozen=True)
class NodeInterface:
    """The interface holding this node's address: where a multinode job's parts reach each
    other, rather than over a node-local bridge that has the same address on every node."""

    #: the interface's name (``eth0``)
    name: str
    #: its network (``10.0.0.0/24``)
    subnet: str


def node_interface(address: str) -> NodeInterface | None:
    """The interface of this node holding ``address``; None when none holds it."""
    if not address:
        return None
    with IPRoute() as ipr:
        for entry in ipr.get_addr():
            if entry.get_attr("IFA_ADDRESS") == address:
                (link,) = ipr.get_links(entry["index"])
                return NodeInterface(
                    name=str(link.get_attr("IFLA_IFNAME")),
                    subnet=str(ipaddress.ip_interface(f"{address}/{entry['prefixlen']}").network),
                )
    return None


def host_names(name: str) -> list[str]:
    """The names a service answers to in /etc/hosts: its own and, when that is not one, the
    DNS label made of it (lower case, other characters as ``-``)."""
    label = dns_label(name)
    return [name] if label in ("", name) else [name, label]


@dataclass(frozen=True)
class NodeNetwork:
    """This node's network settings, shared by every run."""

    #: where this node is reached (see :func:`node_address`); empty: unknown
    address: str = ""
    #: the subnet of this node's isolated jobs
    job_subnet: str = DEFAULT_SUBNET
    #: every job's traffic to the instance metadata addresses is dropped
    #: (``substrate.metadata-guard``; ``ContainerSpec.metadata_guard``)
    metadata_guard: bool = True

    def isolation(self, step: Job | Service) -> IsolatedNetwork | None:
        """The isolated network ``step`` asks for, or None for the node's network."""
        network = step.network if isinstance(step, Job) else None
        if network is None or not network.isolated:
            return None
        return IsolatedNetwork(
            subnet=self.job_subnet,
            expose_tcp=tuple(network.expose_tcp or ()),
            expose_udp=tuple(network.expose_udp or ()),
        )

    def node_ports(self, step: Job | Service) -> tuple[str, ...]:
        """The node's ports ``step`` serves on the node's network (``tcp/8080``: a service's
        ``network.ports``, a job's exposed ports when it is not isolated), which the node's
        isolated jobs may reach; none for an isolated job."""
        if self.isolation(step) is not None:
            return ()
        return tuple(sorted(host_ports(step)))

    @staticmethod
    def hosts(services: Mapping[str, str]) -> dict[str, str]:
        """The container's extra /etc/hosts entries (name -> address) for the workflow's
        services placed when the run was assigned."""
        return {
            alias: address
            for name, address in sorted(services.items())
            for alias in host_names(name)
        }
