"""A SIF image's Apptainer environment scripts (/.singularity.d/env/*.sh) are sourced by the
image's /bin/sh before a job's command, as ``apptainer exec`` sources them, and the job's own
variables still win over theirs, as ``--env`` and ``APPTAINERENV_*`` do, and the device
plugins' directories (the driver's libraries) stay on the search paths the scripts set, as
Apptainer's ``--nv`` appends its own after sourcing; without /bin/sh a warning event of the
run says which scripts were not applied; any other image runs its command as it is."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from support.job_specs import container_spec, node_services

from fuzzball_core.drivers import ImageConfig
from fuzzball_core.hookspecs import ContainerPreparation
from fuzzball_core.substrate.drivers.image_progress import PROGRESS_STREAM
from fuzzball_core.substrate.env_scripts import (
    WRAPPER,
    WRAPPER_NAME,
    search_path_carriers,
    sourcing_env_scripts,
)

IMAGE = {"uri": "oras://example.test/tools/app:1"}
SIF_CONFIG = ImageConfig(
    env=("PATH=/usr/bin:/bin", "FROM_IMAGE=env"),
    env_scripts=("10-docker2singularity.sh", "90-environment.sh"),
    env_shell=True,
)
#: a value a shell would mangle if it ever became shell source
AWKWARD = "two  spaces, a 'quote', a \"dquote\", $(touch /tmp/never) `x` $HOME\nand a newline"
SHELLS = [
    pytest.param([path], id=name)
    for name, path in (("dash", shutil.which("dash")), ("bash", shutil.which("bash")))
    if path
] + [pytest.param([path, "sh"], id="busybox") for path in [shutil.which("busybox")] if path]
#: what the NVIDIA plugin puts on the search paths of a GPU job
DEVICE_PATHS = {"LD_LIBRARY_PATH": ["/usr/local/nvidia/lib64"], "PATH": ["/usr/local/nvidia/bin"]}


# -- the wrapper's argv ---------------------------------------------------------------------


def test_the_wrapper_is_the_images_sh_naming_the_kept_variables_then_the_command() -> None:
    argv = sourcing_env_scripts(["/bin/app", "an arg"], {"B_VAR", "A_VAR"})

    assert argv == [
        "/bin/sh",
        "-c",
        WRAPPER,
        WRAPPER_NAME,
        "A_VAR",
        "B_VAR",
        "--",
        "--",
        "/bin/app",
        "an arg",
    ]


def test_names_a_shell_cannot_export_are_left_out_of_the_wrapper() -> None:
    argv = sourcing_env_scripts(["true"], {"GOOD_1", "bad-name", "1BAD", "a b", "--"})

    assert argv[4:] == ["GOOD_1", "--", "--", "true"]


def test_the_search_path_variables_are_named_after_the_kept_ones() -> None:
    argv = sourcing_env_scripts(["app"], {"WHO"}, DEVICE_PATHS)

    assert argv[4:] == ["WHO", "--", "LD_LIBRARY_PATH", "PATH", "--", "app"]


def test_the_search_path_directories_travel_in_carrier_variables_once_each() -> None:
    carriers = search_path_carriers(
        {
            "LD_LIBRARY_PATH": ["/usr/local/nvidia/lib64", "/opt/lib", "/usr/local/nvidia/lib64"],
            "PATH": ["", "/a:b", "/usr/local/nvidia/bin"],
            "bad-name": ["/x"],
            "MANPATH": [],
        }
    )

    assert carriers == {
        "__fb_search_LD_LIBRARY_PATH": "/usr/local/nvidia/lib64:/opt/lib",
        "__fb_search_PATH": "/usr/local/nvidia/bin",
    }


# -- what the wrapper does, run by real shells ------------------------------------------------


def _run_wrapper(
    shell: list[str],
    scripts: Path,
    env: dict[str, str],
    keep: set[str],
    command: list[str],
    search_paths: Mapping[str, Sequence[str]] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``sourcing_env_scripts`` run by ``shell``, its scripts read from ``scripts``, with
    ``search_paths``' carriers added to ``env`` as the job's container adds them."""
    argv = sourcing_env_scripts(command, keep, search_paths)
    argv[2] = argv[2].replace("/.singularity.d/env", str(scripts))
    env = {**env, **search_path_carriers(search_paths or {})}
    return subprocess.run([*shell, *argv[1:]], env=env, capture_output=True, text=True, check=True)


