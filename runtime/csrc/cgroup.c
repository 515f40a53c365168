/* cgroup directories and control files (v1 controllers and the v2 unified tree alike). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fbrt_internal.h"

#define CONTROL_PATH_MAX 4096

/* DIR/FILE into PATH (CONTROL_PATH_MAX bytes); a name that does not fit is an error. */
static int control_path(char *path, const char *dir, const char *file, struct fbrt_error *err) {
    if (fbrt_format(path, CONTROL_PATH_MAX, "%s/%s", dir, file) < 0)
        return fbrt_fail(err, ENAMETOOLONG, "cgroup file %s in %s", file, dir);
    return 0;
}

int fbrt_cgroup_create(const char *dir, struct fbrt_error *err) {
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return fbrt_fail(err, errno, "create cgroup %s", dir);
    return 0;
}

int fbrt_cgroup_write(const char *dir, const char *file, const char *value,
                      struct fbrt_error *err) {
    char path[CONTROL_PATH_MAX];
    int rc = control_path(path, dir, file, err);
    if (rc < 0)
        return rc;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return fbrt_fail(err, errno, "open %s", path);
    size_t len = strlen(value);
    ssize_t n = write(fd, value, len);
    int e = errno;
    close(fd);
    if (n < 0)
        return fbrt_fail(err, e, "write '%s' to %s", value, path);
    if ((size_t)n != len)
        return fbrt_fail(err, EIO, "short write of '%s' to %s", value, path);
    return 0;
}

int fbrt_cgroup_read(const char *dir, const char *file, char *buf, int len,
                     struct fbrt_error *err) {
    char path[CONTROL_PATH_MAX];
    int rc = control_path(path, dir, file, err);
    if (rc < 0)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fbrt_fail(err, errno, "open %s", path);
    int total = 0;
    while (total < len - 1) {
        ssize_t n = read(fd, buf + total, (size_t)(len - 1 - total));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            return fbrt_fail(err, e, "read %s", path);
        }
        if (n == 0)
            break;
        total += (int)n;
    }
    buf[total] = '\0';
    close(fd);
    return total;
}

int fbrt_cgroup_open_join(const char *dir, int v1, struct fbrt_error *err) {
    if (!v1) {
        /* Not O_PATH: clone3 takes the group from a descriptor opened for reading. */
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? fbrt_fail(err, errno, "open cgroup %s", dir) : fd;
    }
    char path[CONTROL_PATH_MAX];
    int rc = control_path(path, dir, "tasks", err);
    if (rc < 0)
        return rc;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return fbrt_fail(err, errno, "open %s", path);
    return fd;
}

/* SIGKILL every pid listed in DIR/cgroup.procs; returns how many were listed. */
static int kill_members(const char *dir) {
    char buf[8192];
    if (fbrt_cgroup_read(dir, "cgroup.procs", buf, sizeof(buf), NULL) <= 0)
        return 0;
    int count = 0;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        long pid = strtol(line, NULL, 10);
        if (pid > 0) {
            kill((pid_t)pid, SIGKILL);
            count++;
        }
    }
    return count;
}

int fbrt_cgroup_remove(const char *dir, int timeout_ms, struct fbrt_error *err) {
    struct timespec pause = {0, 1000 * 1000};
    for (int waited = 0;; waited++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY || waited >= timeout_ms)
            return fbrt_fail(err, errno, "remove cgroup %s", dir);
        kill_members(dir);
        nanosleep(&pause, NULL);
    }
}
