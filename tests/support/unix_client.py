"""A static unix-socket client for the runtime tests' busybox image (whose ``nc`` speaks
TCP only): ``unix-client PATH`` connects to the stream socket at ``PATH`` and copies what
it reads to stdout."""

from __future__ import annotations

from pathlib import Path

from support.static_program import build_static_program

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
    return build_static_program(directory, "unix-client", SOURCE)
