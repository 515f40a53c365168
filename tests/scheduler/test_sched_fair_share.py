"""Fair share: the order in which the default scheduler considers different accounts' work."""

from collections import Counter

import pytest
from support.scheduler_cluster import cluster, job, node, placed_on

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.scheduling import ReasonCode
from fuzzball_plugins.schedulers.default import DefaultScheduler

HOUR = 3600.0


def jobs_of(account: str, count: int, *, first: int = 0, submitted_at: float = 0.0, **kwargs):
    """``count`` one-core jobs of ``account``, named ``<account>-<first + i>``, submitted one
    a second from ``submitted_at``."""
    return [
        job(f"{account}-{first + i}", account=account, submitted_at=submitted_at + i, **kwargs)
        for i in range(count)
    ]


def placed_by_account(result) -> Counter:
    """How many of a pass's placements went to each account (the job name's prefix)."""
    return Counter(placement.job_id.split("-")[0] for placement in result.placements)


def busy_cluster(options: dict | None = None):
    """Two 4-core nodes whose every core runs a job of account ``a``; ``a-0`` and ``a-1``
    are released, so two cores are free."""
    scheduler = cluster(node("n1", cores=4), node("n2", cores=4), options=options)
    scheduler.schedule(jobs_of("a", 8), now=0)
    scheduler.release("a-0")
    scheduler.release("a-1")
    return scheduler


def test_an_account_using_nothing_goes_before_one_filling_the_cluster():
    scheduler = busy_cluster()
    waiting = jobs_of("a", 4, first=10, submitted_at=10) + jobs_of("b", 2, submitted_at=20)
    result = scheduler.schedule(waiting, now=30)
    assert placed_by_account(result) == {"b": 2}


def test_one_accounts_jobs_keep_their_queue_order():
    scheduler = cluster(node("n1", cores=2))
    waiting = [
        job("late", account="a", submitted_at=5),
        job("urgent", account="a", submitted_at=9, priority=1),
        job("early", account="a", submitted_at=1),
    ]
    result = scheduler.schedule(waiting, now=10)
    assert [placement.job_id for placement in result.placements] == ["urgent", "early"]


def test_accounts_take_turns_within_one_pass():
    scheduler = cluster(node("n1", cores=4))
    result = scheduler.schedule(jobs_of("a", 4) + jobs_of("b", 4, submitted_at=100), now=200)
    assert placed_by_account(result) == {"a": 2, "b": 2}


def test_an_account_with_three_shares_gets_three_times_the_cores():
    scheduler = cluster(node("n1", cores=8), options={"fair_share": {"shares": {"a": 3}}})
    result = scheduler.schedule(jobs_of("a", 8) + jobs_of("b", 8), now=10)
    assert placed_by_account(result) == {"a": 6, "b": 2}


def test_organizations_are_balanced_before_their_accounts():
    scheduler = cluster(node("n1", cores=12))
    waiting = [
        *jobs_of("x1", 12, organization="x"),
        *jobs_of("x2", 12, organization="x"),
        *jobs_of("x3", 12, organization="x"),
        *jobs_of("y1", 12, organization="y"),
    ]
    result = scheduler.schedule(waiting, now=10)
    assert placed_by_account(result) == {"y1": 6, "x1": 2, "x2": 2, "x3": 2}


def ran_the_cluster_for_an_hour(options: dict | None = None) -> DefaultScheduler:
    """A one-core cluster where account ``a`` ran a job for an hour, ended a second ago;
    fair share's half-life is an hour."""
    scheduler = cluster(node("n1", cores=1), options={"fair_share": {"half_life": "1h"}})
    scheduler.schedule([job("a-0", account="a")], now=0)
    scheduler.schedule([], now=HOUR)  # every pass samples what runs
    scheduler.release("a-0")
    scheduler.schedule([], now=HOUR + 1)
    return scheduler


def test_recent_use_puts_an_account_behind_after_its_work_ended():
    scheduler = ran_the_cluster_for_an_hour()
    waiting = [
        job("a-1", account="a", submitted_at=HOUR),
        job("b-1", account="b", submitted_at=HOUR + 1),
    ]
    result = scheduler.schedule(waiting, now=HOUR + 2)
    assert [placement.job_id for placement in result.placements] == ["b-1"]