def _environment(output: str) -> dict[str, str]:
    return dict(entry.split("=", 1) for entry in output.split("\0") if entry)


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    directory = tmp_path / "env"
    directory.mkdir()
    (directory / "10-docker2singularity.sh").write_text(
        'export ORDER="10"\nexport FROM_DOCKER=yes\n'
    )
    (directory / "90-environment.sh").write_text(
        "export PATH=/opt/app/bin:$PATH\n"
        'export ORDER="$ORDER 90"\n'
        "export WHO=image\n"
        "export SECRET_TOKEN=from-image\n"
        "unset FB_JOB_NAME\n"
        # the wrapper's own loop variables must not be what a script clobbers
        "n=x; name=x; keep=x; script=x\n"
    )
    (directory / "notes.txt").write_text("export NOT_A_SCRIPT=1\n")
    return directory


@pytest.mark.parametrize("shell", SHELLS)
def test_the_scripts_are_sourced_in_name_order_before_the_command(
    shell: list[str], scripts: Path
) -> None:
    env = _environment(
        _run_wrapper(shell, scripts, {"PATH": "/usr/bin:/bin"}, set(), ["env", "-0"]).stdout
    )

    assert env["PATH"] == "/opt/app/bin:/usr/bin:/bin"
    assert env["ORDER"] == "10 90"
    assert env["FROM_DOCKER"] == "yes"
    assert "NOT_A_SCRIPT" not in env


@pytest.mark.parametrize("shell", SHELLS)
def test_the_jobs_variables_win_over_the_scripts_with_their_values_intact(
    shell: list[str], scripts: Path
) -> None:
    given = {
        "PATH": "/usr/bin:/bin",
        "WHO": "job",
        "SECRET_TOKEN": AWKWARD,
        "FB_JOB_NAME": "greet",
        "EMPTY": "",
    }

    result = _run_wrapper(
        shell, scripts, given, {"WHO", "SECRET_TOKEN", "FB_JOB_NAME", "EMPTY"}, ["env", "-0"]
    )

    env = _environment(result.stdout)
    assert env["WHO"] == "job"
    assert env["SECRET_TOKEN"] == AWKWARD
    assert env["FB_JOB_NAME"] == "greet"
    assert env["EMPTY"] == ""
    assert env["PATH"] == "/opt/app/bin:/usr/bin:/bin"  # the job did not set PATH
    assert not Path("/tmp/never").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_a_kept_name_the_environment_lacks_stays_the_scripts(
    shell: list[str], scripts: Path
) -> None:
    result = _run_wrapper(shell, scripts, {"PATH": "/bin"}, {"WHO"}, ["env", "-0"])

    assert _environment(result.stdout)["WHO"] == "image"


@pytest.mark.parametrize("shell", SHELLS)
def test_the_command_replaces_the_shell_with_its_arguments_as_given(
    shell: list[str], scripts: Path
) -> None:
    result = _run_wrapper(
        shell, scripts, {"PATH": "/usr/bin:/bin"}, set(), ["printf", "[%s]", "a b", "", "--", "*"]
    )

    assert result.stdout == "[a b][][--][*]"


def _gpu_job_environment(shell: list[str], tmp_path: Path, script: str) -> dict[str, str]:
    """The command's environment in a GPU job (the NVIDIA plugin's directories already
    appended to the container's values) whose image's one environment script is
    ``script``."""
    directory = tmp_path / "env"
    directory.mkdir()
    (directory / "90-environment.sh").write_text(script)
    given = {
        "PATH": "/usr/bin:/bin:/usr/local/nvidia/bin",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64:/usr/local/nvidia/lib64",
    }
    result = _run_wrapper(shell, directory, given, set(), ["env", "-0"], DEVICE_PATHS)
    return _environment(result.stdout)


