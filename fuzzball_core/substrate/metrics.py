"""The node's metrics endpoint: ``GET /metrics`` in Prometheus's text format.

Samples come from the ``fuzzball_node_collect_metrics`` hook (the builtin procfs plugin and
any site plugin) and from the agent itself (its running jobs, its connection to Orchestrate,
a failed device plugin), so the monitoring stack can place holds on what it sees. They are
rendered by prometheus-client through :class:`NodeCollector`, which gives every metric its
HELP and TYPE lines and escapes label values, and served on port 9101 by default
(``FuzzballConfig.node_metrics_listen``: ``substrate.metrics-listen``, else
``health.metrics-address``; ``health.metrics-disabled`` turns it off).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from fuzzball_core.config import split_listen

log = logging.getLogger(__name__)

#: A metric name and an optional label set, as the metrics hooks write their samples' keys.
_SAMPLE_KEY = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?", re.DOTALL)
#: One ``name="value"`` pair of a label set (values escape ``\``, ``"`` and newlines).
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)', re.DOTALL)
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass(frozen=True)
class Sample:
    """One sample: a metric name, its labels and value, and the metric's HELP text.

    A name ending in ``_total`` is a counter's (Prometheus's naming rule); any other is a
    gauge's."""

    name: str
    value: float
    labels: Mapping[str, str] = field(default_factory=dict)
    help: str = ""


def parse_key(key: str) -> tuple[str, dict[str, str]] | None:
    """The metric name and labels of a hook's sample key (``name{label="value",...}``, in
    Prometheus syntax), or None when the key is not one."""
    match = _SAMPLE_KEY.fullmatch(key)
    if match is None:
        return None
    name, label_text = match.group(1), (match.group(2) or "").strip()
    labels: dict[str, str] = {}
    position = 0
    while position < len(label_text):
        pair = _LABEL.match(label_text, position)
        if pair is None or pair.end() == position:
            return None
        value = re.sub(
            r"\\.", lambda escape: _UNESCAPE.get(escape.group(), escape.group()), pair.group(2)
        )
        labels[pair.group(1)] = value
        position = pair.end()
    return name, labels


def hook_samples(results: Iterable[Mapping[str, float] | None]) -> list[Sample]:
    """The samples of the metrics hooks' answers (key -> value mappings; None adds nothing).

    A sample whose key or value is not a valid Prometheus sample is dropped with a warning
    (a plugin's bug must not break the whole scrape).
    """
    samples = []
    for result in results:
        for key, value in (result or {}).items():
            parsed = parse_key(key)
            if parsed is None or isinstance(value, bool) or not isinstance(value, int | float):
                log.warning("dropping metric sample %r: not a valid Prometheus sample", key)
                continue
            name, labels = parsed
            samples.append(Sample(name, float(value), labels))
    return samples


class NodeCollector(Collector):
    """A prometheus-client collector over ``samples()``, read afresh on every scrape.

    Samples of one name form one family, a counter when the name ends in ``_total`` (the
    family is named without it, as prometheus-client writes counters) and a gauge otherwise;
    its HELP is the first text a sample gives, or says that the node's metrics plugins report
    it. A series given twice (same name and labels) keeps its last value, as the agent's own
    samples come after the hooks'.
    """

    def __init__(self, samples: Callable[[], Iterable[Sample]]) -> None:
        self._samples = samples

    def collect(self) -> Iterator[Metric]:
        """The node's gauge families, in name order."""
        helps: dict[str, str] = {}
        series: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        for sample in self._samples():
            if sample.help:
                helps.setdefault(sample.name, sample.help)
            labels = tuple(sorted(sample.labels.items()))
            series.setdefault(sample.name, {})[labels] = float(sample.value)
        for name in sorted(series):
            help_text = helps.get(name) or f"{name}, as the node's metrics plugins report it."
            counter = name.endswith("_total")
            family_name = name.removesuffix("_total") if counter else name
            family = Metric(family_name, help_text, "counter" if counter else "gauge")
            for labels, value in series[name].items():
                family.add_sample(name, dict(labels), value)
            yield family


def exposition(samples: Iterable[Sample]) -> str:
    """``samples`` as Prometheus text: HELP and TYPE lines per metric, label values escaped."""
    registry = CollectorRegistry()
    sample_list = list(samples)
    registry.register(NodeCollector(lambda: sample_list))
    return generate_latest(registry).decode()


def advertised(listen: str, node_address: str) -> str:
    """Where others reach an endpoint listening on ``listen``: a wildcard host (every
    interface) is replaced by the node's own address; "" when it is not served."""
    if not listen:
        return ""
    host, port = split_listen(listen)
    if host in ("0.0.0.0", "::") and node_address:
        host = node_address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class MetricsServer:
    """Serves ``collect()``'s samples on ``listen`` (``host:port``; empty disables it), and
    whatever routes ``routes(app)`` adds (the agent's ``/healthz`` and ``/readyz``)."""

    def __init__(
        self,
        listen: str,
        collect: Callable[[], Iterable[Sample]],
        routes: Callable[[web.Application], None] | None = None,
    ) -> None:
        self.listen = listen
        self._routes = routes
        self._registry = CollectorRegistry()
        self._registry.register(NodeCollector(collect))
        self._runner: web.AppRunner | None = None

    def render(self) -> bytes:
        """The endpoint's text now (also what a scrape relayed over the node's stream gets)."""
        return generate_latest(self._registry)

    async def _metrics(self, _request: web.Request) -> web.Response:
        # rendered on the event loop: the agent's state it reads is the loop's own
        return web.Response(body=self.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self) -> bool:
        """Start serving; False (with a warning naming the address) when it cannot bind."""
        if not self.listen:
            return False
        host, port = split_listen(self.listen)
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        if self._routes is not None:
            self._routes(app)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, host, port).start()
        except OSError as exc:
            log.warning(
                "node metrics are not served: cannot listen on %s (%s)",
                self.listen,
                exc.strerror or exc,
            )
            await self._runner.cleanup()
            self._runner = None
            return False
        log.info("node metrics on http://%s/metrics", self.listen)
        return True

    async def stop(self) -> None:
        """Stop serving (nothing when it was not serving)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