def test_recent_use_fades_over_many_half_lives():
    scheduler = ran_the_cluster_for_an_hour()
    scheduler.schedule([], now=100 * HOUR)
    waiting = [
        job("a-1", account="a", submitted_at=HOUR),
        job("b-1", account="b", submitted_at=HOUR + 1),
    ]
    result = scheduler.schedule(waiting, now=100 * HOUR)
    assert [placement.job_id for placement in result.placements] == ["a-1"]


def test_the_message_gives_the_recent_use_and_the_half_life():
    scheduler = ran_the_cluster_for_an_hour()
    waiting = [
        job("a-1", account="a", submitted_at=HOUR),
        job("b-1", account="b", submitted_at=HOUR + 1),
    ]
    result = scheduler.schedule(waiting, now=HOUR + 2)
    message = result.diagnoses["a-1"].message
    assert "account a runs 0% of the cluster and ran 50% of it recently (half-life 1h)" in message


def test_priority_goes_before_fair_share():
    scheduler = busy_cluster()
    waiting = [job("a-urgent", account="a", priority=5), *jobs_of("b", 2, submitted_at=20)]
    result = scheduler.schedule(waiting, now=30)
    assert placed_on(result, "a-urgent") is not None
    assert placed_by_account(result) == {"a": 1, "b": 1}


def test_an_age_weight_lets_long_waiting_work_go_first():
    options = {"fair_share": {"weights": {"fair_share": 1, "age": 10}, "max_age": "1h"}}
    scheduler = busy_cluster(options)
    waiting = [*jobs_of("a", 2, first=10), *jobs_of("b", 2, submitted_at=2 * HOUR)]
    result = scheduler.schedule(waiting, now=2 * HOUR)
    assert placed_by_account(result) == {"a": 2}


def test_with_fair_share_off_the_queue_is_first_in_first_out():
    scheduler = busy_cluster({"fair_share": {"enabled": False}})
    waiting = jobs_of("a", 4, first=10, submitted_at=10) + jobs_of("b", 2, submitted_at=20)
    result = scheduler.schedule(waiting, now=30)
    assert placed_by_account(result) == {"a": 2}


def test_a_job_passed_over_for_its_share_is_diagnosed_fair_share():
    scheduler = busy_cluster()
    result = scheduler.schedule(
        jobs_of("a", 4, first=10, submitted_at=10) + jobs_of("b", 2, submitted_at=20), now=30
    )
    diagnosis = result.diagnoses["a-13"]
    assert diagnosis.reason == ReasonCode.FAIR_SHARE


def test_the_fair_share_message_names_the_accounts_use_and_share():
    scheduler = busy_cluster()
    result = scheduler.schedule(
        jobs_of("a", 4, first=10, submitted_at=10) + jobs_of("b", 2, submitted_at=20), now=30
    )
    message = result.diagnoses["a-13"].message
    assert message.startswith("waiting for its fair share: account a runs 75% of the cluster")
    assert "against a fair share of 50%" in message
    assert "0/2 nodes available: 2 insufficient cores" in message


def test_a_job_no_later_work_went_before_keeps_the_schedulers_reason():
    scheduler = busy_cluster()
    result = scheduler.schedule(
        jobs_of("a", 4, first=10, submitted_at=10) + jobs_of("b", 3, submitted_at=20), now=30
    )
    assert result.diagnoses["b-2"].reason == ReasonCode.INSUFFICIENT_RESOURCES


def test_exclusive_work_counts_its_whole_nodes():
    scheduler = cluster(node("n1", cores=4), node("n2", cores=4))
    scheduler.schedule([job("a-whole", account="a", exclusive=True)], now=0)
    scheduler.schedule(jobs_of("b", 4), now=0)
    result = scheduler.schedule([job("a-1", account="a"), job("c-1", account="c")], now=1)
    assert "account a runs 50% of the cluster" in result.diagnoses["a-1"].message


