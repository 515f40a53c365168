"""Isolated networks of containers: what ``ContainerSpec.isolated`` asks for, set up with
pyroute2 (netlink) and nftables in the network namespace the agent runs in (the node's).

Per node (per state directory), created with the first isolated job and kept for the next
ones; the sweep (at the agent's start and stop) removes them once no job uses them:

* a bridge ``fbrt<tag>`` holding the subnet's first address (the jobs' gateway);
* an nftables table ``ip fbrt_<tag>``: masquerade of the subnet's traffic leaving the node,
  a filter that drops what the jobs send to the node itself (an isolated job does not reach
  the ports listening on its node) except the ports in the set ``open_ports``, the ports
  that containers on the node's network declare they serve (:meth:`NodeNetwork.open_ports`:
  a service's, so isolated jobs reach a service on their own node too), and the maps
  ``tcp_expose``/``udp_expose`` (host port -> job address) that forward the node's ports a
  job exposes (DNAT); and, unless the node turns it off (``substrate.metadata-guard``), the
  chain ``metadata_guard`` that drops what the jobs send to the link-local addresses
  (:data:`METADATA_SUBNET`, DNS excepted), where clouds serve instance metadata
  (169.254.169.254: a provisioned node's user data holds its registration token), beside the
  eBPF guard every guarded job's cgroup carries (:mod:`fuzzball_runtime.guard`);
* ``net.ipv4.ip_forward`` on, in this namespace.

Per isolated job: a network namespace with no name, made by a short-lived thread that
unshares its own (no fork: the agent is multi-threaded, gRPC's threads included, and a forked
child of it may crash) and held by a descriptor until the container's child joins it, so it
ends with the job whatever happens to the agent; a veth pair whose node end ``fbv<id>`` is on
the bridge and whose other end is the job's ``eth0`` (deleted when the container is released;
it would also end with the namespace, later); an address of the subnet (a file
``network/addresses/<address>`` in the state directory naming the container, then the ports
it exposes); a default route through the gateway; and the job's exposed ports in the maps.
``<tag>`` is :attr:`fuzzball_runtime.state.StateDir.tag`, so two agents on one machine (two
state directories) never touch each other's.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno as errno_codes
import fcntl
import ipaddress
import json
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from fuzzball_core.errors import InvalidArgument

from .errors import NetworkError, PortInUse
from .state import StateDir

#: The subnet of a node's isolated jobs unless configured: private, and unlikely to be a
#: site's own (Docker uses 172.17.0.0/16, Podman 10.88.0.0/16, Kubernetes 10.244.0.0/16).
DEFAULT_SUBNET = "10.213.0.0/24"
#: What isolated jobs never reach while the node's metadata guard is on, but for DNS: IPv4's
#: link-local block, where clouds serve instance metadata and credentials (AWS, GCP, Azure,
#: OCI: 169.254.169.254; AWS ECS: 169.254.170.2). IPv6 (AWS's fd00:ec2::254) is out of their
#: reach anyway: their namespace has an IPv4 address and route only.
METADATA_SUBNET = "169.254.0.0/16"
#: the chain of the node's table holding the metadata guard's rules
METADATA_GUARD_CHAIN = "metadata_guard"
#: the comment of the chain's rule letting DNS through (GCP's resolver is its metadata server)
METADATA_DNS_COMMENT = "DNS passes"
#: The job's end of its veth pair, inside its namespace.
JOB_INTERFACE = "eth0"
CLONE_NEWNET = 0x40000000
#: where systemd-resolved lists the upstream resolvers its 127.0.0.53 stub forwards to
RESOLVED_UPSTREAM = Path("/run/systemd/resolve/resolv.conf")
PROTOCOLS = ("tcp", "udp")

T = TypeVar("T")


@dataclass(frozen=True)
class IsolatedNetwork:
    """A job's own network namespace on the node's bridge (``network.isolated: true``)."""

    #: the node's subnet for isolated jobs (a node setting; the same for all its jobs)
    subnet: str = DEFAULT_SUBNET
    #: node ports forwarded to the same port of the job
    expose_tcp: tuple[int, ...] = ()
    expose_udp: tuple[int, ...] = ()

    def validate(self) -> None:
        """Raise ``InvalidArgument`` naming the first bad field."""
        network = parse_subnet(self.subnet)
        if network.num_addresses < 4:
            raise InvalidArgument(f"spec.isolated.subnet: {self.subnet}: too small for jobs")
        for protocol, ports in (("tcp", self.expose_tcp), ("udp", self.expose_udp)):
            for index, port in enumerate(ports):
                if not 1 <= port <= 65535:
                    raise InvalidArgument(f"spec.isolated.expose_{protocol}[{index}]: {port}")
            if len(set(ports)) != len(ports):
                raise InvalidArgument(f"spec.isolated.expose_{protocol}: a port appears twice")


def parse_subnet(text: str) -> ipaddress.IPv4Network:
    """An IPv4 subnet (``10.213.0.0/24``); ``InvalidArgument`` naming it otherwise."""
    try:
        return ipaddress.IPv4Network(text)
    except ValueError as exc:
        raise InvalidArgument(f"spec.isolated.subnet: {text}: {exc}") from None


def _nft(script: str) -> None:
    try:
        result = subprocess.run(
            ["nft", "-f", "-"], input=script, capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise NetworkError(
            "isolated jobs need nftables' nft command (Debian: nftables)", errno=errno_codes.ENOENT
        ) from None
    if result.returncode != 0:
        raise NetworkError(f"nft: {result.stderr.strip() or 'failed'}")


def _nft_json(*command: str) -> list[dict[str, object]]:
    """What ``nft -j COMMAND`` lists; nothing when the object does not exist (or nft is not
    installed, in which case no isolated job can have made one)."""
    try:
        result = subprocess.run(
            ["nft", "-j", *command], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        return []
    if result.returncode != 0:
        return []
    return list(json.loads(result.stdout).get("nftables", []))


def _netlink(work: Callable[[], T]) -> T:
    """Run ``work`` where no event loop runs: pyroute2's synchronous API drives an event loop
    of its own, which cannot run in the thread of a running one (the agent sweeps from its
    loop). A new thread shares the caller's network namespace."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    with ThreadPoolExecutor(1, thread_name_prefix="netlink") as pool:
        return pool.submit(work).result()


