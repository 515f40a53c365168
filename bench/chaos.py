"""Chaos benchmark: many randomized fault-injection rounds against a real cluster.

Each round starts Orchestrate (a child process on a small tmpfs data directory, SQLite or, in
some rounds, PostgreSQL) and two Substrates with real containers, submits a stream of
workflows (task arrays, dependencies, retries, services, image pulls) and strikes them with
faults at random times: SIGKILL of Orchestrate or a Substrate, the SQLite database locked by
another connection, the data disk filled and freed, the registry killed mid-pull, a
PostgreSQL restart. The invariants of ``tests/support/chaos_round.py`` are checked at the end of
every round. The seed is printed first; ``--seed S`` replays a run, and each round prints the
seed of its own, which ``--rounds 1 --seed ROUND_SEED`` replays alone (``--verbose`` shows its
timeline). Needs root, Debian's docker-registry and busybox-static. Usage:
    python bench/chaos.py [--rounds 20] [--seed S] [--window 9] [--postgres-every 3]
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))  # tests/support

from support.chaos_round import plan_round, private_postgres, run_round  # noqa: E402
from support.cluster import LocalRegistry, have_prerequisites  # noqa: E402


def keep_logs(directory: Path, destination: Path) -> Path:
    """Copy a failed round's logs and configuration files out of its temporary directory."""
    destination.mkdir(parents=True, exist_ok=True)
    for path in directory.glob("*"):
        if path.is_file() and path.suffix in (".log", ".yaml"):
            shutil.copy(path, destination / path.name)
    return destination


def _stopped(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> int:
    """Run the rounds; exit 1 when any invariant was violated."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: random)")
    parser.add_argument("--window", type=float, default=9.0, help="seconds of faults per round")
    parser.add_argument(
        "--postgres-every", type=int, default=3, help="every Nth round on PostgreSQL (0: none)"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=Path(tempfile.gettempdir()) / "fb-chaos-failed",
        help="where the logs of a round that violated an invariant are copied",
    )
    parser.add_argument(
        "--keep-every", action="store_true", help="keep the logs of every round, not only failed"
    )
    parser.add_argument("--verbose", action="store_true", help="print each round's timeline")
    args = parser.parse_args()
    # a stopped run (SIGTERM, or a Ctrl-C where SIGINT is ignored, as in background jobs)
    # still unwinds, so each round's finally stops its processes and unmounts its data dir
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, _stopped)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"seed {seed}", flush=True)
    missing = have_prerequisites()
    if missing is not None:
        print(f"cannot run: {missing}")
        return 2
    failed = 0
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fb-chaos-") as temporary, private_postgres() as pg:
        root = Path(temporary)
        registry = LocalRegistry(root / "registry")
        try:
            for index in range(args.rounds):
                round_seed = seed + index
                on_postgres = (
                    pg is not None
                    and args.postgres_every > 0
                    and (index % args.postgres_every == args.postgres_every - 1)
                )
                plan = plan_round(
                    round_seed,
                    backend="postgresql" if on_postgres else "sqlite",
                    window=args.window,
                )
                print(f"round {index + 1}/{args.rounds}: {plan.describe()}", flush=True)
                report = run_round(
                    plan,
                    root / f"round-{index + 1}",
                    registry,
                    postgres=pg,
                    say=print if args.verbose else lambda _: None,
                )
                print(f"  {report.summary()}", flush=True)
                for note in report.notes:
                    print(f"  note: {note}", flush=True)
                if args.verbose:
                    for outcome in report.outcomes:
                        print(f"  end: {outcome}", flush=True)
                for violation in report.violations:
                    print(f"  VIOLATION: {violation}", flush=True)
                failed += bool(report.violations)
                if report.violations or args.keep_every:
                    kept = keep_logs(root / f"round-{index + 1}", args.keep / f"seed-{round_seed}")
                    print(f"  the round's logs are kept in {kept}", flush=True)
        finally:
            registry.stop()
    print(
        f"seed {seed}: {args.rounds - failed} of {args.rounds} rounds held every invariant"
        f" ({time.monotonic() - began:.0f}s)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
