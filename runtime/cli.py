"""``fuzzball-runtime``: the node runtime's debug CLI.

    fuzzball-runtime build-image DIR OUT.erofs
    fuzzball-runtime run [--memory SIZE] [--cpus N] [--hostname NAME] [--uid N --gid N]
                         [--bind SRC:DST[:ro]] [--metering] IMAGE.erofs -- CMD...
    fuzzball-runtime sweep

``run`` exits with the command's exit code (128 + signal when killed), prints warnings on
stderr and, with ``--metering``, the counters as JSON on stderr at the end. Runtime failures
exit 125.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import warnings
from collections.abc import Sequence

from fuzzball_core.errors import FuzzballError

from .erofs import build_from_dir
from .spec import DEFAULT_PATH, DEFAULT_STATE_DIR, Bind, ContainerSpec

RUNTIME_FAILURE_EXIT = 125
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """``512M``, ``1G``, ``64MiB``, ``4096`` -> bytes (binary units)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a size such as 512M or 2G")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fuzzball-runtime", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="action", required=True)

    build = commands.add_parser("build-image", help="convert a directory tree into EROFS")
    build.add_argument("src", metavar="DIR")
    build.add_argument("out", metavar="OUT.erofs")
    build.add_argument("--uncompressed", action="store_true", help="no lz4 compression")

    run = commands.add_parser("run", help="run a command in a container")
    run.add_argument("--memory", type=parse_size, help="memory limit and RLIMIT_MEMLOCK")
    run.add_argument("--cpus", type=float, help="CPU quota in cores")
    run.add_argument("--cpuset", help="allowed cores, e.g. 0-1")
    run.add_argument("--pids", type=int, help="pids limit")
    run.add_argument("--hostname")
    run.add_argument("--uid", type=int, default=0)
    run.add_argument("--gid", type=int, default=0)
    run.add_argument("--groups", type=lambda s: [int(g) for g in s.split(",")], default=[])
    run.add_argument("--bind", action="append", default=[], metavar="SRC:DST[:ro]")
    run.add_argument("--device", action="append", default=[], metavar="/dev/NODE")
    run.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    run.add_argument("--cwd", default="/")
    run.add_argument("--net", action="store_true", help="own network namespace (lo only)")
    run.add_argument("--metering", action="store_true", help="print traffic counters at end")
    run.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR))
    run.add_argument("image", metavar="IMAGE.erofs")
    run.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD")

    sweep = commands.add_parser("sweep", help="free what a crashed agent left behind")
    sweep.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR))
    return parser


def _spec(args: argparse.Namespace) -> ContainerSpec:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise FuzzballError("run: no command given after the image")
    env = {"PATH": DEFAULT_PATH}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise FuzzballError(f"--env {item!r}: expected NAME=VALUE")
        env[name] = value
    try:
        binds = [Bind.parse(b) for b in args.bind]
    except ValueError as exc:
        raise FuzzballError(f"--{exc}") from exc
    return ContainerSpec(
        image=args.image,
        command=command,
        env=env,
        cwd=args.cwd,
        hostname=args.hostname,
        uid=args.uid,
        gid=args.gid,
        groups=args.groups,
        binds=binds,
        devices=args.device,
        memory=args.memory,
        cpus=args.cpus,
        cpuset=args.cpuset,
        pids_limit=args.pids,
        network=args.net,
        metering=args.metering,
        state_dir=args.state_dir,
    )


def _run(args: argparse.Namespace) -> int:
    from .container import Container

    spec = _spec(args)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("ignore")
        handle = Container(spec).start()
    for note in handle.warnings:
        print(f"fuzzball-runtime: warning: {note}", file=sys.stderr)
    previous = {sig: signal.signal(sig, lambda s, _f: handle.kill(s)) for sig in FORWARDED_SIGNALS}
    try:
        status = handle.wait()
        if args.metering:
            counters = handle.metering()
            report = counters.as_dict() if counters else {"metering": "off"}
            print(json.dumps(report), file=sys.stderr)
    finally:
        handle.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if status.oom_killed:
        print("fuzzball-runtime: the command was killed: out of memory", file=sys.stderr)
    return status.returncode


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fuzzball-runtime`` console script."""
    args = _parser().parse_args(argv)
    try:
        if args.action == "build-image":
            out = build_from_dir(
                args.src, args.out, compression=None if args.uncompressed else "lz4"
            )
            print(out)
            return 0
        if args.action == "sweep":
            from .sweep import sweep

            report = sweep(args.state_dir)
            print(json.dumps(report.__dict__))
            return 0
        return _run(args)
    except FuzzballError as exc:
        print(f"fuzzball-runtime: error: {exc}", file=sys.stderr)
        return RUNTIME_FAILURE_EXIT
    except OSError as exc:
        print(f"fuzzball-runtime: error: {exc}", file=sys.stderr)
        return RUNTIME_FAILURE_EXIT


if __name__ == "__main__":
    sys.exit(main())
