"""Why a job waits: reason codes, node groups and messages, and feasibility at submission."""

from support.scheduler_cluster import GPU, GiB, cluster, job, node

from fuzzball_core.scheduling import Hold, ReasonCode

CORDON = Hold("cordon", "admin", "repair", "ops", 0.0)


def test_insufficient_resources_counts_every_group_and_names_the_roomiest_node():
    scheduler = cluster(
        node("g1", cores=16, memory_gib=64, gpus=2),
        node("g2", cores=16, memory_gib=64, gpus=2),
        node("g3", cores=16, memory_gib=64, gpus=2),
        node("held", cores=16, memory_gib=64, gpus=2, holds=(CORDON,)),
        node("cpu", cores=64, memory_gib=512),
    )
    scheduler.allocate(job("r1", memory_gib=48, runtime=100), ["g1"], started_at=0)
    scheduler.allocate(job("r2", memory_gib=40, runtime=100), ["g2"], started_at=0)
    scheduler.allocate(job("r3", memory_gib=48, runtime=100), ["g3"], started_at=0)
    result = scheduler.schedule([job("j", cores=4, memory_gib=32, gpus=1)], now=0)
    diagnosis = result.diagnoses["j"]
    assert diagnosis.reason == ReasonCode.INSUFFICIENT_RESOURCES
    assert diagnosis.message == (
        "0/5 nodes available: 3 insufficient memory, 1 held (cordon by admin), "
        "1 missing device nvidia.com/gpu; roomiest node g2 lacks 8 GiB memory"
    )
    assert (diagnosis.nodes_considered, diagnosis.nodes_available) == (5, 0)
    assert dict(diagnosis.shortfall) == {"memory": 8 * GiB}
    assert diagnosis.roomiest_node == "g2"


def test_each_node_is_counted_once_under_the_first_filter_it_fails():
    scheduler = cluster(
        node("down", ready=False, holds=(CORDON,)),
        node("tiny", cores=2),
        node("full", cores=16),
    )
    scheduler.allocate(job("r", cores=14, runtime=100), ["full"], started_at=0)
    diagnosis = scheduler.schedule([job("j", cores=4)], now=0).diagnoses["j"]
    assert dict(diagnosis.groups) == {
        "not ready": 1,
        "too small (cores)": 1,
        "insufficient cores": 1,
    }


def test_several_holds_on_one_node_are_listed_together():
    holds = (CORDON, Hold("evict", "monitoring", "ECC"))
    scheduler = cluster(node("n", holds=holds))
    diagnosis = scheduler.schedule([job("j")], now=0).diagnoses["j"]
    assert dict(diagnosis.groups) == {"held (cordon by admin, evict by monitoring)": 1}


def test_backfill_no_fit_says_the_room_is_reserved_naming_the_job_only_apart():
    """The message is every account's to read: the reservation's job is only in
    ``reserved_for``, which the engine names to that job's own account alone."""
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    head = job("head", cores=16, submitted_at=1)
    long = job("long", cores=4, submitted_at=2, runtime=500)
    diagnosis = scheduler.schedule([head, long], now=10).diagnoses["long"]
    assert diagnosis.reason == ReasonCode.BACKFILL_NO_FIT
    assert diagnosis.message == "0/1 nodes available: 1 reserved for another job"
    assert diagnosis.reserved_for == "head"
    assert diagnosis.estimated_start == 100


def test_backfill_no_fit_for_a_job_with_no_room_anywhere():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    head = job("head", cores=16, submitted_at=1)
    wide = job("wide", cores=8, submitted_at=2)
    diagnosis = scheduler.schedule([head, wide], now=10).diagnoses["wide"]
    assert diagnosis.reason == ReasonCode.BACKFILL_NO_FIT
    assert diagnosis.message == (
        "0/1 nodes available: 1 insufficient cores; roomiest node n lacks 4 cores"
    )


