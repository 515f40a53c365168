"""The endpoint proxy's cost: requests per second and added latency through the proxy
against the same service reached directly, in one run.

A one-node test cluster (tests/support/endpoint_stack.py) runs the aiohttp service of
tests/fixtures/endpoints as a workflow service with a path endpoint. Then, for each target
(direct: the service's own port; proxy: ``/endpoints/{id}/``, with ``FB-Authorization``):

* latency: ``--requests`` small GETs (``/``, 15 bytes) one after another on one keep-alive
  connection: p50 and p99;
* throughput: ``--concurrency`` clients asking small GETs for ``--seconds``: requests/s;
* download: ``--downloads`` GETs of ``--size`` MiB (100 by default): MiB/s, the best run;
* the download again with ``curl`` (C), where it is installed, with the CPU per MiB of the
  service, the proxy's processes and curl, and direct's sum of them over the target's ("by
  the CPU"): on two cores the three processes share them, so that is about the most the
  download's ratio can be (``--download-only``: only this phase);
* throughput again with ``wrk`` (Debian's, C, one thread, ``--concurrency`` connections,
  ``--seconds``), where it is installed: the aiohttp clients cost 130-150 µs of CPU per
  request, more than the service and any proxy, so on two cores they decide much of what
  either path reaches (a proxy that cost nothing would reach 82-91 % of direct with them);
  a load generator in C takes a few µs per request and leaves the cores to the service and
  the proxy, as a site's clients, on machines of their own, would. Both are printed.

The clients run in a child process, ``--rounds`` rounds alternating direct and proxy; each
figure is the median of the rounds, and the range of the rounds is printed beside it (the
machine may be shared: compare both sides of one run, never figures of different runs).
Processes on each side: the service is one aiohttp process; the proxy is a process of its
own (started by Orchestrate, which answers its decisions), or Orchestrate's event loop
(this process) where the code measured serves it there; the
clients are one process, in a session of their own: the kernel gives each session
(autogroup) its share of the CPU, and users' clients never share Orchestrate's. (Before,
the clients shared this process's session, so on a busy machine every client request took
CPU from the proxy: 34 % of direct in that arrangement against 59 % with the clients
apart, same code, six minutes apart.)
The CPU each small request costs the proxy's process, Orchestrate's (this process: while
it proxies, less while it does not), the service (its process's, found by its listening
port) and the clients (each way) is printed too: on a busy machine it says what the proxy
costs when the ratios say mostly how long each process waits for a core (a request
through the proxy wakes three processes, not two).

The peers, measured in the same run against the same service with the same clients
(rounds alternate direct, fuzzball, nginx with one worker, nginx with one per core,
HAProxy): nginx (Debian's ``nginx-light``) and HAProxy (``haproxy``) as a site would set
them for speed (access log off, kept-alive upstream connections shared between clients,
HAProxy on one thread with ``http-reuse always`` and splicing), each started by the bench
from a configuration it writes in its temporary directory, listening on loopback, in a
session of its own, and stopped at the end. A peer not installed is reported as such.
They only forward (no token checked, no routing): what they cost is a floor for what
forwarding costs on this machine.

Run as root (it starts containers): ``python bench/proxy.py``. The targets of issue 16 are
at most 1 ms added at p50 and at least 80 % of direct throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support

from proxy_forwarder import cpu_seconds  # bench/, this script's directory
from support.cluster import LocalRegistry, free_port, have_prerequisites
from support.endpoint_stack import EndpointCluster, bearer
from support.python_image import push_python_image

OURS = "fuzzball"
WRK = shutil.which("wrk")
CURL = shutil.which("curl")
SERVICE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "endpoints"
WORKFLOW = """
version: v1
services:
  app:
    image: {{uri: "{image}"}}
    args: ["{port}", "bench"]
    network:
      ports: [{{name: http, port: {port}}}]
      endpoints: [{{name: app, port-name: http}}]
    readiness-probe: {{http-get: {{port: {port}, path: /}}, period-seconds: 1}}
"""


async def latencies(base: str, headers: dict[str, str], count: int) -> list[float]:
    """Seconds each of ``count`` sequential small GETs took (after 50 to warm up)."""
    taken = []
    async with aiohttp.ClientSession(headers=headers) as session:
        for index in range(count + 50):
            started = time.perf_counter()
            async with session.get(base) as answer:
                await answer.read()
                assert answer.status == 200, answer.status
            if index >= 50:
                taken.append(time.perf_counter() - started)
    return taken


async def throughput(
    base: str, headers: dict[str, str], clients: int, seconds: float
) -> tuple[int, float]:
    """Small GETs with ``clients`` asking at once for ``seconds``: how many were done, and
    in how many seconds."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            async with session.get(base) as answer:
                await answer.read()
            done += 1

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(clients)))
        return done, time.perf_counter() - started


