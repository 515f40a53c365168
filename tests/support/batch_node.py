"""A stand-in for a site's batch system, for the example site provisioner's tests: "submitting
a job" starts a Substrate on this machine from the node's user data, detached, and prints its
process id as the job id (as ``sbatch --parsable`` prints one).

``python batch_node.py USER_DATA_FILE BASE_CONFIG WORK_DIR [PID_FILE]`` — BASE_CONFIG is a
Fuzzball configuration whose sections other than ``substrate`` the node also gets (image
mirrors); PID_FILE, when given, receives the Substrate's process id (what a power-off command
of the on-prem tests kills).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from fuzzball_core.drivers import NodeBootstrap

SUBSTRATE_MAIN = "from fuzzball_core.substrate.main import main; main()"


def main(user_data: str, base_config: str, work_dir: str, pid_file: str = "") -> None:
    bootstrap = NodeBootstrap.parse(Path(user_data).read_text())
    home = Path(work_dir) / bootstrap.node_name
    home.mkdir(parents=True)
    base = yaml.safe_load(Path(base_config).read_text()) or {}
    document = {k: v for k, v in base.items() if k != "substrate"}
    document.update(bootstrap.config_document(ca_file=str(home / "ca.pem")))
    document["substrate"].update(
        {"work-dir": str(home / "work"), "metrics-listen": "", "node-exporter-listen": ""}
    )
    if "tls" in base:
        document["tls"] = {**base["tls"], **document.get("tls", {})}
    config = home / "config.yaml"
    descriptor = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        yaml.safe_dump(document, out)
    with (home / "substrate.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", SUBSTRATE_MAIN, "--config", str(config), "serve"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    if pid_file:
        Path(pid_file).write_text(str(process.pid))
    print(process.pid)


if __name__ == "__main__":
    main(*sys.argv[1:5])
