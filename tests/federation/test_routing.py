"""Federate routes each workflow to a member where it fits, and says why when none does."""

from __future__ import annotations

import math

import pytest
from support.federated_workflows import CPU, GPU, TOO_BIG
from support.federation_harness import start_federation

from fuzzball_core.drivers import Router
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.hookspecs import hookimpl
from fuzzball_core.plugins import PluginRegistry
from fuzzball_federation.routers.fit import FitRouter


def test_gpu_workflow_routes_to_the_cluster_with_a_gpu_node(federation):
    workflow_id = federation.client().start_workflow(GPU, name="gpu")
    assert federation.service.cluster_of(federation.who, workflow_id) == "onprem"
    onprem = federation.members["onprem"]
    assert [
        w.name for w in onprem.stack.list_workflows(onprem.stack.authenticate(onprem.token))
    ] == ["gpu"]


def test_cpu_workflow_routes_to_the_roomier_cluster(federation):
    workflow_id = federation.client().start_workflow(CPU, name="cpu")
    assert federation.service.cluster_of(federation.who, workflow_id) == "aws"


def test_workflow_no_member_can_hold_is_refused_naming_each_clusters_reason(federation):
    with pytest.raises(InvalidArgument) as refused:
        federation.client().start_workflow(TOO_BIG, name="huge")
    message = refused.value.message
    assert "largest request jobs.main: 64 cores, 4 GiB, nvidia.com/gpu=1" in message
    assert "cluster onprem: largest node has 4 cores, jobs.main needs 64" in message
    assert "cluster aws: no node has nvidia.com/gpu" in message


class NowhereRouter(Router):
    """A router with only the required method: it chooses no member, and explains nothing."""

    def route(self, workflow, clusters):
        return []


def test_a_router_without_the_optional_methods_refuses_naming_each_member(tmp_path, members):
    federation = start_federation(tmp_path, members, router=NowhereRouter())
    try:
        with pytest.raises(InvalidArgument) as refused:
            federation.client().start_workflow(CPU)
        message = refused.value.message
        assert "cluster onprem: not chosen by the router" in message
        assert "cluster aws: not chosen by the router" in message
    finally:
        federation.close()


def test_refused_workflow_is_left_on_no_member(federation):
    with pytest.raises(InvalidArgument):
        federation.client().start_workflow(TOO_BIG)
    for member in federation.members.values():
        assert member.stack.list_workflows(member.stack.authenticate(member.token)) == []


def test_unreachable_member_is_skipped_and_named(tmp_path, members):
    gone = {"name": "gone", "address": "http://127.0.0.1:9", "token": "x"}
    federation = start_federation(tmp_path, members, extra_clusters=[gone])
    try:
        workflow_id = federation.client().start_workflow(GPU)
        assert federation.service.cluster_of(federation.who, workflow_id) == "onprem"
        with pytest.raises(InvalidArgument) as refused:
            federation.client().start_workflow(TOO_BIG)
        assert "cluster gone: unreachable" in refused.value.message
    finally:
        federation.close()


def test_member_refusing_federates_token_is_named(tmp_path, members):
    onprem, aws = members
    wrong = {"name": "stale", "address": aws.rest_url, "token": "not-a-token"}
    federation = start_federation(tmp_path, [onprem], extra_clusters=[wrong])
    try:
        with pytest.raises(InvalidArgument) as refused:
            federation.client().start_workflow(TOO_BIG)
        assert "cluster stale: refused Federate's token for it" in refused.value.message
    finally:
        federation.close()


class PreferOnprem:
    """A hook plugin: onprem scores far above any free-capacity difference."""

    @hookimpl
    def fuzzball_federate_score_cluster(self, workflow, cluster):
        return 10_000.0 if cluster.name == "onprem" else None


class ExcludeAws:
    """A hook plugin: aws may run nothing."""

    @hookimpl
    def fuzzball_federate_score_cluster(self, workflow, cluster):
        return -math.inf if cluster.name == "aws" else 0.0


@pytest.mark.parametrize("plugin", [PreferOnprem(), ExcludeAws()], ids=["score", "exclude"])
def test_score_hook_changes_the_choice(tmp_path, members, plugin):
    registry = PluginRegistry()
    registry.pm.register(plugin, name="test-scores")
    federation = start_federation(tmp_path, members, router=FitRouter({}), registry=registry)
    try:
        workflow_id = federation.client().start_workflow(CPU)
        assert federation.service.cluster_of(federation.who, workflow_id) == "onprem"
    finally:
        federation.close()


def test_invalid_workflow_is_refused_with_its_field_path_before_routing(federation):
    with pytest.raises(InvalidArgument) as refused:
        federation.client().start_workflow("version: v1\njobs:\n  a:\n    command: 3\n")
    assert "jobs.a" in refused.value.message
