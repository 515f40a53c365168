"""The endpoint proxy's forwarding alone, two versions of it in one run: CPU per small
request and requests/s through each, against the same service reached directly.

``bench/proxy.py`` measures the proxy where it runs, beside a cluster; this one leaves the
cluster out so the forwarding code itself can be compared before and after a change. The
aiohttp service of tests/fixtures/endpoints runs as a plain process; each version of the
proxy is served as Orchestrate serves it (since the sixth round): a process standing in
for Orchestrate starts the proxy's own process (:class:`ProxyProcess`, the endpoint
worker with its kept decisions) and answers its questions through the real
:class:`EndpointProxy` (its directory and token check answered from memory, as their
caches answer a busy endpoint), ``/endpoints/ep1/``; the clients are a process per phase
(16 clients asking small GETs for ``--seconds``, or ``--downloads`` of ``--size`` MiB).

Rounds alternate: direct, then each version in the order given, ``--rounds`` times. CPU
per request is the proxy process's CPU (all its threads, from /proc/PID/task/*/schedstat,
in nanoseconds) over the requests done; on a shared machine it is the figure to compare.

``--instructions N`` counts instead of timing: each version is served under valgrind
(cachegrind, no cache simulation) twice, once for N small GETs and once for 2N (16
clients), and the difference of the proxy process's instructions over N is its user-space
instructions per request: the same whatever else the machine runs (the system calls'
work in the kernel is not counted; strace shows the same calls per request either way).
Under valgrind the processes run some 50 times slower, so Orchestrate's decisions, kept a
second, would be asked again every few dozen requests instead of every few thousand: for
the count they are kept for the whole run, so it says what each request costs.

    git worktree add /tmp/old-proxy <commit>
    python bench/proxy_forwarder.py /tmp/old-proxy /work/main [--download]
    python bench/proxy_forwarder.py /tmp/old-proxy /work/main --instructions 2000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp

SERVICE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "endpoints"
ENDPOINT = "ep1"
TOKEN = "bench-token"


def serve_proxy(port: int, service_port: int, counted: bool) -> None:
    """Serve the proxy on ``port`` in front of the service (this process's fuzzball_core,
    from its PYTHONPATH): its own process, started and answered by this one as by
    Orchestrate; prints ``ready PID`` (the proxy process's) once listening. ``counted``:
    under valgrind, decisions kept for the run (see the module's docstring)."""
    from fuzzball_core.config import EndpointsConfig
    from fuzzball_core.orchestrate import endpoint_proxy
    from fuzzball_core.orchestrate.endpoint_directory import Destination, Upstream
    from fuzzball_core.orchestrate.endpoint_proxy import EndpointProxy, ProxyProcess
    from fuzzball_core.service.views import Principal

    if counted:
        endpoint_proxy.READY_TTL = endpoint_proxy.TOKEN_TTL = 3600.0

    who = Principal("account", "bench", organization_id="organization")
    upstream = Upstream(
        "workflow", "services.app", f"http://127.0.0.1:{service_port}", True, False, 60.0
    )
    destination = Destination(ENDPOINT, "app", "user", "account", "organization", None, upstream)

    class Directory:
        on_forget: list[Callable[[str], None]] = []

        def lookup(self, endpoint_id: str) -> Destination | None:
            return destination if endpoint_id == ENDPOINT else None

    class Keeper:
        def touch(self, workflow_id: str, stage_name: str, idle_timeout: float) -> None:
            pass

    def authenticate(token: str) -> Principal:
        return who

    directory = Directory()
    proxy = EndpointProxy(
        None,  # type: ignore[arg-type]  # the engine: not reached for a ready endpoint
        authenticate,
        EndpointsConfig(listen=f"127.0.0.1:{port}"),
        directory,  # type: ignore[arg-type]
        Keeper(),  # type: ignore[arg-type]
    )

    async def run() -> None:
        process = ProxyProcess(proxy, directory)  # type: ignore[arg-type]
        await process.start("127.0.0.1", port)
        print(f"ready {process.pids[0]}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


def cpu_seconds(pid: int) -> float:
    """CPU seconds all threads of ``pid`` have used (nanosecond counters)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except OSError:
            continue  # a thread that ended meanwhile
    return total / 1e9


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="+", help="checkouts whose fuzzball_core to compare")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--download", action="store_true", help="downloads, not small GETs")
    parser.add_argument("--size", type=int, default=100, help="MiB per download")
    parser.add_argument("--downloads", type=int, default=3)
    parser.add_argument(
        "--instructions", type=int, metavar="N", help="count instructions per request"
    )
    args = parser.parse_args()
    service_port = free_port()
    service = subprocess.Popen(
        [sys.executable, str(SERVICE / "aiohttp_service.py"), str(service_port), "bench"],
        text=True,
    )
    try:
        if args.instructions:
            for root in args.roots:
                print(
                    f"{root}: {instructions(root, service_port, args):,.0f} instructions "
                    "per request in the proxy's process"
                )
            return
        with contextlib.ExitStack() as proxies:
            targets: list[tuple[str, str, int | None]] = [
                ("direct", f"http://127.0.0.1:{service_port}/", None)
            ]
            for root in args.roots:
                port, pid = proxies.enter_context(served(root, service_port))
                targets.append((root, f"http://127.0.0.1:{port}/endpoints/{ENDPOINT}/", pid))
            figures = compare(targets, service.pid, args)
        report(figures, args)
    finally:
        service.terminate()


@contextlib.contextmanager
def served(
    root: str,
    service_port: int,
    valgrind: tuple[str, ...] = (),
) -> Iterator[tuple[int, int]]:
    """The proxy of checkout ``root`` serving in front of the service: its port and its
    process's pid (``valgrind``: the command line both processes run under)."""
    port = free_port()
    inherited = os.environ.get("PYTHONPATH", "")
    env = dict(os.environ, PYTHONPATH=f"{Path(root).resolve()}:{inherited}")
    if valgrind:
        env["PYTHONHASHSEED"] = "0"  # the same dictionaries' layout in both counts
    server = subprocess.Popen(
        [*valgrind, sys.executable, __file__, "--serve", str(port), str(service_port)]
        + (["counted"] if valgrind else []),
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",  # not this checkout's directory: the root's fuzzball_core
    )
    try:
        assert server.stdout is not None
        ready, pid = server.stdout.readline().split()
        assert ready == "ready"
        yield port, int(pid)
    finally:
        server.terminate()  # its proxy process ends with it (the channel closes)
        server.wait()


def instructions(root: str, service_port: int, args: argparse.Namespace) -> float:
    """The proxy process's user-space instructions per small request, version ``root``:
    the difference between serving N and 2N requests (what starting and ending cost is
    the same in both), over N."""
    totals = []
    for requests in (args.instructions, 2 * args.instructions):
        with tempfile.NamedTemporaryFile(mode="r", suffix=".log") as log:
            valgrind = ["valgrind", "--tool=cachegrind", "--cache-sim=no"]
            valgrind += ["--cachegrind-out-file=/dev/null", "--trace-children=yes"]
            with served(root, service_port, (*valgrind, f"--log-file={log.name}.%p")) as (
                port,
                pid,
            ):
                url = f"http://127.0.0.1:{port}/endpoints/{ENDPOINT}/"
                subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--client",
                        url,
                        f"--requests={requests}",
                        f"--concurrency={args.concurrency}",
                    ],
                    check=True,
                    capture_output=True,
                )
            summary = Path(f"{log.name}.{pid}")
            # the proxy's process ends after its server, when the channel closes
            while not (counted := re.search(r"I\s+refs:\s+([\d,]+)", summary.read_text())):
                time.sleep(0.1)
            totals.append(int(counted.group(1).replace(",", "")))
            for written in Path(log.name).parent.glob(Path(log.name).name + ".*"):
                written.unlink()
    return (totals[1] - totals[0]) / args.instructions


def compare(
    targets: list[tuple[str, str, int | None]],
    service_pid: int,
    args: argparse.Namespace,
) -> dict[str, list[dict[str, float]]]:
    """Every target's figures, round after round."""
    figures: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in targets}
    for _ in range(args.rounds):
        for name, url, proxy in targets:
            service_before = cpu_seconds(service_pid)
            proxy_before = cpu_seconds(proxy) if proxy else 0.0
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            clients_before = usage.ru_utime + usage.ru_stime
            phase = ["--download"] if args.download else []
            out = subprocess.run(
                [sys.executable, __file__, "--client", url, *phase]
                + [f"--{k}={getattr(args, k)}" for k in ("seconds", "concurrency", "size")]
                + [f"--downloads={args.downloads}"],
                capture_output=True,
                text=True,
                check=True,
            )
            got: dict[str, float] = json.loads(out.stdout)
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            got["clients_s"] = usage.ru_utime + usage.ru_stime - clients_before
            got["service_s"] = cpu_seconds(service_pid) - service_before
            got["proxy_s"] = cpu_seconds(proxy) - proxy_before if proxy else 0.0
            figures[name].append(got)
    return figures


