"""An image's config (Env, Entrypoint, Cmd, WorkingDir, User) travels with it: on the pin
Orchestrate checks a job against, and beside the cached EROFS file a node runs it from."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.oci_pusher import Pusher, busybox_entries, layer
from support.registry_server import RegistryServer
from support.sif_writer import write_sif

from fuzzball_core.drivers import ImageConfig, image_config_path
from fuzzball_core.errors import InvalidArgument
from fuzzball_plugins.images.docker_backend import DockerBackend
from fuzzball_plugins.images.oras_backend import SIF_CONFIG, SIF_LAYER, OrasBackend
from fuzzball_runtime.erofs import ImageCache

CONFIG = {"platform": "linux/amd64"}
FULL = {
    "Env": ["PATH=/opt/app/bin:/bin", "GREETING=from the image"],
    "Entrypoint": ["/bin/sh", "-c"],
    "Cmd": ["echo hello"],
    "WorkingDir": "/srv/app",
    "User": "app:staff",
}
FULL_CONFIG = ImageConfig(
    env=("PATH=/opt/app/bin:/bin", "GREETING=from the image"),
    entrypoint=("/bin/sh", "-c"),
    cmd=("echo hello",),
    working_dir="/srv/app",
    user="app:staff",
)


@pytest.fixture(scope="module")
def config_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """A registry holding ``tests/full`` (every field set) and ``tests/bare`` (none)."""
    server = RegistryServer(tmp_path_factory.mktemp("config-registry"))
    server.start()
    pusher = Pusher(server.url)
    try:
        base = layer(busybox_entries())
        pusher.push_image("tests/full", "1", [base], config_extra=FULL)
        pusher.push_image("tests/bare", "1", [base], config_extra={"Cmd": None, "Env": None})
    finally:
        pusher.close()
    yield server
    server.kill()


def test_a_docker_pin_carries_the_image_config(config_registry: RegistryServer) -> None:
    image = DockerBackend(CONFIG).resolve(f"docker://{config_registry.host}/tests/full:1")

    assert image.config == FULL_CONFIG


def test_an_image_without_entrypoint_or_cmd_runs_nothing_of_its_own(
    config_registry: RegistryServer,
) -> None:
    image = DockerBackend(CONFIG).resolve(f"docker://{config_registry.host}/tests/bare:1")

    assert image.config == ImageConfig()
    assert image.config is not None and not image.config.runs_something


def test_a_fetched_docker_image_keeps_its_config_beside_the_erofs_file(
    config_registry: RegistryServer, cache_dir: Path
) -> None:
    backend = DockerBackend(CONFIG)
    image = backend.resolve(f"docker://{config_registry.host}/tests/full:1")

    erofs = backend.fetch(image, cache_dir)

    assert image_config_path(erofs) == erofs.with_name(erofs.stem + ".config.json")
    assert ImageConfig.read_beside(erofs) == FULL_CONFIG


def test_an_image_converted_before_configs_were_kept_has_none(cache_dir: Path) -> None:
    erofs = cache_dir / "sha256-0123.erofs"
    erofs.write_bytes(b"converted long ago")

    assert ImageConfig.read_beside(erofs) is None


def test_evicting_an_image_removes_its_config_too(tmp_path: Path) -> None:
    cache = ImageCache(tmp_path / "images", max_bytes=10)
    old, new = cache.path_for("sha256:aa"), cache.path_for("sha256:bb")
    for path in (old, new):
        path.write_bytes(b"x" * 8)
        ImageConfig(user="app").write_beside(path)
    os.utime(old, (1, 1))

    assert cache.evict(keep=new) == [old]
    assert not image_config_path(old).exists()
    assert ImageConfig.read_beside(new) == ImageConfig(user="app")


def test_a_config_document_or_its_config_object_read_alike() -> None:
    whole = {"architecture": "amd64", "config": FULL}

    assert ImageConfig.from_oci(whole) == ImageConfig.from_oci(FULL) == FULL_CONFIG


def test_a_malformed_config_field_is_refused_naming_it() -> None:
    with pytest.raises(InvalidArgument, match="image config: expected a list of strings"):
        ImageConfig.from_oci({"Entrypoint": "/bin/sh -c"})


# -- SIF images (oras://) ---------------------------------------------------------------------


def _push_sif(registry: RegistryServer, tmp_path: Path, tag: str, **sif: object) -> str:
    root = tmp_path / f"rootfs-{tag}"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "busybox").write_bytes(Path("/bin/busybox").read_bytes())
    out = write_sif(root, tmp_path / f"{tag}.sif", **sif)  # type: ignore[arg-type]
    pusher = Pusher(registry.url)
    try:
        pusher.push_artifact(
            "tests/sifconfig",
            tag,
            out.read_bytes(),
            media_type=SIF_LAYER,
            config_media_type=SIF_CONFIG,
            title=out.name,
        )
    finally:
        pusher.close()
    return f"oras://{registry.host}/tests/sifconfig:{tag}"


def test_a_sif_pin_carries_its_oci_config_object(
    config_registry: RegistryServer, tmp_path: Path
) -> None:
    uri = _push_sif(
        config_registry,
        tmp_path,
        "oci",
        json_objects={"oci-config.json": json.dumps(FULL).encode()},
    )

    assert OrasBackend(CONFIG).resolve(uri).config == FULL_CONFIG


def test_a_sif_runscript_replaces_the_oci_entrypoint_and_cmd_as_apptainer_run_does(
    config_registry: RegistryServer, tmp_path: Path
) -> None:
    uri = _push_sif(
        config_registry,
        tmp_path,
        "runscript",
        deffile=b"bootstrap: docker\nfrom: busybox\n\n%runscript\n    echo running\n",
        json_objects={"oci-config.json": json.dumps(FULL).encode()},
    )

    config = OrasBackend(CONFIG).resolve(uri).config

    assert config is not None
    assert (config.entrypoint, config.cmd) == (None, ("/.singularity.d/runscript",))
    assert config.env == FULL_CONFIG.env and config.user == "app:staff"


def test_a_sif_without_config_or_runscript_has_an_empty_config(
    config_registry: RegistryServer, tmp_path: Path
) -> None:
    uri = _push_sif(
        config_registry, tmp_path, "plain", deffile=b"bootstrap: docker\n%runscript\n  # none\n"
    )

    assert OrasBackend(CONFIG).resolve(uri).config == ImageConfig()


def test_a_fetched_sif_keeps_its_config_beside_the_erofs_file(
    config_registry: RegistryServer, tmp_path: Path, cache_dir: Path
) -> None:
    uri = _push_sif(
        config_registry,
        tmp_path,
        "fetch",
        json_objects={"oci-config.json": json.dumps(FULL).encode()},
    )
    backend = OrasBackend(CONFIG)

    erofs = backend.fetch(backend.resolve(uri), cache_dir)

    # its tree was looked at for Apptainer environment scripts, and has none
    assert ImageConfig.read_beside(erofs) == dataclasses.replace(FULL_CONFIG, env_scripts=())


def test_a_fetched_sif_keeps_its_apptainer_env_scripts_in_the_config_beside_it(
    config_registry: RegistryServer, tmp_path: Path, cache_dir: Path
) -> None:
    root = tmp_path / "rootfs-env"
    (root / ".singularity.d/env").mkdir(parents=True)
    (root / ".singularity.d/env/90-environment.sh").write_text("export PATH=/opt/app/bin:$PATH\n")
    (root / ".singularity.d/env/99-base.sh").write_text("PS1='Apptainer> '\n")
    uri = _push_sif(
        config_registry,
        tmp_path,
        "env",
        json_objects={"oci-config.json": json.dumps(FULL).encode()},
    )
    backend = OrasBackend(CONFIG)

    erofs = backend.fetch(backend.resolve(uri), cache_dir)

    kept = ImageConfig.read_beside(erofs)
    assert kept is not None
    assert kept.env_scripts == ("90-environment.sh", "99-base.sh")
    assert kept.env_shell is False  # _push_sif's tree has a busybox but no /bin/sh
    assert (kept.env, kept.cmd) == (FULL_CONFIG.env, FULL_CONFIG.cmd)
