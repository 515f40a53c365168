"""The fair-share order of one pass (``FairQueue``): the order its runs and heap meet jobs in
is the order of each account's best key worked out afresh before every job, and jobs of
settled shapes are answered, not yielded, with their passed-over answer when later work of
another account went first."""

import random
from types import SimpleNamespace

import pytest
from support.scheduler_cluster import job

from fuzzball_plugins.schedulers.fair_share import FairQueue, FairShare, FairShareConfig, Totals

GiB = 1 << 30
CHARGE = (1, GiB, ())


def random_jobs(rng: random.Random, count: int) -> list:
    """Jobs of three accounts and eight shapes, submitted over time, a few with a higher
    priority."""
    jobs = [
        job(
            f"j{number}",
            cores=rng.randrange(1, 9),
            account=rng.choice("abc"),
            submitted_at=float(rng.randrange(0, 3600)),
            priority=rng.choice([0, 0, 0, 0, 1]),
        )
        for number in range(count)
    ]
    return sorted(jobs, key=lambda each: each.order_key)


def fair_share(config: FairShareConfig) -> tuple[FairShare, Totals]:
    """Fair share with some running use already (account ``a`` runs the most)."""
    fair = FairShare(config)
    index = SimpleNamespace(total_cores=64, total_memory=64 * GiB, total_devices={})
    for number, account in enumerate("aaaab"):
        fair.charge(job(f"running-{number}", account=account), CHARGE)
    return fair, Totals(index)  # type: ignore[arg-type]


def walk(queue: FairQueue, fair: FairShare, settled: set[int], placed: set[str]):
    """What iterating ``queue`` does: ("met", id) for each job yielded (charged when in
    ``placed``), and (id, passed over) for each job of a shape in ``settled`` (shape cores)."""
    shapes = {}
    answers: dict[str, object] = {}
    settled_answer = object()
    steps = []
    for each in queue._by_account.values():
        for one in each:
            if one.shape.cores in settled:
                shapes[id(one.shape)] = settled_answer
    queue.pass_over(shapes, answers, object)
    for met in queue:
        steps.append(("met", met.id))
        if met.id in placed:
            fair.charge(met, CHARGE)
    answered = [(job_id, answer is not settled_answer) for job_id, answer in answers.items()]
    return steps, answered


def reference(queue: FairQueue, fair: FairShare, settled: set[int], placed: set[str]):
    """The same walk, each step taking the account whose next job's key, worked out afresh
    with the account's factor as it stands, is the smallest."""
    by_account = {account: list(jobs) for account, jobs in queue._by_account.items()}
    steps, answered = [], []
    latest = None
    while any(by_account.values()):
        account = min(
            (account for account, jobs in by_account.items() if jobs),
            key=lambda a: queue._key(by_account[a][0], queue.factor(a)),
        )
        met = by_account[account].pop(0)
        behind = latest is not None and met.order_key < latest
        latest = met.order_key if not behind else latest
        if met.shape.cores in settled:
            answered.append((met.id, behind))
            continue
        steps.append(("met", met.id))
        if met.id in placed:
            fair.charge(met, CHARGE)
    return steps, answered


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("age_weight", [0.0, 2.0])
def test_the_queue_meets_jobs_in_the_order_of_keys_worked_out_afresh(seed, age_weight):
    rng = random.Random(seed)
    jobs = random_jobs(rng, 300)
    settled = {cores for cores in range(1, 9) if rng.random() < 0.6}
    placed = {each.id for each in jobs if rng.random() < 0.2}
    config = FairShareConfig(age_weight=age_weight, max_age=7200.0, half_life=600.0)
    outcomes = []
    for order in (walk, reference):
        fair, totals = fair_share(config)
        queue = FairQueue(fair, jobs, 3600.0, totals, ordered=True)
        outcomes.append(order(queue, fair, settled, placed))
    assert outcomes[0][0] == outcomes[1][0]
    assert sorted(outcomes[0][1]) == sorted(outcomes[1][1])


def test_overtaken_jobs_yielded_are_listed_with_their_account():
    fair, totals = fair_share(FairShareConfig())
    # account a runs four jobs and b one: b's later job goes first, a's earlier one is overtaken
    jobs = [
        job("a-early", account="a", submitted_at=1.0),
        job("b-late", account="b", submitted_at=2.0),
    ]
    queue = FairQueue(fair, jobs, 10.0, totals, ordered=True)
    queue.pass_over({}, {}, object)
    assert [met.id for met in queue] == ["b-late", "a-early"]
    assert queue.overtaken == {"a-early": "a"}
