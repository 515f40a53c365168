"""Reading a log of any length over REST and gRPC: whole, paged with a cursor, tailed from its
real end, followed to its end. The long log has more chunks than the server returns in one
page (5,200 against a page of 1,000, and more than the 5,000 reads once stopped at)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import grpc
import httpx
import pytest
from support.live_api import LoopThread, Stack, start_servers
from support.sql_stack import SqlStack

from fuzzball_core.api.following import NEXT_PAGE_TOKEN
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc
from fuzzball_core.service.views import FINISHED

LINES = 5200
EVERY_LINE = [f"line {n}\n".encode() for n in range(1, LINES + 1)]


@pytest.fixture(scope="module")
def long_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, str]]:
    """A finished workflow whose job printed LINES lines, one chunk each."""
    loop = LoopThread()
    service = SqlStack(loop, tmp_path_factory.mktemp("long-log") / "orchestrate.db")
    _, token = service.create_account("alice")
    service.add_node("node-1", 8, 16 * 1024**3)
    servers = loop.run(start_servers(service.service))
    stack = Stack(service, servers, loop, token, "")
    try:
        workflow_id = stack.start()
        service.emit_logs(workflow_id, "jobs.hello", [line.decode() for line in EVERY_LINE])
        service.set_stage(workflow_id, "jobs.hello", FINISHED, exit_code=0)
        yield stack, workflow_id
    finally:
        loop.run(servers.close())
        service.close()
        loop.stop()


def get_log(stack: Stack, workflow_id: str, **params: str | int) -> httpx.Response:
    return httpx.get(
        f"{stack.servers.rest_url}/v3/workflows/{workflow_id}:log",
        params=params,
        headers={"Authorization": f"Bearer {stack.token}"},
        timeout=30,
    )


def outputs(response: httpx.Response) -> list[bytes]:
    assert response.status_code == 200, response.text
    lines = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    return [base64.b64decode(line["result"]["output"]) for line in lines]


@pytest.fixture
def grpc_api(long_log) -> Iterator[pb_grpc.WorkflowServiceStub]:
    with grpc.insecure_channel(long_log[0].servers.grpc_target) as channel:
        yield pb_grpc.WorkflowServiceStub(channel)


def metadata(stack: Stack) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {stack.token}")]


# -- REST -------------------------------------------------------------------------------------


def test_rest_reads_every_line_of_a_log_longer_than_a_page(long_log):
    stack, workflow_id = long_log
    assert outputs(get_log(stack, workflow_id, name="hello")) == EVERY_LINE


def test_rest_tail_counts_back_from_the_real_end(long_log):
    stack, workflow_id = long_log
    assert outputs(get_log(stack, workflow_id, **{"show.tail": 3})) == EVERY_LINE[-3:]


def test_rest_tail_longer_than_a_page_reads_all_of_it(long_log):
    stack, workflow_id = long_log
    tailed = outputs(get_log(stack, workflow_id, **{"show.tail": 4500}))
    assert tailed == EVERY_LINE[-4500:]


def test_rest_follow_of_an_ended_workflow_streams_every_line(long_log):
    stack, workflow_id = long_log
    followed = outputs(get_log(stack, workflow_id, **{"show.follow": "true"}))
    assert followed == EVERY_LINE


def test_rest_page_size_answers_one_page_with_the_next_pages_token(long_log):
    stack, workflow_id = long_log
    reply = get_log(stack, workflow_id, pageSize=700)
    assert outputs(reply) == EVERY_LINE[:700]
    assert reply.headers[NEXT_PAGE_TOKEN]


def test_rest_pages_followed_by_their_tokens_hold_the_whole_log_once(long_log):
    stack, workflow_id = long_log
    read: list[bytes] = []
    token, pages = "", 0
    while True:
        reply = get_log(stack, workflow_id, pageSize=700, pageToken=token)
        read += outputs(reply)
        pages += 1
        token = reply.headers.get(NEXT_PAGE_TOKEN, "")
        if not token:
            break
    assert read == EVERY_LINE
    assert pages == 8  # 7 full pages of 700 and the last 300: no empty page at the end


def test_rest_page_size_above_the_most_is_one_page_of_the_most(long_log):
    stack, workflow_id = long_log
    reply = get_log(stack, workflow_id, pageSize=100_000)
    assert outputs(reply) == EVERY_LINE[:1000]
    assert reply.headers[NEXT_PAGE_TOKEN]


def test_rest_tail_with_a_page_size_pages_from_the_tail(long_log):
    stack, workflow_id = long_log
    first = get_log(stack, workflow_id, pageSize=2, **{"show.tail": 3})
    assert outputs(first) == EVERY_LINE[-3:-1]
    # the tail chose the first page: the token carries on from it, whatever tail is sent
    rest = get_log(
        stack,
        workflow_id,
        pageSize=2,
        pageToken=first.headers[NEXT_PAGE_TOKEN],
        **{"show.tail": 3},
    )
    assert outputs(rest) == EVERY_LINE[-1:]
    assert NEXT_PAGE_TOKEN not in rest.headers


@pytest.mark.parametrize("token", ["abc", "-5", "1" * 30, "٣"])
def test_rest_a_page_token_not_handed_out_is_400_naming_it(long_log, token):
    stack, workflow_id = long_log
    reply = get_log(stack, workflow_id, pageSize=10, pageToken=token)
    assert reply.status_code == 400
    assert reply.json()["code"] == 3
    assert "pageToken" in reply.json()["message"]


def test_rest_a_negative_page_size_is_400_naming_it(long_log):
    stack, workflow_id = long_log
    reply = get_log(stack, workflow_id, pageSize=-1)
    assert reply.status_code == 400
    assert "pageSize" in reply.json()["message"]


def test_rest_a_page_holds_about_two_mebibytes_of_output_at_most(stack):
    workflow_id = stack.start()
    mebibyte = "x" * (1024**2 - 1) + "\n"
    stack.service.emit_logs(workflow_id, "jobs.hello", [mebibyte, mebibyte, mebibyte])
    reply = get_log(stack, workflow_id, pageSize=10)
    assert len(outputs(reply)) == 2
    rest = get_log(stack, workflow_id, pageSize=10, pageToken=reply.headers[NEXT_PAGE_TOKEN])
    assert len(outputs(rest)) == 1


# -- gRPC -------------------------------------------------------------------------------------


def test_grpc_read_logs_answers_pages_whose_tokens_reach_the_end(long_log, grpc_api):
    stack, workflow_id = long_log
    read: list[bytes] = []
    token = ""
    while True:
        page = grpc_api.ReadLogs(
            pb.ReadLogsRequest(workflow_id=workflow_id, page_size=1500, page_token=token),
            metadata=metadata(stack),
        )
        assert len(page.chunks) <= 1000
        read += [c.output for c in page.chunks]
        token = page.next_page_token
        if not token:
            break
    assert read == EVERY_LINE


def test_grpc_tail_counts_back_from_the_real_end(long_log, grpc_api):
    stack, workflow_id = long_log
    page = grpc_api.ReadLogs(
        pb.ReadLogsRequest(workflow_id=workflow_id, tail=2), metadata=metadata(stack)
    )
    assert [c.output for c in page.chunks] == EVERY_LINE[-2:]
    assert page.next_page_token == ""


def test_grpc_follow_logs_streams_every_line(long_log, grpc_api):
    stack, workflow_id = long_log
    followed = grpc_api.FollowLogs(
        pb.ReadLogsRequest(workflow_id=workflow_id), metadata=metadata(stack)
    )
    assert [c.output for c in followed] == EVERY_LINE


def test_grpc_a_page_token_not_handed_out_is_invalid_argument_naming_it(long_log, grpc_api):
    stack, workflow_id = long_log
    with pytest.raises(grpc.RpcError) as refused:
        grpc_api.ReadLogs(
            pb.ReadLogsRequest(workflow_id=workflow_id, page_token="next"),
            metadata=metadata(stack),
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "page_token" in refused.value.details()
