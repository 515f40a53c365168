"""Where the reference workflow examples are: in the ``shared`` folder beside the repository
(a module of its own: test modules import it by a name no other folder uses)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = (REPO_ROOT / ".." / "shared" / "reference" / "workflow-examples").resolve()
EXAMPLE_FILES = sorted(p for p in EXAMPLES_DIR.glob("*") if p.suffix in (".yaml", ".yml", ".fz"))
V1_EXAMPLE_FILES = [p for p in EXAMPLE_FILES if p.read_text().startswith("version: v1")]