async def download(url: str, headers: dict[str, str], runs: int) -> float:
    """The best MiB/s of ``runs`` downloads of ``url``."""
    best = 0.0
    async with aiohttp.ClientSession(headers=headers) as session:
        for _ in range(runs):
            received = 0
            started = time.perf_counter()
            async with session.get(url) as answer:
                async for chunk in answer.content.iter_any():
                    received += len(chunk)
            best = max(best, received / 2**20 / (time.perf_counter() - started))
    return best


def measure(
    base: str, headers: dict[str, str], args: argparse.Namespace, phase: str
) -> dict[str, float]:
    """The figures of one phase for one target (run in a child process: the proxy serves
    from this process's Orchestrate, and a client sharing its interpreter would slow it)."""
    if phase == "latency":
        taken = sorted(asyncio.run(latencies(base, headers, args.requests)))
        return {
            "p50": statistics.median(taken) * 1000,
            "p99": taken[int(len(taken) * 0.99) - 1] * 1000,
        }
    if phase == "throughput":
        cpu = time.process_time()
        done, seconds = asyncio.run(throughput(base, headers, args.concurrency, args.seconds))
        return {"rps": done / seconds, "client_us": (time.process_time() - cpu) / done * 1e6}
    url = f"{base}bytes/{args.size << 20}"
    if phase == "curl":
        return curl_download(url, headers, args.downloads)
    return {"mib_s": asyncio.run(download(url, headers, args.downloads))}


def curl_download(url: str, headers: dict[str, str], runs: int) -> dict[str, float]:
    """The best MiB/s of ``runs`` downloads of ``url`` by curl (C: the download's client
    costs little, as wrk for the small requests), the body thrown away; and curl's CPU per
    MiB received (all runs), the client's share of what the download costs the machine."""
    command = [
        str(CURL),
        "-sS",
        "--fail",
        "-o",
        "/dev/null",
        "-w",
        "%{speed_download} %{size_download}",
    ]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    best = received = 0.0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(runs):
        done = subprocess.run([*command, url], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"curl against {url} failed: {done.stderr.strip()}")
        speed, size = done.stdout.split()
        best = max(best, float(speed) / 2**20)
        received += float(size) / 2**20
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"curl_mib_s": best, "curl_client_us": spent / received * 1e6, "curl_mib": received}


