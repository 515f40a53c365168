"""Look inside an EROFS file the way a node would see it, by extracting it with fsck.erofs."""

from __future__ import annotations

import subprocess
from pathlib import Path


def extract_erofs(image: Path, into: Path) -> Path:
    """Extract ``image`` (checking every file's encoding) into the new directory ``into``."""
    subprocess.run(
        ["fsck.erofs", f"--extract={into}", "--preserve", str(image)],
        check=True,
        capture_output=True,
    )
    return into
