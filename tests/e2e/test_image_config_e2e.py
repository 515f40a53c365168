"""Jobs run what the image and the workflow say: images built here whose config sets Env,
Entrypoint, Cmd, WorkingDir and User, submitted through Orchestrate and run on a Substrate,
each rule observed from inside the container.

The rules (Docker's, ``docker run IMAGE ARGS``, the job's command and args being the ARGS):
the image's Env under the job's env; its Entrypoint then Cmd when the job gives no command,
args or script; a command or args replace the Cmd only; a script runs with neither;
WorkingDir unless the job sets cwd; User resolved in the image's /etc/passwd and /etc/group.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.cluster import Cluster, LocalRegistry
from support.config_images import GROUP, push_config_image

from fuzzball_core.errors import InvalidArgument

pytestmark = [pytest.mark.root, pytest.mark.slow]

ENTRY_AND_CMD = {"Entrypoint": ["/bin/echo", "entry"], "Cmd": ["from-cmd"]}


@pytest.fixture
def image(local_registry: LocalRegistry, request: pytest.FixtureRequest) -> Callable[..., str]:
    """``image(**config)`` -> the URI of an image pushed for this test with that config."""
    count = iter(range(100))

    def push(**config: Any) -> str:
        return push_config_image(local_registry.url, f"{request.node.name}-{next(count)}", config)

    return push


def _run(cluster: Cluster, uri: str, job: str) -> tuple[str, Any]:
    """Run one job ``cfg`` (the YAML lines of its body) from ``uri``; its log and stage."""
    body = "\n".join(f"    {line}" for line in job.strip().splitlines())
    workflow = f"version: v4\njobs:\n  cfg:\n    image: {{uri: {uri}}}\n{body}\n"
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(workflow)
    view = orchestrate.wait_for(workflow_id)
    stage = next(s for s in view.stages if s.name == "jobs.cfg")
    return orchestrate.logs(workflow_id, "jobs.cfg"), stage


# -- Entrypoint, Cmd, command and script ----------------------------------------------------------


def test_the_entrypoint_and_cmd_run_when_the_job_names_no_command(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    log, stage = _run(cluster, image(**ENTRY_AND_CMD), "env: [A=1]")

    assert (stage.status, log) == ("FINISHED", "entry from-cmd\n")


def test_a_command_replaces_the_cmd_after_the_entrypoint(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    log, stage = _run(cluster, image(**ENTRY_AND_CMD), "command: [from-job]")

    assert (stage.status, log) == ("FINISHED", "entry from-job\n")


def test_args_alone_replace_the_cmd_after_the_entrypoint(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    log, stage = _run(cluster, image(**ENTRY_AND_CMD), "args: [from-args]")

    assert (stage.status, log) == ("FINISHED", "entry from-args\n")


def test_args_follow_the_command_after_the_entrypoint(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    log, stage = _run(cluster, image(**ENTRY_AND_CMD), "command: [from-job]\nargs: [and-args]")

    assert (stage.status, log) == ("FINISHED", "entry from-job and-args\n")


def test_a_script_runs_without_the_entrypoint_or_cmd(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    log, stage = _run(cluster, image(**ENTRY_AND_CMD), "script: echo from-script")

    assert (stage.status, log) == ("FINISHED", "from-script\n")


def test_a_script_naming_its_interpreter_is_run_by_it_with_the_args(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    # /bin/cat as the interpreter prints the script itself, then each argument's file;
    # under /bin/sh the second line would be run as a command
    log, stage = _run(
        cluster,
        image(**ENTRY_AND_CMD),
        "script: |\n  #!/bin/cat\n  not a command\nargs: [/etc/group]",
    )

    assert (stage.status, log) == ("FINISHED", "#!/bin/cat\nnot a command\n" + GROUP)


def test_the_cmd_alone_runs_when_the_image_has_no_entrypoint(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    log, stage = _run(cluster, image(Cmd=["/bin/echo", "only-cmd"]), "env: [A=1]")

    assert (stage.status, log) == ("FINISHED", "only-cmd\n")


def test_a_command_replaces_a_cmd_without_entrypoint(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    log, stage = _run(cluster, image(Cmd=["/bin/echo", "only-cmd"]), "command: [/bin/echo, job]")

    assert (stage.status, log) == ("FINISHED", "job\n")


def test_the_entrypoint_alone_runs_when_the_image_has_no_cmd(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    log, stage = _run(cluster, image(Entrypoint=["/bin/echo", "only-entry"]), "env: [A=1]")

    assert (stage.status, log) == ("FINISHED", "only-entry\n")


def test_a_job_with_no_command_anywhere_is_refused_at_submission(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        _run(cluster, image(Env=["A=1"]), "env: [A=1]")

    assert "jobs.cfg.command: none of command, args and script is set" in refused.value.message


# -- Env and WorkingDir ---------------------------------------------------------------------------


def test_the_image_env_is_under_the_jobs_env(cluster: Cluster, image: Callable[..., str]) -> None:
    uri = image(Env=["PATH=/bin:/image/bin", "FROM_IMAGE=image", "BOTH=image"])

    log, stage = _run(
        cluster,
        uri,
        'command: [/bin/sh, -c, "echo $PATH $FROM_IMAGE $BOTH"]\nenv: [BOTH=job]',
    )

    assert (stage.status, log) == ("FINISHED", "/bin:/image/bin image job\n")


def test_the_working_dir_is_where_the_job_starts(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    log, stage = _run(cluster, image(WorkingDir="/srv/app"), "command: [/bin/sh, -c, pwd]")

    assert (stage.status, log) == ("FINISHED", "/srv/app\n")


def test_the_jobs_cwd_wins_over_the_working_dir(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    log, stage = _run(
        cluster, image(WorkingDir="/srv/app"), "command: [/bin/sh, -c, pwd]\ncwd: /tmp"
    )

    assert (stage.status, log) == ("FINISHED", "/tmp\n")


# -- User -----------------------------------------------------------------------------------------


def test_a_user_name_runs_with_its_ids_groups_and_home(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    log, stage = _run(
        cluster, image(User="app"), 'command: [/bin/sh, -c, "id -u; id -g; id -G; echo $HOME"]'
    )

    assert (stage.status, log) == ("FINISHED", "1000\n1000\n1000 29 50\n/home/app\n")


def test_a_user_and_group_by_number_run_with_those_ids(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    log, stage = _run(cluster, image(User="4242:50"), 'command: [/bin/sh, -c, "id -u; id -G"]')

    assert (stage.status, log) == ("FINISHED", "4242\n50\n")


def test_the_images_user_can_read_its_script_and_files_and_write_its_volumes(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    workflow = f"""
version: v4
files:
  app.conf: "setting=1"