def _node_end(container_id: str) -> str:
    """The name of the node's end of an isolated job's veth pair."""
    return f"fbv{container_id[:12]}"


def _delete_link(name: str) -> None:
    """Delete the link ``name`` if it is there. The veth pair would also end with the job's
    namespace, but the kernel tears a namespace down later, in a work queue of its own, so
    an ended job's veth could outlive it by an unbounded moment; deleting one end takes the
    pair at once."""
    with IPRoute() as ipr:
        for index in ipr.link_lookup(ifname=name):
            with contextlib.suppress(NetlinkError):  # gone with its namespace meanwhile
                ipr.link("del", index=index)


def exposed_ports(wanted: IsolatedNetwork) -> list[str]:
    """The node ports ``wanted`` forwards, as ``tcp/8080`` / ``udp/53``."""
    return [f"tcp/{port}" for port in wanted.expose_tcp] + [
        f"udp/{port}" for port in wanted.expose_udp
    ]


def _loopback_resolver(line: str) -> bool:
    fields = line.split()
    if len(fields) < 2 or fields[0] != "nameserver":
        return False
    try:
        return ipaddress.ip_address(fields[1].partition("%")[0]).is_loopback
    except ValueError:
        return False


def _has_resolver(lines: list[str]) -> bool:
    return any(line.split()[:1] == ["nameserver"] for line in lines)


