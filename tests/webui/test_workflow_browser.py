"""The workflows pages and the editor in headless Chromium: hello world submitted from the
editor and watched to its end, its log searched, Follow switched off and on, a rerun under
the same name, problems placed at their lines as the file is typed, a v1 upload converted.

A screenshot of a workflow's page is written to docs/screenshots/workflow.png (the README
shows it), so it follows the page as it changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait
from support.browser import console_errors
from support.webui_client import browser_sign_in
from support.webui_stack import WebUiStack

from fuzzball_core.service.views import Principal
from fuzzball_core.vocabulary import Status
from fuzzball_core.webui.session import SESSION_COOKIE

pytestmark = pytest.mark.slow

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
HELLO = """version: v4
jobs:
  hello:
    image:
      uri: docker://alpine:3.19
    command: [echo, hello world]
    resource:
      cpu:
        cores: 1
      memory:
        size: 64MiB
"""
PIPELINE = """version: v4
volumes:
  scratch:
    reference: volume://user/ephemeral
jobs:
  prepare:
    image:
      uri: docker://alpine:3.19
    command: [sh, -c, "echo preparing; seq 1 5 > /scratch/data"]
    mounts:
      /scratch: {volume: scratch}
    resource: {cpu: {cores: 1}, memory: {size: 64MiB}}
  train:
    image:
      uri: docker://python:3.12-slim
    command: [python3, -c, "print('training')"]
    depends-on:
      - name: prepare
    mounts:
      /scratch: {volume: scratch}
    resource: {cpu: {cores: 1}, memory: {size: 64MiB}}
  evaluate:
    image:
      uri: docker://python:3.12-slim
    command: [python3, -c, "print('evaluating')"]
    depends-on:
      - name: train
    resource: {cpu: {cores: 1}, memory: {size: 64MiB}}
  alert:
    image:
      uri: docker://alpine:3.19
    command: [echo, training failed]
    depends-on:
      - name: train
        status: FAILED
    resource: {cpu: {cores: 1}, memory: {size: 64MiB}}
"""
V1_FILE = """version: v1
jobs:
  hello:
    image:
      uri: docker://alpine:3.19
    command: [echo, hi]