def test_annotations_mismatch_when_only_unannotated_nodes_have_room():
    scheduler = cluster(
        node("a1", annotations={"zone": "a"}),
        node("a2", annotations={"zone": "a"}),
        node("b1", cores=16, annotations={"zone": "b"}),
    )
    scheduler.allocate(job("r", cores=16, runtime=100), ["b1"], started_at=0)
    diagnosis = scheduler.schedule([job("j", annotations={"zone": "b"})], now=0).diagnoses["j"]
    assert diagnosis.reason == ReasonCode.NODE_ANNOTATIONS_MISMATCH
    assert diagnosis.message == (
        "0/3 nodes available: 2 annotations mismatch, 1 insufficient cores; "
        "roomiest node b1 lacks 1 core"
    )


def test_device_plugin_failed_when_only_failed_nodes_could_hold_the_job():
    scheduler = cluster(node("g", gpus=4, device_plugin_failed=True), node("cpu"))
    diagnosis = scheduler.schedule([job("j", gpus=1)], now=0).diagnoses["j"]
    assert diagnosis.reason == ReasonCode.DEVICE_PLUGIN_FAILED
    assert diagnosis.message == (
        "0/2 nodes available: 1 device plugin failed, 1 missing device nvidia.com/gpu"
    )


def test_exclusive_job_reports_busy_nodes_and_what_they_use():
    scheduler = cluster(node("a", cores=16), node("b", cores=16))
    scheduler.allocate(job("x", cores=4, memory_gib=8, runtime=100), ["a"], started_at=0)
    scheduler.allocate(job("y", cores=1, exclusive=True, runtime=100), ["b"], started_at=0)
    diagnosis = scheduler.schedule([job("whole", exclusive=True)], now=0).diagnoses["whole"]
    assert dict(diagnosis.groups) == {"not idle (exclusive)": 1, "running an exclusive job": 1}
    assert diagnosis.message.endswith("roomiest node a lacks 4 cores, 8 GiB memory")


def test_multinode_job_says_how_many_nodes_it_needs():
    scheduler = cluster(node("a"), node("b"), node("c"))
    scheduler.allocate(job("r", cores=16, runtime=100), ["c"], started_at=0)
    diagnosis = scheduler.schedule([job("mpi", cores=16, nodes=3)], now=0).diagnoses["mpi"]
    assert diagnosis.nodes_available == 2
    assert diagnosis.message.startswith("2/3 nodes available (job needs 3): 1 insufficient cores")


def test_job_no_node_could_ever_hold_is_infeasible_and_does_not_block_others():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("r", cores=8, runtime=100), ["n"], started_at=0)
    giant = job("giant", cores=64, memory_gib=512, submitted_at=1)
    small = job("small", cores=8, submitted_at=2, runtime=10_000)
    result = scheduler.schedule([giant, small], now=0)
    assert result.diagnoses["giant"].reason == ReasonCode.INFEASIBLE
    assert result.reservation is None
    assert [p.job_id for p in result.placements] == ["small"]


def test_check_feasible_names_the_request_and_the_largest_node():
    scheduler = cluster(node("small", cores=8, memory_gib=32), node("large", 16, 64))
    diagnosis = scheduler.check_feasible(job("j", cores=64, memory_gib=512))
    assert diagnosis.reason == ReasonCode.INFEASIBLE
    assert diagnosis.message == (
        "job needs 64 cores, 512 GiB memory; the largest node has 16 cores, 64 GiB memory"
    )
    assert dict(diagnosis.groups) == {"too small (cores)": 2}


def test_check_feasible_counts_held_and_busy_nodes_as_capacity():
    scheduler = cluster(node("held", cores=64, holds=(CORDON,)), node("down", 64, ready=False))
    assert scheduler.check_feasible(job("j", cores=64)) is None


def test_check_feasible_largest_node_is_the_one_closest_to_the_request():
    scheduler = cluster(node("cpu", cores=128, memory_gib=1024), node("gpu", 16, 64, gpus=4))
    diagnosis = scheduler.check_feasible(job("j", cores=32, gpus=8))
    assert diagnosis.message == (
        "job needs 32 cores, 1 GiB memory, 8 nvidia.com/gpu; "
        "the largest node has 16 cores, 64 GiB memory, 4 nvidia.com/gpu"
    )
    assert dict(diagnosis.shortfall) == {"cores": 16, GPU: 4}


