"""Where the reference workflow examples are: in the ``shared`` folder beside the repository
(a module of its own: test modules import it by a name no other folder uses).

The folder is not part of the repository: CI lays it beside the clone, a bare clone has none.
Without it every list here is empty, and ``conftest.py`` skips the tests that read them.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = (REPO_ROOT / ".." / "shared" / "reference" / "workflow-examples").resolve()
EXAMPLE_FILES = sorted(p for p in EXAMPLES_DIR.glob("*") if p.suffix in (".yaml", ".yml", ".fz"))
V1_EXAMPLE_FILES = [p for p in EXAMPLE_FILES if p.read_text().startswith("version: v1")]

#: Why the tests that read the examples are skipped; None when the examples are there.
MISSING_REASON = (
    None
    if EXAMPLE_FILES
    else f"the reference workflow examples are not in {EXAMPLES_DIR} (shared/ beside the clone)"
)