@pytest.mark.parametrize("shell", SHELLS)
def test_device_directories_are_appended_again_after_a_script_sets_the_variables_outright(
    shell: list[str], tmp_path: Path
) -> None:
    env = _gpu_job_environment(
        shell,
        tmp_path,
        "export LD_LIBRARY_PATH=/opt/app/lib\nexport PATH=/opt/app/bin:/usr/bin:/bin\n",
    )

    assert env["LD_LIBRARY_PATH"] == "/opt/app/lib:/usr/local/nvidia/lib64"
    assert env["PATH"] == "/opt/app/bin:/usr/bin:/bin:/usr/local/nvidia/bin"


@pytest.mark.parametrize("shell", SHELLS)
def test_a_device_directory_a_script_kept_is_not_appended_twice(
    shell: list[str], tmp_path: Path
) -> None:
    env = _gpu_job_environment(
        shell, tmp_path, "export LD_LIBRARY_PATH=/opt/app/lib:$LD_LIBRARY_PATH\n"
    )

    assert env["LD_LIBRARY_PATH"] == ("/opt/app/lib:/usr/local/cuda/lib64:/usr/local/nvidia/lib64")
    assert env["PATH"] == "/usr/bin:/bin:/usr/local/nvidia/bin"


@pytest.mark.parametrize("shell", SHELLS)
def test_a_variable_a_script_unsets_holds_the_device_directories_alone(
    shell: list[str], tmp_path: Path
) -> None:
    env = _gpu_job_environment(shell, tmp_path, "unset LD_LIBRARY_PATH\n")

    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"


@pytest.mark.parametrize("shell", SHELLS)
def test_a_scripts_ifs_does_not_stop_the_directories_being_appended(
    shell: list[str], tmp_path: Path
) -> None:
    env = _gpu_job_environment(shell, tmp_path, "IFS=:\nexport LD_LIBRARY_PATH=/opt/app/lib\n")

    assert env["LD_LIBRARY_PATH"] == "/opt/app/lib:/usr/local/nvidia/lib64"


@pytest.mark.parametrize("shell", SHELLS)
def test_the_carrier_variables_reach_neither_the_scripts_nor_the_command(
    shell: list[str], tmp_path: Path
) -> None:
    seen = tmp_path / "seen-by-script"
    env = _gpu_job_environment(shell, tmp_path, f"env > {seen}\n")

    assert not [name for name in env if name.startswith("__fb_")]
    assert "__fb_" not in seen.read_text()


# -- the job's container --------------------------------------------------------------------


class DevicePlugin:
    """A device plugin putting :data:`DEVICE_PATHS` on every job's search paths."""

    def fuzzball_job_prepare_container(self, job, devices, container: ContainerPreparation) -> None:
        container.search_paths.update(DEVICE_PATHS)


def _warnings(output: list[tuple[int, str, bytes]]) -> list[str]:
    """The warning events the run's output reports (what Orchestrate records as
    ``stage_warning``); asserts nothing else was sent."""
    assert all(stream == PROGRESS_STREAM for _, stream, _ in output), output
    return [json.loads(data)["warning"] for _, _, data in output]


def test_a_job_in_an_image_with_env_scripts_runs_through_the_wrapper(tmp_path: Path) -> None:
    job = {"image": IMAGE, "command": ["app", "x"], "env": ["WHO=job", "PATH=/job/bin"]}

    with node_services(tmp_path) as services:
        spec = container_spec(
            services, job, config=SIF_CONFIG, extra_env={"SECRET_TOKEN": "s3cr3t"}
        )

    assert spec.command[:4] == ["/bin/sh", "-c", WRAPPER, WRAPPER_NAME]
    names = spec.command[4 : spec.command.index("--")]
    assert set(names) >= {
        "WHO",
        "PATH",
        "FB_WORKFLOW_ID",
        "FB_JOB_NAME",
        "SECRET_TOKEN",
        "FB_WORKFLOW_TOKEN",
    }
    assert spec.command[spec.command.index("--") + 1 :] == ["--", "app", "x"]  # no search path


