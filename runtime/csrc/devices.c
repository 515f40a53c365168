/* The container's /dev: a small tmpfs with the standard nodes and links, a private devpts,
 * and the host devices the job asked for at the same paths. Runs in the cloned child. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "container.h"

struct dev_node {
    const char *name;
    unsigned int major, minor;
};

static const struct dev_node STANDARD_DEVICES[] = {
    {"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9},
    {"tty", 5, 0},
};

static const char *const DEV_LINKS[][2] = {
    {"/proc/self/fd", "fd"},          {"/proc/self/fd/0", "stdin"},
    {"/proc/self/fd/1", "stdout"},    {"/proc/self/fd/2", "stderr"},
    {"pts/ptmx", "ptmx"},
};

int fbrt_devices_stat(const struct fbrt_spec *spec, struct fbrt_host_device *out,
                      struct fbrt_error *e) {
    for (int i = 0; i < spec->ndevices; i++) {
        const char *path = spec->devices[i];
        struct stat st;
        if (strncmp(path, "/dev/", 5) != 0 || strstr(path, "/../"))
            return fbrt_fail(e, EINVAL, "device %s: not a path under /dev", path);
        if (stat(path, &st) < 0)
            return fbrt_fail(e, errno, "stat device %s", path);
        if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
            return fbrt_fail(e, ENODEV, "device %s: not a character or block device", path);
        out[i].mode = st.st_mode & (S_IFMT | 07777);
        out[i].rdev = st.st_rdev;
        out[i].uid = st.st_uid;
        out[i].gid = st.st_gid;
    }
    return 0;
}

/* Recreate host device node PATH (under /dev, checked by fbrt_devices_stat) at the same path
 * in the container, with the type, numbers, owner and mode HOST found on the host. */
static int add_host_device(int rootfd, const char *path, const struct fbrt_host_device *host,
                           struct fbrt_error *e) {
    /* Make the parent directories, then the node itself at the same path. */
    char parent[4096];
    if (fbrt_format(parent, sizeof(parent), "%s", path) < 0)
        return fbrt_fail(e, ENAMETOOLONG, "device %s", path);
    char *slash = strrchr(parent, '/');
    *slash = '\0';
    int pfd = fbrt_open_in_root(rootfd, parent, 1, e);
    if (pfd < 0)
        return pfd;
    int made = mknodat(pfd, slash + 1, host->mode, host->rdev);
    int err = errno;
    if (made == 0 && fchownat(pfd, slash + 1, host->uid, host->gid, 0) < 0) {
        made = -1;
        err = errno;
    }
    close(pfd);
    if (made < 0)
        return fbrt_fail(e, err, "create device node %s in the container", path);
    return 0;
}

int fbrt_devices_setup(int rootfd, const struct fbrt_spec *spec,
                       const struct fbrt_host_device *host, struct fbrt_error *e) {
    int rc = fbrt_mount_in_root(rootfd, "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
                               "mode=0755,size=65536k", e);
    if (rc < 0)
        return rc;
    int dev = fbrt_open_in_root(rootfd, "/dev", 1, e);
    if (dev < 0)
        return dev;
    for (size_t i = 0; i < sizeof(STANDARD_DEVICES) / sizeof(STANDARD_DEVICES[0]); i++) {
        const struct dev_node *d = &STANDARD_DEVICES[i];
        if (mknodat(dev, d->name, S_IFCHR | 0666, makedev(d->major, d->minor)) < 0) {
            rc = fbrt_fail(e, errno, "mknod /dev/%s in the container", d->name);
            goto out;
        }
    }
    for (size_t i = 0; i < sizeof(DEV_LINKS) / sizeof(DEV_LINKS[0]); i++) {
        if (symlinkat(DEV_LINKS[i][0], dev, DEV_LINKS[i][1]) < 0) {
            rc = fbrt_fail(e, errno, "symlink /dev/%s in the container", DEV_LINKS[i][1]);
            goto out;
        }
    }
    if (mkdirat(dev, "shm", 01777) < 0 || mkdirat(dev, "pts", 0755) < 0) {
        rc = fbrt_fail(e, errno, "mkdir /dev/shm and /dev/pts in the container");
        goto out;
    }
    /* On the directory just made, named from /dev's own descriptor: this tmpfs is the
     * child's alone until the command starts, so nothing can have put a link there, and the
     * in-root open (and its close) that a path from the container's root needs is spared. */
    if (fchdir(dev) < 0 || mount("devpts", "pts", "devpts", MS_NOSUID | MS_NOEXEC,
                                 "newinstance,ptmxmode=0666,mode=0620") < 0) {
        rc = fbrt_fail(e, errno, "mount devpts devpts on /dev/pts");
        goto out;
    }
    for (int i = 0; i < spec->ndevices && rc == 0; i++)
        rc = add_host_device(rootfd, spec->devices[i], &host[i], e);
out:
    close(dev);
    return rc;
}