def test_check_feasible_says_when_no_node_has_the_annotations():
    scheduler = cluster(node("n", annotations={"zone": "a"}))
    diagnosis = scheduler.check_feasible(job("j", annotations={"zone": "c"}))
    assert diagnosis.message == "job needs 1 core, 1 GiB memory, on nodes annotated zone=c; " + (
        "no node is annotated zone=c"
    )


def test_check_feasible_says_how_many_nodes_could_hold_a_multinode_job():
    scheduler = cluster(node("a", cores=32), node("b", cores=32), node("c", cores=8))
    diagnosis = scheduler.check_feasible(job("mpi", cores=16, nodes=3))
    assert diagnosis.message == (
        "job needs 3 nodes with 16 cores, 1 GiB memory each; only 2 nodes could hold that much"
    )


def test_check_feasible_on_an_empty_cluster():
    diagnosis = cluster().check_feasible(job("j"))
    assert diagnosis.message == "job needs 1 core, 1 GiB memory; no nodes are registered"


def test_a_survey_counts_again_after_work_on_the_class_ended():
    # surveys remember a class's walk while its free capacity is unchanged: a release must
    # show in the next pass's counts
    scheduler = cluster(node("a", cores=16), node("b", cores=16))
    scheduler.allocate(job("ra", cores=12, runtime=100), ["a"], started_at=0)
    scheduler.allocate(job("rb", cores=14, runtime=100), ["b"], started_at=0)
    wide = job("wide", cores=4, nodes=2)
    first = scheduler.schedule([wide], now=0).diagnoses["wide"]
    assert (first.nodes_available, dict(first.groups)) == (1, {"insufficient cores": 1})
    scheduler.release("rb")
    second = scheduler.schedule([job("wide", cores=8, nodes=2)], now=1).diagnoses["wide"]
    assert (second.nodes_available, dict(second.groups)) == (1, {"insufficient cores": 1})
    assert second.roomiest_node == "a"
    scheduler.release("ra")
    scheduler.allocate(job("big", cores=16, runtime=100), ["b"], started_at=1)
    third = scheduler.schedule([job("wide", cores=8, nodes=2)], now=2).diagnoses["wide"]
    assert (third.nodes_available, dict(third.groups)) == (1, {"insufficient cores": 1})
    assert third.roomiest_node == "b"


def test_shapes_that_differ_only_by_annotations_are_each_counted_whole():
    scheduler = cluster(
        node("a1", cores=16, annotations={"zone": "a"}),
        node("b1", cores=16, annotations={"zone": "b"}),
    )
    scheduler.allocate(job("r1", cores=16, runtime=100), ["a1"], started_at=0)
    scheduler.allocate(job("r2", cores=10, runtime=100), ["b1"], started_at=0)
    zone_a = job("za", cores=8, annotations={"zone": "a"})
    zone_b = job("zb", cores=8, annotations={"zone": "b"}, submitted_at=1)
    diagnoses = scheduler.schedule([zone_a, zone_b], now=0).diagnoses
    assert dict(diagnoses["za"].groups) == {"annotations mismatch": 1, "insufficient cores": 1}
    assert dict(diagnoses["zb"].groups) == {"annotations mismatch": 1, "insufficient cores": 1}
    assert diagnoses["za"].roomiest_node == "a1"
    assert diagnoses["zb"].roomiest_node == "b1"


def test_a_survey_counts_holds_again_after_a_node_is_registered_anew():
    # the counts of held and not-ready nodes are kept between surveys until a registration
    scheduler = cluster(node("a", cores=16), node("b", cores=16), node("c", cores=16))
    scheduler.allocate(job("r", cores=16, runtime=100), ["a"], started_at=0)
    scheduler.upsert_node(node("b", cores=16, holds=(CORDON,)))
    scheduler.upsert_node(node("c", cores=16, ready=False))
    first = scheduler.schedule([job("j", cores=8)], now=0).diagnoses["j"]
    assert dict(first.groups) == {
        "held (cordon by admin)": 1,
        "not ready": 1,
        "insufficient cores": 1,
    }
    scheduler.upsert_node(node("c", cores=16, holds=(CORDON,)))
    second = scheduler.schedule([job("j", cores=8)], now=1).diagnoses["j"]
    assert dict(second.groups) == {"held (cordon by admin)": 2, "insufficient cores": 1}
    assert second.nodes_considered == 3


