"""The node metrics endpoint: Prometheus text from the metrics hooks and the agent."""

from __future__ import annotations

import asyncio
import logging
import socket

import httpx
from prometheus_client.parser import text_string_to_metric_families
from support.cluster import free_port

from fuzzball_core.config import parse_config
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.agent import Agent
from fuzzball_core.substrate.metrics import MetricsServer, Sample, exposition, hook_samples


def parsed(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_exposition_is_valid_prometheus_text_with_labels():
    text = exposition(
        hook_samples([{"fuzzball_node_load1": 0.5, 'fuzzball_node_gpu_temp{gpu="0"}': 41.0}])
    )
    samples = parsed(text)
    assert samples[("fuzzball_node_load1", ())] == 0.5
    assert samples[("fuzzball_node_gpu_temp", (("gpu", "0"),))] == 41.0


def test_every_metric_has_help_and_type_lines():
    text = exposition(
        [
            Sample("fuzzball_node_running_jobs", 2, help="Runs this node holds."),
            *hook_samples([{"fuzzball_node_load1": 0.5}]),
        ]
    )
    assert "# HELP fuzzball_node_running_jobs Runs this node holds.\n" in text
    assert "# TYPE fuzzball_node_running_jobs gauge\n" in text
    assert "# HELP fuzzball_node_load1 fuzzball_node_load1, as the node's metrics" in text
    assert "# TYPE fuzzball_node_load1 gauge\n" in text


def test_label_values_are_escaped():
    awkward = 'a "quoted" back\\slash\nnewline'
    text = exposition([Sample("fuzzball_node_allocatable_devices", 1, {"device": awkward})])
    assert parsed(text) == {("fuzzball_node_allocatable_devices", (("device", awkward),)): 1.0}


def test_escaped_label_values_in_a_hooks_keys_are_read_back_unescaped():
    samples = hook_samples([{'fuzzball_node_disk_free{path="C:\\\\x \\"y\\""}': 3.0}])
    assert [(s.name, dict(s.labels)) for s in samples] == [
        ("fuzzball_node_disk_free", {"path": 'C:\\x "y"'})
    ]


def test_a_series_given_twice_keeps_its_last_value():
    text = exposition([Sample("fuzzball_node_cpus", 1), Sample("fuzzball_node_cpus", 8)])
    assert parsed(text) == {("fuzzball_node_cpus", ()): 8.0}


def test_invalid_sample_names_are_dropped_not_fatal(caplog):
    with caplog.at_level(logging.WARNING):
        samples = hook_samples([{"bad name": 1.0, "fuzzball_node_ok": 2.0}])
    assert parsed(exposition(samples)) == {("fuzzball_node_ok", ()): 2.0}
    assert "bad name" in caplog.text


def test_samples_with_malformed_labels_or_values_are_dropped(caplog):
    with caplog.at_level(logging.WARNING):
        samples = hook_samples(
            [{"fuzzball_node_a{gpu=0}": 1.0, "fuzzball_node_b": "high", "fuzzball_node_c": 3}]
        )
    assert [(s.name, s.value) for s in samples] == [("fuzzball_node_c", 3.0)]
    assert "fuzzball_node_a{gpu=0}" in caplog.text and "fuzzball_node_b" in caplog.text


def test_agent_samples_include_its_jobs_and_the_metrics_hooks(tmp_path):
    config = parse_config(
        {
            "data-dir": str(tmp_path),
            "substrate": {"work-dir": str(tmp_path / "node"), "cores": 3, "devices": {}},
        }
    )
    samples = {s.name: s.value for s in Agent(config, get_registry()).collect_metrics()}
    assert samples["fuzzball_node_running_jobs"] == 0
    assert samples["fuzzball_node_allocatable_cores"] == 3
    assert samples["fuzzball_node_connected"] == 0
    assert samples["fuzzball_node_memory_total_bytes"] > 0  # from the builtin procfs plugin


def test_server_serves_the_samples_over_http():
    port = free_port()

    async def scrape() -> str:
        server = MetricsServer(
            f"127.0.0.1:{port}", lambda: [Sample("fuzzball_node_running_jobs", 2)]
        )
        assert await server.start()
        try:
            async with httpx.AsyncClient() as client:
                reply = await client.get(f"http://127.0.0.1:{port}/metrics")
                return reply.text
        finally:
            await server.stop()

    assert parsed(asyncio.run(scrape()))[("fuzzball_node_running_jobs", ())] == 2


def test_a_port_in_use_is_a_warning_not_a_crash(caplog):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        listen = f"127.0.0.1:{taken.getsockname()[1]}"

        async def start() -> bool:
            server = MetricsServer(listen, list)
            started = await server.start()
            await server.stop()
            return started

        with caplog.at_level(logging.WARNING):
            assert asyncio.run(start()) is False
    assert f"cannot listen on {listen}" in caplog.text


def test_empty_listen_address_turns_the_endpoint_off():
    assert asyncio.run(MetricsServer("", list).start()) is False