def resolv_conf_for_isolated(
    text: str, upstream: Path = RESOLVED_UPSTREAM
) -> tuple[str, str | None]:
    """``text`` (a resolv.conf) as an isolated job can use it, and a warning when it cannot:
    resolvers on the node's loopback (systemd-resolved's 127.0.0.53, a local dnsmasq) are
    out of its reach, so they are left out, and when none is left systemd-resolved's upstream
    list (``upstream``) is used instead, as Docker and Podman do."""
    lines = text.splitlines()
    if not any(_loopback_resolver(line) for line in lines):
        return text, None
    kept = [line for line in lines if not _loopback_resolver(line)]
    if _has_resolver(kept):
        return "\n".join(kept) + "\n", None
    with contextlib.suppress(OSError):
        replacement = upstream.read_text()
        if _has_resolver(replacement.splitlines()):
            return replacement, None
    return "\n".join(kept) + "\n", (
        "the node's resolv.conf names only resolvers on its loopback, which an isolated job "
        "cannot reach: the job resolves no names but those in its /etc/hosts"
    )


def _element(port: str, address: str | None = None) -> str:
    """The element of an expose map for ``tcp/8080`` (to ``address`` when adding)."""
    protocol, _, number = port.partition("/")
    value = f" : {address}" if address else ""
    return f"{protocol}_expose {{ {number}{value} }}"


def _in_new_thread(work: Callable[[], T]) -> T:
    """Run ``work`` in a thread of its own, which may change its namespaces and then ends
    (it starts in the caller's network namespace)."""
    with ThreadPoolExecutor(1, thread_name_prefix="netns") as pool:
        return pool.submit(work).result()