def test_a_diagnosis_read_after_the_cluster_changed_says_what_the_pass_found():
    # messages are worded when first read; they must still describe the pass's cluster
    scheduler = cluster(node("a", cores=16), node("b", cores=16))
    scheduler.allocate(job("ra", cores=12, runtime=100), ["a"], started_at=0)
    scheduler.allocate(job("rb", cores=14, runtime=100), ["b"], started_at=0)
    diagnoses = scheduler.schedule([job("j", cores=8)], now=0).diagnoses
    scheduler.release("ra")
    scheduler.release("rb")
    assert diagnoses["j"].message == (
        "0/2 nodes available: 2 insufficient cores; roomiest node a lacks 4 cores"
    )
    assert diagnoses["j"].nodes_available == 0


def test_a_label_of_several_classes_is_listed_where_its_first_class_comes():
    # a survey adds each static label's nodes of every class at once: the groups must still
    # list the labels in the order a walk over the classes meets them
    scheduler = cluster(
        node("b16", cores=16, annotations={"zone": "b"}),
        node("a16", cores=16, annotations={"zone": "a"}),
        node("b32", cores=32, annotations={"zone": "b"}),
        node("b32x", cores=32, annotations={"zone": "b"}),
    )
    scheduler.allocate(job("r", cores=14, runtime=100), ["a16"], started_at=0)
    zone_a = job("za", cores=4, annotations={"zone": "a"})
    groups = scheduler.schedule([zone_a], now=0).diagnoses["za"].groups
    assert list(groups.items()) == [("annotations mismatch", 3), ("insufficient cores", 1)]


def test_a_label_first_met_after_a_usable_class_comes_after_that_class_s_groups():
    scheduler = cluster(
        node("a16", cores=16, annotations={"zone": "a"}),
        node("b16", cores=16, annotations={"zone": "b"}),
        node("b32", cores=32, annotations={"zone": "b"}),
    )
    scheduler.allocate(job("r", cores=14, runtime=100), ["a16"], started_at=0)
    zone_a = job("za", cores=4, annotations={"zone": "a"})
    groups = scheduler.schedule([zone_a], now=0).diagnoses["za"].groups
    assert list(groups.items()) == [("insufficient cores", 1), ("annotations mismatch", 2)]


def test_a_node_of_a_class_the_job_cannot_use_counts_under_its_label_while_busy_or_idle():
    scheduler = cluster(
        node("a", cores=16, annotations={"zone": "a"}),
        node("b1", cores=16, annotations={"zone": "b"}),
        node("b2", cores=16, annotations={"zone": "b"}),
    )
    scheduler.allocate(job("r", cores=16, runtime=100), ["a"], started_at=0)
    scheduler.allocate(job("x", exclusive=True, runtime=100), ["b1"], started_at=0)
    zone_a = job("za", cores=4, annotations={"zone": "a"})
    first = scheduler.schedule([zone_a], now=0).diagnoses["za"]
    assert dict(first.groups) == {"annotations mismatch": 2, "insufficient cores": 1}
    scheduler.release("x")
    second = scheduler.schedule([zone_a], now=1).diagnoses["za"]
    assert dict(second.groups) == {"annotations mismatch": 2, "insufficient cores": 1}


def test_a_node_of_a_class_the_job_cannot_use_moves_to_held_when_held():
    scheduler = cluster(
        node("a", cores=16, annotations={"zone": "a"}),
        node("b1", cores=16, annotations={"zone": "b"}),
        node("b2", cores=16, annotations={"zone": "b"}),
    )
    scheduler.allocate(job("r", cores=16, runtime=100), ["a"], started_at=0)
    zone_a = job("za", cores=4, annotations={"zone": "a"})
    scheduler.schedule([zone_a], now=0)
    scheduler.upsert_node(node("b2", cores=16, annotations={"zone": "b"}, holds=(CORDON,)))
    groups = scheduler.schedule([zone_a], now=1).diagnoses["za"].groups
    assert dict(groups) == {
        "held (cordon by admin)": 1,
        "annotations mismatch": 1,
        "insufficient cores": 1,
    }