def test_the_images_own_env_and_defaults_are_not_kept_over_the_scripts(tmp_path: Path) -> None:
    with node_services(tmp_path) as services:
        spec = container_spec(services, {"image": IMAGE, "command": ["app"]}, config=SIF_CONFIG)

    names = spec.command[4 : spec.command.index("--")]
    assert not {"PATH", "FROM_IMAGE", "HOSTNAME"} & set(names)
    assert spec.env["FROM_IMAGE"] == "env"


def test_the_wrapper_carries_names_only_never_values(tmp_path: Path) -> None:
    job = {"image": IMAGE, "command": ["app"], "env": ["WHO=job-value"]}

    with node_services(tmp_path) as services:
        spec = container_spec(
            services, job, config=SIF_CONFIG, extra_env={"SECRET_TOKEN": "s3cr3t-value"}
        )

    assert not any("s3cr3t-value" in part or "job-value" in part for part in spec.command)


def test_a_job_in_an_image_with_env_scripts_carries_the_device_search_paths(
    tmp_path: Path,
) -> None:
    with node_services(tmp_path) as services:
        services = dataclasses.replace(services, hooks=DevicePlugin())
        spec = container_spec(services, {"image": IMAGE, "command": ["app"]}, config=SIF_CONFIG)

    first_end = spec.command.index("--")
    assert spec.command[first_end + 1 :] == ["LD_LIBRARY_PATH", "PATH", "--", "app"]
    assert spec.env["__fb_search_LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert spec.env["__fb_search_PATH"] == "/usr/local/nvidia/bin"


def test_a_job_without_env_scripts_has_no_carrier_variables(tmp_path: Path) -> None:
    with node_services(tmp_path) as services:
        services = dataclasses.replace(services, hooks=DevicePlugin())
        spec = container_spec(
            services,
            {"image": {"uri": "docker://alpine:3"}, "command": ["app"]},
            config=ImageConfig(env=("PATH=/bin",)),
        )

    assert spec.command == ["app"]
    assert spec.env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert not [name for name in spec.env if name.startswith("__fb_")]


def test_an_image_without_env_scripts_runs_its_command_unwrapped(tmp_path: Path) -> None:
    with node_services(tmp_path) as services:
        spec = container_spec(
            services,
            {"image": IMAGE, "command": ["app", "x"]},
            config=ImageConfig(env=("PATH=/bin",), env_scripts=()),
        )

    assert spec.command == ["app", "x"]


def test_without_a_shell_the_command_runs_unwrapped_and_a_warning_names_the_scripts(
    tmp_path: Path,
) -> None:
    output: list[tuple[int, str, bytes]] = []
    config = ImageConfig(env_scripts=("90-environment.sh", "95-apps.sh"), env_shell=False)

    with node_services(tmp_path) as services:
        spec = container_spec(
            services,
            {"image": IMAGE, "command": ["app"]},
            config=config,
            sink=lambda *chunk: output.append(chunk),
        )

    assert spec.command == ["app"]
    (warning,) = _warnings(output)
    assert "90-environment.sh, 95-apps.sh" in warning
    assert "were not applied" in warning and "/bin/sh" in warning


def test_a_sif_converted_before_scripts_were_looked_for_says_so_in_a_warning(
    tmp_path: Path,
) -> None:
    output: list[tuple[int, str, bytes]] = []

    with node_services(tmp_path) as services:
        spec = container_spec(
            services,
            {"image": IMAGE, "command": ["app"]},
            config=ImageConfig(env=("PATH=/bin",)),
            sink=lambda *chunk: output.append(chunk),
        )

    assert spec.command == ["app"]
    (warning,) = _warnings(output)
    assert IMAGE["uri"] in warning and "not applied" in warning


def test_a_docker_image_nobody_looked_at_for_scripts_runs_without_a_word(
    tmp_path: Path,
) -> None:
    output: list[tuple[int, str, bytes]] = []

    with node_services(tmp_path) as services:
        spec = container_spec(
            services,
            {"image": {"uri": "docker://alpine:3"}, "command": ["app"]},
            config=ImageConfig(env=("PATH=/bin",)),
            sink=lambda *chunk: output.append(chunk),
        )

    assert spec.command == ["app"]
    assert output == []