volumes:
  scratch: {{reference: volume://user/ephemeral}}
jobs:
  cfg:
    image: {{uri: {image(User="app")}}}
    script: |
      cat /etc/app.conf
      echo written-by-$(id -u) > /data/out
      cat /data/out
    files: {{/etc/app.conf: "file://app.conf"}}
    mounts: {{/data: {{volume: scratch}}}}
"""
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(workflow)
    view = orchestrate.wait_for(workflow_id)

    assert view.status == "FINISHED", view
    assert orchestrate.logs(workflow_id, "jobs.cfg") == "setting=1written-by-1000\n"


def test_a_user_the_image_does_not_know_fails_the_job_naming_it(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    _, stage = _run(cluster, image(User="ghost"), "command: [/bin/true]")

    assert stage.status == "FAILED"
    assert "image user 'ghost': no such user in the image's /etc/passwd" in stage.message


# -- images built by a workflow (the object cache) ------------------------------------------------

BUILT = """
version: v1
images:
  {name}:
    from: {{uri: {base}}}
    files: {{/opt/marker: "built\\n"}}
    post: "true"
jobs:
  cfg:
    image: {{uri: fuzzball://user/{name}}}
{job}
"""


def test_a_workflow_built_image_runs_as_its_base_image_says(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    base = image(
        User="app",
        Env=["GREETING=from-base"],
        Entrypoint=["/bin/sh", "-c"],
        Cmd=["echo $(id -u) $GREETING; cat /opt/marker"],
    )
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(
        BUILT.format(name="cfgbuilt", base=base, job="    env: [A=1]"), name="built"
    )
    view = orchestrate.wait_for(workflow_id, timeout=120)

    assert view.status == "FINISHED", view
    assert orchestrate.logs(workflow_id, "jobs.cfg") == "1000 from-base\nbuilt\n"


def test_a_cached_image_with_nothing_to_run_is_refused_at_submission(
    cluster: Cluster, image: Callable[..., str]
) -> None:
    build = BUILT.format(name="cfgbare", base=image(Env=["A=1"]), job="    command: [/bin/true]")
    orchestrate = cluster.orchestrate
    assert orchestrate.wait_for(orchestrate.start_workflow(build), timeout=120).status == "FINISHED"

    with pytest.raises(InvalidArgument) as refused:
        _run(cluster, "fuzzball://user/cfgbare", "env: [A=1]")

    assert "jobs.cfg.command: none of command, args and script is set" in refused.value.message
