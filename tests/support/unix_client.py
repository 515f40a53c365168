"""A static unix-socket client for the runtime tests' busybox image (whose ``nc`` speaks
TCP only): ``unix-client PATH`` connects to the stream socket at ``PATH`` and copies what
it reads to stdout. Compiled on demand with the host's C compiler."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = r"""
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (argc != 2 || strlen(argv[1]) >= sizeof(addr.sun_path)) {
        fprintf(stderr, "usage: unix-client PATH\n");
        return 2;
    }
    strcpy(addr.sun_path, argv[1]);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        perror("connect");
        return 1;
    }
    char buf[256];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        fwrite(buf, 1, (size_t)n, stdout);
    return 0;
}
"""


def build_unix_client(directory: Path) -> Path:
    """The client, compiled statically into ``directory``; skips the test without a C
    compiler that can link statically."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("needs a C compiler to build the unix-socket client")
    source = directory / "unix-client.c"
    source.write_text(SOURCE)
    binary = directory / "unix-client"
    result = subprocess.run(
        [compiler, "-static", "-O", "-o", str(binary), str(source)], capture_output=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot link a static binary: {result.stderr.decode(errors='replace')}")
    return binary
