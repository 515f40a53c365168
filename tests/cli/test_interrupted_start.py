"""Ctrl-C while the ``fuzzball`` command is still loading prints ``Aborted.``, never a
traceback (the CLI's imports take a second or two)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: runs the console script's entry with the CLI's import interrupted, as a Ctrl-C would
INTERRUPTED_IMPORT = """
import sys

class Interrupting:
    def find_spec(self, name, path=None, target=None):
        if name == "fuzzball_core.cli.main":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupting())
from fuzzball_core.cli.entry import main
main()
"""


def test_ctrl_c_while_the_cli_loads_prints_aborted_without_a_traceback():
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_IMPORT, "workflow", "list"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (130, "Aborted.\n")


def test_the_console_script_is_the_entry_that_catches_ctrl_c():
    setup = (ROOT / "setup.py").read_text()
    assert re.search(r'"fuzzball = fuzzball_core\.cli\.entry:main"', setup)
