"""The endpoint proxy's cost: requests per second and added latency through the proxy
against the same service reached directly, in one run.

A one-node test cluster (tests/support/endpoint_stack.py) runs the aiohttp service of
tests/fixtures/endpoints as a workflow service with a path endpoint. Then, for each target
(direct: the service's own port; proxy: ``/endpoints/{id}/``, with ``FB-Authorization``):

* latency: ``--requests`` small GETs (``/``, 15 bytes) one after another on one keep-alive
  connection: p50 and p99;
* throughput: ``--concurrency`` clients asking small GETs for ``--seconds``: requests/s;
* download: ``--downloads`` GETs of ``--size`` MiB (100 by default): MiB/s, the best run.

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

Run as root (it starts containers): ``python bench/proxy.py``. The targets of issue 16 are
at most 1 ms added at p50 and at least 80 % of direct throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support

from support.cluster import LocalRegistry, free_port, have_prerequisites
from support.endpoint_stack import EndpointCluster, bearer
from support.python_image import push_python_image

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
        done, taken = asyncio.run(throughput(base, headers, args.concurrency, args.seconds))
        return {"rps": done / taken, "client_us": (time.process_time() - cpu) / done * 1e6}
    url = f"{base}bytes/{args.size << 20}"
    return {"mib_s": asyncio.run(download(url, headers, args.downloads))}


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def compare(
    direct: str,
    proxied: str,
    token: str,
    args: argparse.Namespace,
    service_pid: int | None,
    proxy_pids: list[int],
) -> None:
    """``--rounds`` rounds of both targets, alternating; each figure the rounds' median.
    ``proxy_pids``: the proxy's own processes (none: it is served in this one)."""
    rounds: dict[str, list[dict[str, float]]] = {"direct": [], "proxy": []}
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn, initializer=_own_session) as child:
        for _ in range(args.rounds):
            for name, url, headers in (
                ("direct", direct, {}),
                ("proxy", proxied, bearer(token)),
            ):
                got = child.submit(measure, url, headers, args, "latency").result()
                # CPU per small request: the service's (in the direct phase) and this
                # process's, which serves the proxy (in the proxy phase, less what it
                # spent in the direct phase's time, when it proxies nothing)
                service_cpu = _cpu_seconds(service_pid) if service_pid else 0.0
                proxy_cpu = sum(map(_cpu_seconds, proxy_pids))
                own_cpu, started = time.process_time(), time.perf_counter()
                got |= child.submit(measure, url, headers, args, "throughput").result()
                taken = time.perf_counter() - started
                done = got["rps"] * args.seconds
                got["own_share"] = (time.process_time() - own_cpu) / taken
                if service_pid:
                    got["service_us"] = (_cpu_seconds(service_pid) - service_cpu) / done * 1e6
                if proxy_pids:
                    got["proxy_us"] = (sum(map(_cpu_seconds, proxy_pids)) - proxy_cpu) / done * 1e6
                got["requests"] = done
                got |= child.submit(measure, url, headers, args, "download").result()
                rounds[name].append(got)
    figures = {
        name: {key: statistics.median(r[key] for r in found) for key in found[0]}
        for name, found in rounds.items()
    }

    def spread(name: str, key: str) -> str:
        values = [r[key] for r in rounds[name]]
        return f"{min(values):,.0f}-{max(values):,.0f}"

    for name, got in figures.items():
        print(
            f"{name:>6}: p50 {got['p50']:.3f} ms  p99 {got['p99']:.3f} ms  "
            f"{got['rps']:,.0f} requests/s ({spread(name, 'rps')}, {args.concurrency} clients)  "
            f"{args.size} MiB download {got['mib_s']:,.0f} MiB/s ({spread(name, 'mib_s')})"
        )
    ratios = [p["rps"] / d["rps"] for d, p in zip(rounds["direct"], rounds["proxy"], strict=True)]
    downloads = [
        p["mib_s"] / d["mib_s"] for d, p in zip(rounds["direct"], rounds["proxy"], strict=True)
    ]
    print(
        f"per round, proxy/direct: throughput {min(ratios):.0%}-{max(ratios):.0%}, "
        f"download {min(downloads):.0%}-{max(downloads):.0%}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    # this process's CPU per second while it proxied, less that while it did not
    own_us = [
        (p["own_share"] - d["own_share"]) * args.seconds / p["requests"] * 1e6
        for d, p in zip(rounds["direct"], rounds["proxy"], strict=True)
    ]
    orchestrate = (
        f"Orchestrate's process {min(own_us):,.0f}-{max(own_us):,.0f} µs (over its idle use)"
    )
    if proxy_pids:
        used = spread("proxy", "proxy_us")
        proxy = f"the proxy's process(es) ({len(proxy_pids)}) {used} µs, {orchestrate}"
    else:
        proxy = f"the proxy in {orchestrate}"
    service = (
        f"the service {spread('direct', 'service_us')} µs (1 aiohttp process)"
        if service_pid
        else "the service's process not found"
    )
    # the clients' own CPU per request, each way: the same client asks both, so a
    # difference is what the proxy's answers (or its timing) cost the client
    clients = (
        f"the clients {spread('direct', 'client_us')} µs direct, "
        f"{spread('proxy', 'client_us')} µs through the proxy"
    )
    print(f"CPU per small request: {proxy}, {service}, {clients}")
    plain, through = figures["direct"], figures["proxy"]
    print(
        f"added latency: p50 {through['p50'] - plain['p50']:+.3f} ms, "
        f"p99 {through['p99'] - plain['p99']:+.3f} ms; "
        f"throughput {through['rps'] / plain['rps']:.0%} of direct; "
        f"download {through['mib_s'] / plain['mib_s']:.0%} of direct "
        f"(medians of {args.rounds} rounds)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--size", type=int, default=100, help="MiB per download")
    parser.add_argument("--downloads", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    missing = have_prerequisites()
    if missing:
        sys.exit(missing)
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as scratch:
        directory = Path(scratch)
        registry = LocalRegistry(directory / "registry")
        stack = None
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
                f"service: aiohttp in a container (1 process); proxy: {stack.proxy_url}"
                f" ({where}); clients: 1 process, a session of their own",
                flush=True,
            )
            compare(direct, proxied, token, args, listener_pid(port), proxy_pids)
        finally:
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
