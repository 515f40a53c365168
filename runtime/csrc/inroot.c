/* Paths inside the container's new root, resolved with openat2(RESOLVE_IN_ROOT) so that
 * symlinks in the image stay inside it. Runs in the cloned child: see container.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "container.h"

static int sys_openat2(int dirfd, const char *path, int flags, unsigned int mode) {
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)(flags | O_CLOEXEC);
    how.mode = mode;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

int fbrt_open_in_root(int rootfd, const char *path, int want_dir, struct fbrt_error *e) {
    char prefix[4096];
    while (*path == '/')
        path++;
    size_t len = strlen(path);
    if (len >= sizeof(prefix))
        return fbrt_fail(e, ENAMETOOLONG, "container path /%s", path);
    /* A path that exists (most: /tmp, /dev, /dev/pts, a bind's target in a usual image) is
     * opened in one call, resolved in the root as the walk below resolves it; the walk, which
     * opens the root and then every prefix, runs only where something is missing or wrong,
     * and makes or reports it as before. */
    if (len > 0) {
        int whole = sys_openat2(rootfd, path, O_PATH | (want_dir ? O_DIRECTORY : 0), 0);
        if (whole >= 0)
            return whole;
    }
    int parent = sys_openat2(rootfd, ".", O_PATH | O_DIRECTORY, 0);
    if (parent < 0)
        return fbrt_fail(e, errno, "open container root");
    size_t start = 0;
    while (start < len) {
        size_t end = start;
        while (end < len && path[end] != '/')
            end++;
        int last = end >= len || path[end + 1] == '\0';
        memcpy(prefix, path, end);
        prefix[end] = '\0';
        const char *name = prefix + start;
        int dir = !last || want_dir;
        int fd = sys_openat2(rootfd, prefix, O_PATH | (dir ? O_DIRECTORY : 0), 0);
        if (fd < 0 && errno == ENOENT) {
            if (dir) {
                if (mkdirat(parent, name, 0755) < 0 && errno != EEXIST) {
                    int rc = fbrt_fail(e, errno, "mkdir /%s in the container", prefix);
                    close(parent);
                    return rc;
                }
            } else {
                int f = openat(parent, name, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
                if (f < 0) {
                    int rc = fbrt_fail(e, errno, "create /%s in the container", prefix);
                    close(parent);
                    return rc;
                }
                close(f);
            }
            fd = sys_openat2(rootfd, prefix, O_PATH | (dir ? O_DIRECTORY : 0), 0);
        }
        if (fd < 0) {
            int rc = fbrt_fail(e, errno, "open /%s in the container", prefix);
            close(parent);
            return rc;
        }
        close(parent);
        parent = fd;
        start = end + 1;
        while (start < len && path[start] == '/')
            start++;
    }
    return parent;
}

int fbrt_mount_at(const char *source, int target_fd, const char *where, const char *fstype,
                  unsigned long flags, const char *data, struct fbrt_error *e) {
    /* On ".", not on /proc/self/fd/N: the template mount namespace has no /proc. */
    if (fchdir(target_fd) < 0)
        return fbrt_fail(e, errno, "chdir to %s", where);
    if (mount(source, ".", fstype, flags, data) < 0)
        return fbrt_fail(e, errno, "mount %s %s on %s", fstype ? fstype : "bind",
                         source ? source : "", where);
    return 0;
}

int fbrt_mount_in_root(int rootfd, const char *where, const char *fstype, unsigned long flags,
                       const char *data, struct fbrt_error *e) {
    int fd = fbrt_open_in_root(rootfd, where, 1, e);
    if (fd < 0)
        return fd;
    int rc = fbrt_mount_at(fstype, fd, where, fstype, flags, data, e);
    close(fd);
    return rc;
}

int fbrt_write_in_root(int rootfd, const char *dir, const char *name, const char *content,
                       struct fbrt_error *e) {
    int dirfd = fbrt_open_in_root(rootfd, dir, 1, e);
    if (dirfd < 0)
        return dirfd;
    unlinkat(dirfd, name, 0);
    int fd = openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    int rc = 0;
    if (fd < 0) {
        rc = fbrt_fail(e, errno, "create %s/%s in the container", dir, name);
    } else {
        size_t len = strlen(content);
        if (write(fd, content, len) != (ssize_t)len)
            rc = fbrt_fail(e, errno, "write %s/%s in the container", dir, name);
        close(fd);
    }
    close(dirfd);
    return rc;
}