"""


def member(ui: WebUiStack) -> Principal:
    return ui.stack.service.identity.login_principal(ui.member.user_id)


def wait(browser: Any, condition: Any, seconds: float = 15) -> Any:
    return WebDriverWait(
        browser, seconds, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
    ).until(condition)


def text_of(browser: Any, element_id: str) -> str:
    return browser.find_element(By.ID, element_id).text


def log_scroll(browser: Any) -> dict[str, int]:
    return browser.execute_script(
        "var log = document.getElementById('log');"
        "return {top: log.scrollTop, height: log.scrollHeight, view: log.clientHeight};"
    )


def at_the_end(browser: Any) -> bool:
    scroll = log_scroll(browser)
    return scroll["top"] + scroll["view"] >= scroll["height"] - 2


def test_hello_world_from_the_editor_runs_to_its_end_and_its_log_is_searchable(
    fresh_browser: Any, ui: WebUiStack
) -> None:
    browser = fresh_browser
    browser_sign_in(browser, ui, ui.member, page="/editor")
    wait(browser, lambda b: text_of(b, "check-state") == "Valid")
    browser.find_element(By.ID, "start").click()
    wait(browser, lambda b: "/workflows/" in b.current_url)
    workflow_id = browser.current_url.rsplit("/", 1)[1]
    assert browser.find_element(By.TAG_NAME, "h1").text == "hello-world"
    assert ui.stack.get_workflow(member(ui), workflow_id).raw_specification.startswith(
        "version: v4\njobs:\n  hello:"
    )

    ui.stack.emit_log(workflow_id, "jobs.hello", "hello world\n")
    ui.stack.set_stage(workflow_id, "jobs.hello", Status.FINISHED)
    wait(browser, lambda b: text_of(b, "workflow-status") == "FINISHED")
    wait(browser, lambda b: "hello world" in text_of(b, "log"))

    browser.find_element(By.ID, "log-search").send_keys("WORLD")
    wait(browser, lambda b: text_of(b, "log-matches") == "1 match")
    marks = browser.find_elements(By.CSS_SELECTOR, "#log mark")
    assert [m.text for m in marks] == ["world"]
    assert console_errors(browser) == []


def test_unchecking_follow_stops_the_log_scrolling(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    workflow_id = ui.stack.start_workflow(member(ui), raw_specification=HELLO, name="chatty")
    ui.stack.emit_logs(workflow_id, "jobs.hello", [f"line {i}\n" for i in range(200)])
    browser_sign_in(browser, ui, ui.member, page=f"/workflows/{workflow_id}")
    wait(browser, lambda b: "line 199" in text_of(b, "log"))
    wait(browser, at_the_end)

    browser.find_element(By.ID, "log-follow").click()  # off
    browser.execute_script("document.getElementById('log').scrollTop = 0;")
    ui.stack.emit_logs(workflow_id, "jobs.hello", [f"more {i}\n" for i in range(200)])
    wait(browser, lambda b: "more 199" in text_of(b, "log"))
    assert log_scroll(browser)["top"] == 0

    browser.find_element(By.ID, "log-follow").click()  # on again: to the end at once
    wait(browser, at_the_end)
    ui.stack.emit_logs(workflow_id, "jobs.hello", [f"last {i}\n" for i in range(50)])
    wait(browser, lambda b: "last 49" in text_of(b, "log"))
    wait(browser, at_the_end)
    assert console_errors(browser) == []


def test_rerun_keeps_the_workflows_name(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    workflow_id = ui.stack.start_workflow(member(ui), raw_specification=HELLO, name="nightly")
    ui.stack.set_stage(workflow_id, "jobs.hello", Status.FINISHED)
    browser_sign_in(browser, ui, ui.member, page=f"/workflows/{workflow_id}")
    browser.find_element(By.ID, "rerun").click()
    wait(browser, lambda b: workflow_id not in b.current_url)
    assert browser.find_element(By.TAG_NAME, "h1").text == "nightly"
    rerun_id = browser.current_url.rsplit("/", 1)[1]
    assert ui.stack.get_workflow(member(ui), rerun_id).name == "nightly"


def test_without_start_the_editor_still_checks_and_enter_in_the_name_sends_nothing(
    fresh_browser: Any, ui: WebUiStack
) -> None:
    browser = fresh_browser
    # the monitoring service account runs no workflows; it has no password: its token is
    # put in the session cookie as sign-in would
    _, token = ui.stack.service.identity.create_service_account("watcher", "monitoring")
    browser.get(f"{ui.url}/signin")
    browser.add_cookie({"name": SESSION_COOKIE, "value": token, "path": "/"})
    browser.get(f"{ui.url}/editor")
    wait(browser, lambda b: text_of(b, "check-state") == "Valid")
    assert not browser.find_elements(By.ID, "start")
    browser.find_element(By.ID, "workflow-name").send_keys(Keys.ENTER)
    text = browser.find_element(By.ID, "specification")
    text.send_keys(Keys.CONTROL, Keys.END)
    text.send_keys("    mounts:\n      /data:\n        volume: scratch\n")
    wait(browser, lambda b: text_of(b, "check-state") == "1 error")
    assert browser.current_url == f"{ui.url}/editor"
    assert console_errors(browser) == []


def test_the_editor_places_an_undeclared_volume_mount_at_its_line_as_it_is_typed(
    fresh_browser: Any, ui: WebUiStack
) -> None:
    browser = fresh_browser
    browser_sign_in(browser, ui, ui.member, page="/editor")
    wait(browser, lambda b: text_of(b, "check-state") == "Valid")
    text = browser.find_element(By.ID, "specification")
    text.send_keys(Keys.CONTROL, Keys.END)
    # typed at the end of hello world: a mount of a volume the file never declares
    text.send_keys("    mounts:\n      /data:\n        volume: scratch\n")
    problem = wait(
        browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#problems li.problem-error")
    )[0]
    assert problem.text == (
        "Line 14: jobs.hello.mounts./data.volume: volume scratch is not declared in volumes"
    )
    marked = browser.find_element(By.CSS_SELECTOR, "#gutter span[data-line='14']")
    assert marked.get_attribute("class") == "has-error"
    assert text_of(browser, "check-state") == "1 error"
    assert console_errors(browser) == []


def test_an_uploaded_v1_file_is_converted_to_v4_by_the_server(
    fresh_browser: Any, ui: WebUiStack, tmp_path: Path
) -> None:
    browser = fresh_browser
    upload = tmp_path / "hello-v1.yaml"
    upload.write_text(V1_FILE)
    browser_sign_in(browser, ui, ui.member, page="/editor")
    browser.find_element(By.ID, "upload").send_keys(str(upload))
    text = browser.find_element(By.ID, "specification")
    wait(browser, lambda b: text.get_attribute("value").startswith("version: v4\n"))
    wait(browser, lambda b: text_of(b, "check-state") == "Valid")
    assert "command:\n    - echo\n    - hi" in text.get_attribute("value")


def test_a_workflow_page_shows_its_stage_graph(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    workflow_id = ui.stack.start_workflow(member(ui), raw_specification=PIPELINE, name="training")
    ui.stack.emit_log(workflow_id, "jobs.prepare", "preparing\n")
    ui.stack.set_stage(workflow_id, "jobs.prepare", Status.FINISHED)
    ui.stack.emit_log(workflow_id, "jobs.train", "epoch 1/3 loss=0.412\nepoch 2/3 loss=0.271\n")
    browser_sign_in(browser, ui, ui.member, page=f"/workflows/{workflow_id}")
    wait(browser, lambda b: "epoch 2/3" in text_of(b, "log"))
    boxes = browser.find_elements(By.CSS_SELECTOR, "#stage-graph g.stage-box")
    assert {b.get_attribute("data-stage") for b in boxes} == {
        "volumes.scratch",
        "jobs.prepare",
        "jobs.train",
        "jobs.evaluate",
        "jobs.alert",
    }
    assert browser.find_elements(By.CSS_SELECTOR, "path.edge-on-failure")
    assert browser.find_elements(By.CSS_SELECTOR, "path.edge-volume")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "workflow.png"))
    assert console_errors(browser) == []


def test_a_typed_v1_file_offers_conversion_and_converts_on_request(
    fresh_browser: Any, ui: WebUiStack
) -> None:
    browser = fresh_browser
    browser_sign_in(browser, ui, ui.member, page="/editor")
    wait(browser, lambda b: text_of(b, "check-state") == "Valid")
    convert = browser.find_element(By.ID, "upgrade")
    assert not convert.is_displayed()  # a v4 file: nothing to convert
    text = browser.find_element(By.ID, "specification")
    text.clear()
    text.send_keys(V1_FILE)
    wait(browser, lambda b: convert.is_displayed())
    assert text.get_attribute("value").startswith("version: v1")  # typing converts nothing
    convert.click()
    wait(browser, lambda b: text.get_attribute("value").startswith("version: v4\n"))
    wait(browser, lambda b: not convert.is_displayed())
    assert console_errors(browser) == []
