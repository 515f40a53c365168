"""A workflow file submitted again with the same text is not parsed again: its parse (with
its plan and v4 YAML) is reused, while the plugin validators still judge each submission and
a refused file is refused each time with its own source."""

from __future__ import annotations

import pytest
from support.engine_workflows import ONE_JOB
from support.parse_counting import counting_loads

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.spec import parsing
from fuzzball_core.spec.models import Workflow
from fuzzball_core.spec.parsed_files import ParsedFiles

REFUSED = "version: v1\njobs:\n  only:\n    command: [true]\n"


def test_the_same_text_submitted_again_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = counting_loads(monkeypatch)
    files = ParsedFiles()

    first = files.parse(ONE_JOB, source="a")
    again = files.parse(ONE_JOB, source="b")

    assert again is first
    assert len(loaded) == 1


def test_plugin_validators_judge_each_submission_of_a_reused_parse() -> None:
    files = ParsedFiles()
    refusing = False

    def closed(model: Workflow) -> list[tuple[str, str]]:
        return [("jobs.only", "the cluster is closed")] if refusing else []

    files.parse(ONE_JOB, source="first", extra_validators=[closed])
    refusing = True
    with pytest.raises(InvalidArgument) as caught:
        files.parse(ONE_JOB, source="second", extra_validators=[closed])

    assert caught.value.message.startswith("second: invalid workflow (1 error)")
    assert parsing.field_violations(caught.value) == [("jobs.only", "the cluster is closed")]


def test_a_refused_text_is_parsed_and_refused_each_time_with_its_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded = counting_loads(monkeypatch)
    files = ParsedFiles()

    messages = []
    for source in ("one", "two"):
        with pytest.raises(InvalidArgument) as caught:
            files.parse(REFUSED, source=source)
        messages.append(caught.value.message.splitlines()[0])

    assert len(loaded) == 2
    assert [m.split(":")[0] for m in messages] == ["one", "two"]


def test_only_the_most_recent_texts_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = counting_loads(monkeypatch)
    files = ParsedFiles(kept=2)
    texts = [ONE_JOB.replace("only", name) for name in ("a", "b", "c")]

    for text in texts:
        files.parse(text)
    files.parse(texts[2])  # kept
    files.parse(texts[0])  # dropped when the third came: parsed again

    assert len(loaded) == 4


def test_a_parse_is_planned_and_rendered_as_v4_yaml_once() -> None:
    parsed = ParsedFiles().parse(ONE_JOB)

    assert parsed.plan(pull_stages=True) is parsed.plan(pull_stages=True)
    assert parsed.to_yaml() is parsed.to_yaml()
    assert "images.docker://alpine:latest" in parsed.plan(pull_stages=True).stages
    assert "images.docker://alpine:latest" not in parsed.plan(pull_stages=False).stages