def report(figures: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> None:
    """Each version's medians and its ratio to direct, round by round."""
    direct = figures.pop("direct")
    key = "mib_s" if args.download else "rps"
    plain = [r[key] for r in direct]
    unit = "MiB/s" if args.download else "requests/s"
    print(f"direct: {statistics.median(plain):,.0f} {unit}")
    for name, rounds in figures.items():
        values = [r[key] for r in rounds]
        ratios = [v / d for v, d in zip(values, plain, strict=True)]
        if args.download:
            cost = [r["proxy_s"] / (args.size * args.downloads) * 1e3 for r in rounds]
            what = "ms CPU per MiB"
        else:
            cost = [r["proxy_s"] / r["requests"] * 1e6 for r in rounds]
            what = "µs CPU per request"
        print(
            f"{name}: {statistics.median(values):,.0f} {unit}, "
            f"{statistics.median(ratios):.0%} of direct (rounds {min(ratios):.0%}-"
            f"{max(ratios):.0%}); the proxy {statistics.median(cost):.1f} {what} "
            f"(rounds {min(cost):.1f}-{max(cost):.1f})"
        )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def client() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client")
    parser.add_argument("--download", action="store_true")
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--size", type=int)
    parser.add_argument("--downloads", type=int)
    parser.add_argument("--requests", type=int)
    args = parser.parse_args()
    # the clients are bench/proxy.py's, so both benches ask the same way
    from proxy import download, throughput

    headers = {"FB-Authorization": f"Bearer {TOKEN}"}
    if args.requests:
        asyncio.run(asked(args.client, headers, args.concurrency, args.requests))
        return
    if args.download:
        url = f"{args.client}bytes/{args.size << 20}"
        print(json.dumps({"mib_s": asyncio.run(download(url, headers, args.downloads))}))
        return
    done, taken = asyncio.run(throughput(args.client, headers, args.concurrency, args.seconds))
    print(json.dumps({"rps": done / taken, "requests": done}))


async def asked(base: str, headers: dict[str, str], clients: int, requests: int) -> None:
    """``requests`` small GETs, ``clients`` at once (each its share, one after another)."""

    async def client(session: aiohttp.ClientSession, share: int) -> None:
        for _ in range(share):
            async with session.get(base) as answer:
                await answer.read()

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:
        shares = [requests // clients + (n < requests % clients) for n in range(clients)]
        await asyncio.gather(*(client(session, share) for share in shares))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve_proxy(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:5] == ["counted"])
    elif sys.argv[1:2] == ["--client"]:
        client()
    else:
        main()