def test_released_work_no_longer_counts_as_running():
    scheduler = busy_cluster()
    for i in range(2, 8):
        scheduler.release(f"a-{i}")
    waiting = [
        job("a-whole", account="a", cores=4, nodes=2, submitted_at=10),
        job("b-whole", account="b", cores=4, nodes=2, submitted_at=20),
    ]
    result = scheduler.schedule(waiting, now=0)  # no time passed: nothing is recent use
    assert [placement.job_id for placement in result.placements] == ["a-whole"]


def test_memory_is_a_dominant_share_as_much_as_cores():
    scheduler = cluster(node("n1", cores=8, memory_gib=8))
    scheduler.schedule([job("a-big", account="a", memory_gib=6)], now=0)
    waiting = [job("a-1", account="a", memory_gib=2), job("b-1", account="b", memory_gib=2)]
    result = scheduler.schedule(waiting, now=1)
    assert placed_on(result, "b-1") is not None
    assert "account a runs 75% of the cluster" in result.diagnoses["a-1"].message


def test_backfill_still_starts_short_work_around_the_reservation():
    scheduler = cluster(node("n1", cores=4))
    scheduler.schedule([job("a-0", account="a", cores=3, runtime=HOUR)], now=0)
    waiting = [
        job("b-big", account="b", cores=4, submitted_at=1),
        job("a-short", account="a", cores=1, runtime=60, submitted_at=2),
    ]
    result = scheduler.schedule(waiting, now=10)
    assert result.reservation is not None and result.reservation.job_id == "b-big"
    assert placed_on(result, "a-short") == ("n1",)


def test_the_same_queue_is_ordered_the_same_way_every_time():
    def one_pass():
        scheduler = busy_cluster()
        waiting = [*jobs_of("a", 5, first=10, submitted_at=10), *jobs_of("b", 5), *jobs_of("c", 5)]
        return [placement.job_id for placement in scheduler.schedule(waiting, now=30).placements]

    assert one_pass() == one_pass()


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (
            {"fair_share": {"enabeld": True}},
            "scheduler.options.fair_share: unknown option 'enabeld'",
        ),
        ({"fair_share": {"enabled": "yes"}}, "scheduler.options.fair_share.enabled"),
        ({"fair_share": {"half_life": "a week"}}, "scheduler.options.fair_share.half_life"),
        ({"fair_share": {"half_life": 0}}, "scheduler.options.fair_share.half_life"),
        ({"fair_share": {"max_age": -5}}, "scheduler.options.fair_share.max_age"),
        ({"fair_share": {"shares": {"a": 0}}}, "scheduler.options.fair_share.shares.a"),
        ({"fair_share": {"shares": ["a"]}}, "scheduler.options.fair_share.shares"),
        (
            {"fair_share": {"organization_shares": {"x": "lots"}}},
            "scheduler.options.fair_share.organization_shares.x",
        ),
        ({"fair_share": {"weights": {"age": True}}}, "scheduler.options.fair_share.weights.age"),
        ({"fair_share": {"weights": {"size": 1}}}, "scheduler.options.fair_share.weights: unknown"),
        ({"fair_share": "off"}, "scheduler.options.fair_share must be a mapping"),
        (
            {"fair_share": {"shares": {"a": 10**400}}},
            "scheduler.options.fair_share.shares.a must be from 0 to 1,000,000",
        ),
        ({"fair_share": {"half_life": float("nan")}}, "scheduler.options.fair_share.half_life"),
    ],
)
def test_a_wrong_fair_share_option_is_refused_naming_its_key(options, named):
    with pytest.raises(InvalidArgument) as raised:
        DefaultScheduler(options)
    assert named in str(raised.value)


def test_a_half_life_may_be_a_go_duration():
    scheduler = busy_cluster({"fair_share": {"half_life": "90m"}})
    result = scheduler.schedule(
        jobs_of("a", 4, first=10, submitted_at=10) + jobs_of("b", 2, submitted_at=20), now=30
    )
    assert "(half-life 1.5h)" in result.diagnoses["a-13"].message