def wrk_throughput(
    base: str, headers: dict[str, str], args: argparse.Namespace
) -> dict[str, float]:
    """Small GETs from ``wrk`` (one thread, ``--concurrency`` connections, ``--seconds``), in
    a session of its own like the other clients: requests/s and its CPU per request."""
    command = [WRK, "-t1", f"-c{args.concurrency}", f"-d{args.seconds:g}s"]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    process = subprocess.Popen(
        [*command, base], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    assert process.stdout is not None
    output = process.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    rps = [line.split()[1] for line in output.splitlines() if line.startswith("Requests/sec:")]
    if process.returncode != 0 or not rps or "Non-2xx" in output or "Socket errors" in output:
        raise RuntimeError(f"wrk against {base} failed: {output.strip()}")
    done = float(rps[0]) * args.seconds
    return {
        "wrk_rps": float(rps[0]),
        "wrk_client_us": (usage.ru_utime + usage.ru_stime) / done * 1e6,
    }


def _own_session() -> None:
    """The clients' process: a session of its own (see the module's docstring)."""
    os.setsid()


def listener_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` in this network namespace (None: not found)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                parts = line.split()
                if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{parts[9]}]")
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        with contextlib.suppress(OSError):
            for fd in fd_dir.iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return int(fd_dir.parent.name)
    return None


NGINX_CONFIG = """
daemon off;
master_process on;
user root;
worker_processes {workers};
pid {directory}/nginx.pid;
error_log {directory}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {directory}/client_body;
    proxy_temp_path {directory}/proxy;
    fastcgi_temp_path {directory}/fastcgi;
    uwsgi_temp_path {directory}/uwsgi;
    scgi_temp_path {directory}/scgi;
    # a kept-alive client is never sent away (nginx's default closes it after 1,000
    # requests), as the clients of the other targets are not
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    upstream service {{
        server 127.0.0.1:{service_port};
        keepalive 32;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://service;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            # the download: buffered in memory only (1 MiB), never in a temporary file
            proxy_buffering on;
            proxy_buffer_size 64k;
            proxy_buffers 16 64k;
            proxy_busy_buffers_size 256k;
            proxy_max_temp_file_size 0;
        }}
    }}
}}
"""

HAPROXY_CONFIG = """
global
    nbthread 1
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
    # server connections kept and shared between clients, as nginx's keepalive pool
    http-reuse always
    # the download's body moved by splice(2), as the fuzzball proxy moves it
    option splice-auto
frontend bench
    bind 127.0.0.1:{port}
    default_backend service
backend service
    server app 127.0.0.1:{service_port}
"""


@dataclass
class Target:
    """One way to the service: its URL, the headers its clients send, and the processes
    that are the proxy (none: the service is asked directly)."""

    name: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    pids: Callable[[], list[int]] = list


class Peer:
    """A proxy from the distribution (nginx, HAProxy) in front of the service: started
    from a configuration written in ``directory``, in a session of its own like the
    fuzzball proxy's process, listening on loopback; :meth:`stop` ends it."""

    def __init__(self, name: str, command: list[str], config: str, directory: Path) -> None:
        self.name = name
        self.port = free_port()
        directory.mkdir(parents=True)
        path = directory / "proxy.conf"
        path.write_text(config.format(directory=directory, port=self.port))
        self.log = (directory / "output").open("wb")
        self.process = subprocess.Popen(
            [*command, str(path)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while not _accepts(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                output = (directory / "output").read_text(errors="replace")
                raise RuntimeError(f"{name} did not start: {output}")
            time.sleep(0.05)

    def target(self) -> Target:
        """The peer as a target of :func:`compare`."""
        return Target(self.name, f"http://127.0.0.1:{self.port}/", pids=self.pids)

    def pids(self) -> list[int]:
        """The peer's processes: the one started and its children (nginx's workers)."""
        found = [self.process.pid]
        for task in Path(f"/proc/{self.process.pid}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                found += [int(pid) for pid in task.read_text().split()]
        return found

    def stop(self) -> None:
        """End the peer and its children (nginx's master stops its workers on TERM)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def start_peers(directory: Path, service_port: int) -> tuple[list[Peer], list[str]]:
    """The peers installed here, started in front of the service; and a line for each
    peer that is not installed (reported, never silently left out)."""
    started: list[Peer] = []
    missing: list[str] = []
    nginx, haproxy = shutil.which("nginx"), shutil.which("haproxy")
    if nginx is None:
        missing.append("nginx: not installed; apt-get install nginx-light")
    else:
        # one worker, as the fuzzball proxy is one process; and one per core (auto)
        for workers in ("1", "auto"):
            config = NGINX_CONFIG.replace("{workers}", workers).replace(
                "{service_port}", str(service_port)
            )
            name = f"nginx-{workers}"
            command = [nginx, "-p", str(directory / name), "-e", "stderr", "-c"]
            started.append(Peer(name, command, config, directory / name))
    if haproxy is None:
        missing.append("haproxy: not installed; apt-get install haproxy")
    else:
        config = HAPROXY_CONFIG.replace("{service_port}", str(service_port))
        started.append(Peer("haproxy", [haproxy, "-db", "-f"], config, directory / "haproxy"))
    return started, missing


def compare(targets: list[Target], args: argparse.Namespace, service_pid: int | None) -> None:
    """``--rounds`` rounds of every target, alternating (the first target is direct);
    each figure the rounds' median. CPU figures come from the processes' schedstat
    (nanoseconds, all threads)."""
    rounds: dict[str, list[dict[str, float]]] = {target.name: [] for target in targets}
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn, initializer=_own_session) as child:
        for _ in range(args.rounds):
            for target in targets:
                got: dict[str, float] = {}
                if not args.download_only:
                    got |= small_requests(child, target, args, service_pid)
                if CURL is not None:
                    got |= curl_phase(child, target, args, service_pid)
                rounds[target.name].append(got)
    report(targets, rounds, args, service_pid)


def _cpu(service_pid: int | None, pids: list[int]) -> tuple[float, float]:
    """The service's and the proxy's processes' CPU seconds so far."""
    return cpu_seconds(service_pid) if service_pid else 0.0, sum(map(cpu_seconds, pids))


def small_requests(
    child: ProcessPoolExecutor, target: Target, args: argparse.Namespace, service_pid: int | None
) -> dict[str, float]:
    """One round of the aiohttp clients' phases (latency, throughput, download) and wrk's,
    with the CPU per small request of each process."""
    url, headers = target.url, target.headers
    got = child.submit(measure, url, headers, args, "latency").result()
    # CPU per small request: the service's, the proxy's processes', and this
    # process's (Orchestrate's: it answers the fuzzball proxy's decisions; its
    # use during the direct phase, when it proxies nothing, is its idle use)
    pids = target.pids()
    service_cpu, proxy_cpu = _cpu(service_pid, pids)
    own_cpu, started = time.process_time(), time.perf_counter()
    got |= child.submit(measure, url, headers, args, "throughput").result()
    taken = time.perf_counter() - started
    done = got["rps"] * args.seconds
    got["own_share"] = (time.process_time() - own_cpu) / taken
    service_now, proxy_now = _cpu(service_pid, pids)
    if service_pid:
        got["service_us"] = (service_now - service_cpu) / done * 1e6
    got["proxy_us"] = (proxy_now - proxy_cpu) / done * 1e6
    got["requests"] = done
    got |= child.submit(measure, url, headers, args, "download").result()
    if WRK is not None:
        proxy_cpu = sum(map(cpu_seconds, pids))
        got |= wrk_throughput(url, headers, args)
        done = got["wrk_rps"] * args.seconds
        got["wrk_proxy_us"] = (sum(map(cpu_seconds, pids)) - proxy_cpu) / done * 1e6
    return got


def curl_phase(
    child: ProcessPoolExecutor, target: Target, args: argparse.Namespace, service_pid: int | None
) -> dict[str, float]:
    """One round of curl's downloads, with the CPU per MiB of the service, the proxy's
    processes and curl: on two cores the three share the CPU, so what they spend together
    per MiB, against direct's service and curl, bounds the ratio any proxy can reach."""
    pids = target.pids()
    service_cpu, proxy_cpu = _cpu(service_pid, pids)
    got = child.submit(measure, target.url, target.headers, args, "curl").result()
    service_now, proxy_now = _cpu(service_pid, pids)
    mib = got["curl_mib"]
    got["curl_service_us"] = (service_now - service_cpu) / mib * 1e6
    got["curl_proxy_us"] = (proxy_now - proxy_cpu) / mib * 1e6
    return got


def report(
    targets: list[Target],
    rounds: dict[str, list[dict[str, float]]],
    args: argparse.Namespace,
    service_pid: int | None,
) -> None:
    """Each target's medians, then each proxy against direct (the first target)."""
    figures = {
        name: {key: statistics.median(r[key] for r in found) for key in found[0]}
        for name, found in rounds.items()
    }

    def spread(name: str, key: str) -> str:
        values = [r[key] for r in rounds[name]]
        return f"{min(values):,.0f}-{max(values):,.0f}"

    def ratios(name: str, key: str) -> str:
        """The median's ratio to direct's median, and each round's to its direct round."""
        each = [p[key] / d[key] for d, p in zip(rounds[direct], rounds[name], strict=True)]
        median = figures[name][key] / figures[direct][key]
        return f"{median:.0%} (rounds {min(each):.0%}-{max(each):.0%})"

    direct = targets[0].name
    width = max(len(name) for name in rounds)

    def by_aiohttp_clients() -> None:
        """The aiohttp clients' figures, and each process's CPU per small request."""
        for name, got in figures.items():
            print(
                f"{name:>{width}}: p50 {got['p50']:.3f} ms  p99 {got['p99']:.3f} ms  "
                f"{got['rps']:,.0f} requests/s ({spread(name, 'rps')}, "
                f"{args.concurrency} clients)  "
                f"{args.size} MiB download {got['mib_s']:,.0f} MiB/s ({spread(name, 'mib_s')})"
            )
        plain = figures[direct]
        service = f"service {spread(direct, 'service_us')}" if service_pid else "service not found"
        print(
            f"CPU per small request direct: {service} µs (1 aiohttp process), "
            f"clients {spread(direct, 'client_us')} µs; load average "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
        for target in targets[1:]:
            name, through = target.name, figures[target.name]
            cpu = f"proxy {spread(name, 'proxy_us')} µs ({len(target.pids())} process(es))"
            if name == OURS:
                # Orchestrate's CPU per second while it proxied, less that while it did not
                own_us = [
                    (p["own_share"] - d["own_share"]) * args.seconds / p["requests"] * 1e6
                    for d, p in zip(rounds[direct], rounds[name], strict=True)
                ]
                cpu += f" + Orchestrate's {min(own_us):,.0f}-{max(own_us):,.0f} µs"
            if service_pid:
                cpu += f", service {spread(name, 'service_us')} µs"
            print(
                f"{name:>{width}}: throughput {ratios(name, 'rps')} of direct; added p50 "
                f"{through['p50'] - plain['p50']:+.3f} ms, "
                f"p99 {through['p99'] - plain['p99']:+.3f} ms; download {ratios(name, 'mib_s')}; "
                f"CPU per small request: {cpu}, clients "
                f"{spread(name, 'client_us')} µs"
            )

    def by_c_clients(title: str, key: str, extra: Callable[[str], str]) -> None:
        """A figure measured with a client in C: each target's, and its ratio to direct."""
        print(title)
        for target in targets:
            name = target.name
            line = f"{name:>{width}}: {figures[name][key]:,.0f} ({spread(name, key)})"
            if name != direct:
                line += f", {ratios(name, key)} of direct"
            print(line + extra(name))

    def curl_cpu(name: str) -> str:
        """Each process's CPU per MiB, and direct's sum over this target's: the ratio the
        download would reach if the processes had the cores to themselves and no more."""
        keys = ["curl_service_us", "curl_proxy_us", "curl_client_us"]
        spent = sum(figures[name][key] for key in keys)
        line = (
            f"; CPU per MiB: service {spread(name, keys[0])} µs, "
            + ("" if name == direct else f"proxy {spread(name, keys[1])} µs, ")
            + f"curl {spread(name, keys[2])} µs"
        )
        if name != direct:
            line += f"; by the CPU {sum(figures[direct][key] for key in keys) / spent:.0%}"
        return line

    if not args.download_only:
        by_aiohttp_clients()
    if CURL is None:
        print("curl: not installed: no download with a client in C")
    else:
        by_c_clients(f"{args.size} MiB download with curl (C), MiB/s:", "curl_mib_s", curl_cpu)
    if args.download_only:
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    elif WRK is None:
        print("wrk: not installed (apt-get install wrk): no throughput with C clients")
    else:

        def wrk_cpu(name: str) -> str:
            proxy = "" if name == direct else f"proxy {spread(name, 'wrk_proxy_us')} µs, "
            return f"; CPU per request: {proxy}wrk's {spread(name, 'wrk_client_us')} µs"

        title = f"with wrk (C, 1 thread, {args.concurrency} connections), requests/s:"
        by_c_clients(title, "wrk_rps", wrk_cpu)
    print(f"(medians of {args.rounds} rounds; ratios: of the medians, and each round's)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--size", type=int, default=100, help="MiB per download")
    parser.add_argument("--downloads", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--download-only",
        action="store_true",
        help="only curl's downloads (the small requests and the aiohttp clients left out)",
    )
    args = parser.parse_args()
    if args.download_only and CURL is None:
        sys.exit("--download-only needs curl (scripts/install.sh installs it)")
    missing = have_prerequisites()
    if missing:
        sys.exit(missing)
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as scratch:
        directory = Path(scratch)
        registry = LocalRegistry(directory / "registry")
        stack = None
        peers: list[Peer] = []
        try:
            image = push_python_image(
                registry.url, SERVICE / "aiohttp_service.py", "library/endpoint-service"
            )
            stack = EndpointCluster(directory / "cluster", registry.url)
            who, token = stack.orchestrate.call(lambda: stack.service().create_account("bench"))
            port = free_port()
            workflow_id = stack.start_workflow(who, WORKFLOW.format(image=image, port=port))
            endpoint = stack.endpoint_id(who, workflow_id, "app")
            direct = f"http://127.0.0.1:{port}/"
            proxied = f"{stack.proxy_url}/endpoints/{endpoint}/"
            _wait_ready(proxied, bearer(token))
            process = getattr(stack.orchestrate.orchestrate.endpoints, "process", None)
            proxy_pids = process.pids if process is not None else []
            where = (
                f"its own process(es): {len(proxy_pids)}"
                if proxy_pids
                else "Orchestrate's event loop, 1 process"
            )
            print(
                f"service: aiohttp in a container (1 process); {OURS} proxy: "
                f"{stack.proxy_url} ({where}); clients: 1 process, a session of their own",
                flush=True,
            )
            peers, missing = start_peers(directory / "peers", port)
            for line in missing:
                print(line, flush=True)
            targets = [
                Target("direct", direct),
                Target(OURS, proxied, bearer(token), lambda: list(proxy_pids)),
                *(peer.target() for peer in peers),
            ]
            compare(targets, args, listener_pid(port))
        finally:
            for peer in peers:
                peer.stop()
            if stack is not None:
                stack.close()
            registry.stop()


def _wait_ready(url: str, headers: dict[str, str]) -> None:
    async def ask() -> int:
        async with aiohttp.ClientSession(headers=headers) as session, session.get(url) as answer:
            return answer.status

    deadline = time.monotonic() + 120
    while asyncio.run(ask()) != 200:
        if time.monotonic() > deadline:
            sys.exit("the service never became ready through the proxy")
        time.sleep(0.2)


if __name__ == "__main__":
    main()