def _unshare_network() -> int:
    """Move the calling thread into a new network namespace; a descriptor of it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise NetworkError(f"unshare a network namespace: {os.strerror(code)}", errno=code)
    return os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)


class Attachment:
    """One job's place on the node's network while its container is being started."""

    def __init__(self, container_id: str, address: str, fd: int) -> None:
        self.container_id = container_id
        #: the job's address on the node's subnet
        self.address = address
        #: the namespace, open for the container's child to join (``fbrt_spec.net_fd``)
        self.fd = fd

    def started(self) -> None:
        """The container's PID 1 is in the namespace (or will never be): drop our
        descriptor, so that the namespace and the veth pair with it end with the job."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class NodeNetwork:
    """The isolated jobs' network of one state directory, in the current network namespace."""

    def __init__(
        self, state: StateDir, subnet: str = DEFAULT_SUBNET, *, metadata_guard: bool = True
    ) -> None:
        self.state = state
        self.subnet = parse_subnet(subnet)
        #: whether the table drops the jobs' traffic to :data:`METADATA_SUBNET`
        self.metadata_guard = metadata_guard
        tag = state.tag
        self.bridge = f"fbrt{tag}"
        self.table = f"fbrt_{tag}"
        self.addresses = state.root / "network" / "addresses"
        #: one file per container on the node's network serving ports: its ports, a line each
        self.open = state.root / "network" / "open"
        self.gateway = next(self.subnet.hosts())

    # ---- one job --------------------------------------------------------------------------

    def attach(self, container_id: str, wanted: IsolatedNetwork) -> Attachment:
        """Give the job ``container_id`` its namespace, veth, address and exposed ports.

        Raises :class:`PortInUse` when another job on this node exposes one of its ports,
        and :class:`NetworkError` naming the step that failed; what was set up is undone."""
        return _netlink(lambda: self._attach(container_id, wanted))

    def _attach(self, container_id: str, wanted: IsolatedNetwork) -> Attachment:
        with self._lock():
            self._ensure_node()
            ports = exposed_ports(wanted)
            self._check_ports(ports)
            address = self._allocate(container_id, ports)
            fd = -1
            try:
                fd = _in_new_thread(lambda: self._wire(container_id, address))
                self._expose(ports, address)
                return Attachment(container_id, address, fd)
            except BaseException:
                if fd >= 0:
                    os.close(fd)  # the namespace ends, and the veth pair with it
                self._free(address)
                raise

    def detach(self, container_id: str) -> None:
        """Free what the container ``container_id`` held: an isolated job's exposed ports and
        address (its namespace ended with it), the ports a container on the node's network
        opened. Idempotent."""
        _netlink(lambda: self._detach(container_id))

    def _detach(self, container_id: str) -> None:
        if (self.open / container_id).exists():
            self._close_ports({container_id})
        with self._lock():
            for address, (owner, ports) in self._allocated().items():
                if owner == container_id:
                    self._unexpose(ports)
                    _delete_link(_node_end(container_id))
                    self._free(address)

    def open_ports(self, container_id: str, ports: Iterable[str]) -> None:
        """Let isolated jobs on this node reach ``ports`` (``tcp/8080``, ``udp/53``) of the
        node, which the container ``container_id`` (on the node's network) serves, until
        :meth:`detach`."""
        wanted = sorted(set(ports))
        for port in wanted:
            protocol, _, number = port.partition("/")
            if protocol not in PROTOCOLS or not number.isdigit() or not 1 <= int(number) <= 65535:
                raise InvalidArgument(f"spec.node_ports: {port}: expected tcp/PORT or udp/PORT")
        if wanted:
            _netlink(lambda: self._open_ports(container_id, wanted))

    def _open_ports(self, container_id: str, ports: list[str]) -> None:
        with self._lock():
            self.open.mkdir(parents=True, exist_ok=True, mode=0o700)
            (self.open / container_id).write_text("".join(f"{port}\n" for port in ports))
            self._sync_open_ports()

    def _close_ports(self, container_ids: set[str]) -> None:
        with self._lock():
            for container_id in container_ids:
                (self.open / container_id).unlink(missing_ok=True)
            self._sync_open_ports()

    def _opened(self) -> dict[str, list[str]]:
        """container id -> the ports it opened."""
        if not self.open.is_dir():
            return {}
        return {p.name: p.read_text().split() for p in self.open.iterdir()}

    def _sync_open_ports(self) -> None:
        """Make the table's ``open_ports`` what the files say (nothing to do without a
        table: it is filled when the first isolated job creates it)."""
        if not _nft_json("list", "table", "ip", self.table):
            return
        ports = sorted({port for opened in self._opened().values() for port in opened})
        lines = [f"flush set ip {self.table} open_ports"]
        if ports:
            elements = ", ".join(" . ".join(port.split("/")) for port in ports)
            lines.append(f"add element ip {self.table} open_ports {{ {elements} }}")
        _nft("\n".join(lines) + "\n")

    # ---- the sweep ------------------------------------------------------------------------

    def sweep(self, live: set[str]) -> list[str]:
        """Free the addresses and exposed ports of containers not in ``live`` (their agent
        died; their namespaces and veths ended with them); remove the bridge and table when
        nothing is left. Returns what was freed, in words."""
        return _netlink(lambda: self._sweep(live))

    def _sweep(self, live: set[str]) -> list[str]:
        freed: list[str] = []
        with self._lock():
            closed = {c for c in self._opened() if c not in live}
            if closed:
                for container_id in closed:
                    (self.open / container_id).unlink(missing_ok=True)
                self._sync_open_ports()
                freed += [f"open ports of {c}" for c in sorted(closed)]
            dead = {a for a, (owner, _) in self._allocated().items() if owner not in live}
            if dead:
                # what the maps hold, not what the files say: an agent may have died between
                # writing one and changing the other
                self._unexpose(port for port, address in self._exposed().items() if address in dead)
                for address in sorted(dead):
                    self._free(address)
                    freed.append(f"address {address}")
            if self._remove_node_if_unused():
                freed.append(f"bridge {self.bridge} and nft table {self.table}")
        return freed

    # ---- the node's part ------------------------------------------------------------------

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        self.addresses.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.addresses.parent / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _ensure_node(self) -> None:
        with IPRoute() as ipr:
            if not ipr.link_lookup(ifname=self.bridge):
                self._check_subnet_free(ipr)
                try:
                    ipr.link("add", ifname=self.bridge, kind="bridge")
                    index = ipr.link_lookup(ifname=self.bridge)[0]
                    ipr.addr(
                        "add",
                        index=index,
                        address=str(self.gateway),
                        prefixlen=self.subnet.prefixlen,
                    )
                    ipr.link("set", index=index, state="up")
                except NetlinkError as exc:
                    raise NetworkError(
                        f"create the bridge {self.bridge}: {os.strerror(exc.code)}",
                        errno=exc.code,
                    ) from None
        listed = _nft_json("list", "table", "ip", self.table)
        if not listed:
            _nft(self._table_script())
            self._sync_open_ports()
        else:  # a table an agent of an earlier release, or another setting, left
            self._sync_metadata_guard(listed)
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")

    def _sync_metadata_guard(self, listed: list[dict[str, object]]) -> None:
        """Add, remove or bring up to date the metadata guard's chain of an existing table as
        the node's setting says (read from the table's listing: no second ``nft`` call while
        nothing changes). A chain without the DNS rule is an earlier agent's: made again."""
        guarded = current = False
        for entry in listed:
            chain, rule = entry.get("chain"), entry.get("rule")
            if isinstance(chain, dict) and chain.get("name") == METADATA_GUARD_CHAIN:
                guarded = True
            if isinstance(rule, dict) and rule.get("chain") == METADATA_GUARD_CHAIN:
                current = current or rule.get("comment") == METADATA_DNS_COMMENT
        if guarded and not self.metadata_guard:
            _nft(f"delete chain ip {self.table} {METADATA_GUARD_CHAIN}\n")
        elif self.metadata_guard and not (guarded and current):
            flush = f"flush chain ip {self.table} {METADATA_GUARD_CHAIN}\n" if guarded else ""
            _nft(f"{flush}table ip {self.table} {{\n{self._metadata_guard_chain()}}}\n")

    def _metadata_guard_chain(self) -> str:
        """The chain dropping what the jobs send to :data:`METADATA_SUBNET` but DNS
        (forwarded: not to the node itself, which the ``input`` chain guards). The jobs'
        cgroups carry the guard's eBPF program as well (:mod:`fuzzball_runtime.guard`); the
        chain is in the node's namespace, out of reach of a job's root, which could detach a
        program from its own group or send past it through a packet socket."""
        to_metadata = f'iifname "{self.bridge}" ip daddr {METADATA_SUBNET}'
        return f"""  chain {METADATA_GUARD_CHAIN} {{
    type filter hook forward priority filter; policy accept;
    {to_metadata} meta l4proto {{ tcp, udp }} th dport 53 accept comment "{METADATA_DNS_COMMENT}"
    {to_metadata} drop
  }}
"""

    def _check_subnet_free(self, ipr: IPRoute) -> None:
        """Refuse a subnet that overlaps an address this namespace already has: its jobs
        would not be reachable (two agents sharing one namespace need a subnet each)."""
        names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
        for entry in ipr.get_addr(family=2):
            address = ipaddress.IPv4Interface(
                f"{entry.get_attr('IFA_ADDRESS')}/{entry['prefixlen']}"
            )
            if address.network.overlaps(self.subnet):
                raise NetworkError(
                    f"the isolated jobs' subnet {self.subnet} overlaps {address} of interface "
                    f"{names.get(entry['index'], entry['index'])}: configure another subnet",
                    errno=errno_codes.EADDRINUSE,
                )

    def _table_script(self) -> str:
        subnet, bridge = self.subnet, self.bridge
        local = "fib daddr type local ip daddr != 127.0.0.0/8"
        return f"""
table ip {self.table} {{
  map tcp_expose {{ type inet_service : ipv4_addr; }}
  map udp_expose {{ type inet_service : ipv4_addr; }}
  set open_ports {{ type inet_proto . inet_service; }}
  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    {local} dnat to tcp dport map @tcp_expose
    {local} dnat to udp dport map @udp_expose
  }}
  chain output {{
    type nat hook output priority -100; policy accept;
    {local} dnat to tcp dport map @tcp_expose
    {local} dnat to udp dport map @udp_expose
  }}
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr {subnet} oifname != "{bridge}" masquerade
    ct status dnat ip saddr {subnet} ip daddr {subnet} masquerade
  }}
  chain input {{
    type filter hook input priority filter; policy accept;
    iifname "{bridge}" ct state established,related accept
    iifname "{bridge}" meta l4proto . th dport @open_ports accept
    iifname "{bridge}" drop
  }}
{self._metadata_guard_chain() if self.metadata_guard else ""}}}
"""

    def _remove_node_if_unused(self) -> bool:
        if self._allocated():
            return False
        removed = False
        if _nft_json("list", "table", "ip", self.table):
            _nft(f"delete table ip {self.table}\n")
            removed = True
        with IPRoute() as ipr:
            for index in ipr.link_lookup(ifname=self.bridge):
                ipr.link("del", index=index)
                removed = True
        return removed

    # ---- addresses ------------------------------------------------------------------------

    def _allocated(self) -> dict[str, tuple[str, list[str]]]:
        """address -> (container id, the ports it exposes), for every address taken."""
        if not self.addresses.is_dir():
            return {}
        found = {}
        for path in self.addresses.iterdir():
            owner, *ports = path.read_text().split() or [""]
            found[path.name] = (owner, ports)
        return found

    def _allocate(self, container_id: str, ports: list[str]) -> str:
        taken = set(self._allocated())
        for host in self.subnet.hosts():
            address = str(host)
            if host == self.gateway or address in taken:
                continue
            (self.addresses / address).write_text("\n".join([container_id, *ports]) + "\n")
            return address
        raise NetworkError(
            f"no free address left in {self.subnet} for another isolated job",
            errno=errno_codes.EADDRNOTAVAIL,
        )

    def _free(self, address: str) -> None:
        (self.addresses / address).unlink(missing_ok=True)

    # ---- one job's wiring -----------------------------------------------------------------

    def _wire(self, container_id: str, address: str) -> int:
        """In a thread of its own (it leaves the node's namespace): make the job's namespace,
        its veth pair on the bridge, its address and route; the namespace's descriptor."""
        outside = _node_end(container_id)
        # A netlink socket stays in the namespace it was opened in: this one is the node's.
        with IPRoute() as node:
            fd = _unshare_network()
            try:
                with IPRoute() as inside:
                    bridge = node.link_lookup(ifname=self.bridge)[0]
                    node.link(
                        "add",
                        ifname=outside,
                        kind="veth",
                        peer={"ifname": JOB_INTERFACE, "net_ns_fd": fd},
                    )
                    index = node.link_lookup(ifname=outside)[0]
                    node.link("set", index=index, master=bridge, state="up")
                    index = inside.link_lookup(ifname=JOB_INTERFACE)[0]
                    prefix = self.subnet.prefixlen
                    inside.addr("add", index=index, address=address, prefixlen=prefix)
                    inside.link("set", index=index, state="up")
                    inside.route("add", dst="0.0.0.0/0", gateway=str(self.gateway))
            except NetlinkError as exc:
                os.close(fd)
                raise NetworkError(
                    f"wire the job's veth {outside} to {self.bridge}: {os.strerror(exc.code)}",
                    errno=exc.code,
                ) from None
            except BaseException:
                os.close(fd)
                raise
        return fd

    def _exposed(self) -> dict[str, str]:
        """``tcp/8080`` -> job address, for every port the maps forward now."""
        found: dict[str, str] = {}
        for protocol in PROTOCOLS:
            for entry in _nft_json("list", "map", "ip", self.table, f"{protocol}_expose"):
                mapping = entry.get("map")
                if isinstance(mapping, dict):
                    for port, address in mapping.get("elem", []):
                        found[f"{protocol}/{port}"] = str(address)
        return found

    def _check_ports(self, ports: list[str]) -> None:
        """Refuse ``ports`` another job on this node exposes (as the address files say)."""
        if not ports:
            return
        allocated = self._allocated().items()
        held = {port: address for address, (_, taken) in allocated for port in taken}
        for port in ports:
            if port in held:
                protocol, _, number = port.partition("/")
                raise PortInUse(
                    f"port {number}/{protocol} of this node is already exposed by another job "
                    f"(at {held[port]})",
                    errno=errno_codes.EADDRINUSE,
                )

    def _expose(self, ports: list[str], address: str) -> None:
        lines = [f"add element ip {self.table} {_element(port, address)}" for port in ports]
        if lines:
            _nft("\n".join(lines) + "\n")

    def _unexpose(self, ports: Iterable[str]) -> None:
        lines = [f"delete element ip {self.table} {_element(port)}" for port in ports]
        if lines:
            _nft("\n".join(lines) + "\n")
