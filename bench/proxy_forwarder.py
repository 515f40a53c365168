"""The endpoint proxy's forwarding alone, two versions of it in one run: CPU per small
request and requests/s through each, against the same service reached directly.

``bench/proxy.py`` measures the proxy where it runs, inside Orchestrate beside a cluster;
this one leaves the cluster out so the forwarding code itself can be compared before and
after a change. The aiohttp service of tests/fixtures/endpoints runs as a plain process;
each version of the proxy is a process of its own serving ``/endpoints/ep1/`` through the
real :class:`EndpointProxy` gate (its directory and token check answered from memory, as
their caches answer a busy endpoint); the clients are a process per phase (16 clients
asking small GETs for ``--seconds``, or ``--downloads`` of ``--size`` MiB).

Rounds alternate: direct, then each version in the order given, ``--rounds`` times. CPU
per request is each process's CPU (all its threads, from /proc/PID/task/*/schedstat, in
nanoseconds) over the requests done; on a shared machine it is the figure to compare.

    git worktree add /tmp/old-proxy <commit>
    python bench/proxy_forwarder.py /tmp/old-proxy /work/main [--download]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "endpoints"
ENDPOINT = "ep1"
TOKEN = "bench-token"


def serve_proxy(port: int, service_port: int) -> None:
    """Serve the proxy on ``port`` in front of the service (this process's fuzzball_core,
    from its PYTHONPATH); prints ``ready`` once listening."""
    from fuzzball_core.config import EndpointsConfig
    from fuzzball_core.orchestrate.endpoint_directory import Destination, Upstream
    from fuzzball_core.orchestrate.endpoint_forwarder import serve
    from fuzzball_core.orchestrate.endpoint_proxy import EndpointProxy
    from fuzzball_core.service.views import Principal

    who = Principal("account", "bench", organization_id="organization")
    upstream = Upstream(
        "workflow", "services.app", f"http://127.0.0.1:{service_port}", True, False, 60.0
    )
    destination = Destination(ENDPOINT, "app", "user", "account", "organization", None, upstream)

    class Directory:
        def lookup(self, endpoint_id: str) -> Destination | None:
            return destination if endpoint_id == ENDPOINT else None

    class Keeper:
        def touch(self, workflow_id: str, stage_name: str, idle_timeout: float) -> None:
            pass

    def authenticate(token: str) -> Principal:
        return who

    proxy = EndpointProxy(
        None,  # type: ignore[arg-type]  # the engine: not reached for a ready endpoint
        authenticate,
        EndpointsConfig(listen=f"127.0.0.1:{port}"),
        Directory(),  # type: ignore[arg-type]
        Keeper(),  # type: ignore[arg-type]
    )

    async def run() -> None:
        await serve(proxy.gate, proxy.pool, "127.0.0.1", port)
        print("ready", flush=True)
        await asyncio.Event().wait()

    # the proxy process's own loop where the version has one (uvloop since the fourth
    # round), asyncio's before
    from fuzzball_core.orchestrate import endpoint_worker

    getattr(endpoint_worker, "run", asyncio.run)(run())


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
    args = parser.parse_args()
    service_port = free_port()
    processes = [
        subprocess.Popen(
            [sys.executable, str(SERVICE / "aiohttp_service.py"), str(service_port), "bench"],
            text=True,
        )
    ]
    try:
        targets: list[tuple[str, str, subprocess.Popen[str] | None]] = [
            ("direct", f"http://127.0.0.1:{service_port}/", None)
        ]
        for root in args.roots:
            port = free_port()
            inherited = os.environ.get("PYTHONPATH", "")
            env = dict(os.environ, PYTHONPATH=f"{Path(root).resolve()}:{inherited}")
            proxy = subprocess.Popen(
                [sys.executable, __file__, "--serve", str(port), str(service_port)],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
                cwd="/",  # not this checkout's directory: the root's fuzzball_core
            )
            processes.append(proxy)
            assert proxy.stdout is not None and proxy.stdout.readline().strip() == "ready"
            targets.append((root, f"http://127.0.0.1:{port}/endpoints/{ENDPOINT}/", proxy))
        figures = compare(targets, processes[0].pid, args)
        report(figures, args)
    finally:
        for process in processes:
            process.terminate()


def compare(
    targets: list[tuple[str, str, subprocess.Popen[str] | None]],
    service_pid: int,
    args: argparse.Namespace,
) -> dict[str, list[dict[str, float]]]:
    """Every target's figures, round after round."""
    figures: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in targets}
    for _ in range(args.rounds):
        for name, url, proxy in targets:
            service_before = cpu_seconds(service_pid)
            proxy_before = cpu_seconds(proxy.pid) if proxy else 0.0
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
            got["proxy_s"] = cpu_seconds(proxy.pid) - proxy_before if proxy else 0.0
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
    args = parser.parse_args()
    # the clients are bench/proxy.py's, so both benches ask the same way
    from proxy import download, throughput

    headers = {"FB-Authorization": f"Bearer {TOKEN}"}
    if args.download:
        url = f"{args.client}bytes/{args.size << 20}"
        print(json.dumps({"mib_s": asyncio.run(download(url, headers, args.downloads))}))
        return
    done, taken = asyncio.run(throughput(args.client, headers, args.concurrency, args.seconds))
    print(json.dumps({"rps": done / taken, "requests": done}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve_proxy(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1:2] == ["--client"]:
        client()
    else:
        main()
