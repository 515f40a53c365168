/* The container's root: an overlay whose lower layer is the shared, read-only image mount and
 * whose upper layer is a private tmpfs (or the job's scratch directory), with /proc, a
 * read-only /sys, /dev, /tmp, /etc/hosts, /etc/resolv.conf and the job's binds; then
 * pivot_root into it and detach the host's tree. Runs in the cloned child: see container.h. */
#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "container.h"

#define PATH_BYTES 4096

static int setup_binds(int rootfd, const struct fbrt_spec *spec, struct fbrt_error *e) {
    for (int i = 0; i < spec->nbinds; i++) {
        const struct fbrt_bind *b = &spec->binds[i];
        struct stat st;
        if (stat(b->src, &st) < 0)
            return fbrt_fail(e, errno, "stat bind source %s", b->src);
        int fd = fbrt_open_in_root(rootfd, b->dst, S_ISDIR(st.st_mode), e);
        if (fd < 0)
            return fd;
        int rc = fbrt_mount_at(b->src, fd, b->dst, NULL, MS_BIND | MS_REC, NULL, e);
        close(fd);
        if (rc < 0)
            return rc;
        if (b->readonly) {
            /* Resolve again: the fresh lookup lands on the bind mount just made. */
            fd = fbrt_open_in_root(rootfd, b->dst, S_ISDIR(st.st_mode), e);
            if (fd < 0)
                return fd;
            rc = fbrt_mount_at(NULL, fd, b->dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL,
                               e);
            close(fd);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* BASE/NAME into OUT (PATH_BYTES), then mkdir it (an existing directory is fine). */
static int make_dir_in(char *out, const char *base, const char *name, mode_t mode,
                       struct fbrt_error *e) {
    if (fbrt_format(out, PATH_BYTES, "%s/%s", base, name) < 0)
        return fbrt_fail(e, ENAMETOOLONG, "directory %s in %s", name, base);
    if (mkdir(out, mode) < 0 && errno != EEXIST)
        return fbrt_fail(e, errno, "mkdir %s", out);
    return 0;
}

/* Mount the overlay on BASE/root (its path into ROOT); returns an O_PATH descriptor of it. */
static int mount_overlay(const struct fbrt_spec *spec, char *root, struct fbrt_error *e) {
    const char *base = spec->scratch;
    if (!base) {
        if (mount("tmpfs", spec->work_mnt, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
            return fbrt_fail(e, errno, "mount tmpfs on %s", spec->work_mnt);
        base = spec->work_mnt;
    }
    char upper[PATH_BYTES], work[PATH_BYTES], options[2 * PATH_BYTES];
    int rc = make_dir_in(upper, base, "upper", 0755, e);
    if (rc == 0)
        rc = make_dir_in(work, base, "work", 0700, e);
    if (rc == 0)
        rc = make_dir_in(root, base, "root", 0755, e);
    if (rc < 0)
        return rc;
    if (fbrt_format(options, sizeof(options), "lowerdir=%s,upperdir=%s,workdir=%s", spec->lower,
                    upper, work) < 0)
        return fbrt_fail(e, ENAMETOOLONG, "overlay options for %s", spec->lower);
    if (mount("overlay", root, "overlay", 0, options) < 0)
        return fbrt_fail(e, errno, "mount overlay %s on %s", options, root);
    int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return fbrt_fail(e, errno, "open container root %s", root);
    return rootfd;
}

/* Everything mounted or written inside the new root before pivoting into it. */
static int populate(int rootfd, const struct fbrt_spec *spec, struct fbrt_error *e) {
    int rc = fbrt_mount_in_root(rootfd, "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
                                e);
    /* Read-only, as Docker and Apptainer give it: MPI transports (UCX, libfabric), hwloc and
     * GPU stacks find network interfaces and devices there. */
    if (rc == 0)
        rc = fbrt_mount_in_root(rootfd, "/sys", "sysfs",
                                MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, e);
    if (rc == 0)
        rc = fbrt_devices_setup(rootfd, spec, e);
    if (rc == 0)
        rc = fbrt_mount_in_root(rootfd, "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", e);
    if (rc == 0 && spec->hosts)
        rc = fbrt_write_in_root(rootfd, "/etc", "hosts", spec->hosts, e);
    if (rc == 0 && spec->resolv)
        rc = fbrt_write_in_root(rootfd, "/etc", "resolv.conf", spec->resolv, e);
    if (rc == 0)
        rc = setup_binds(rootfd, spec, e);
    /* The working directory exists, as Docker makes it: an image's WorkingDir need not be in
     * its tree. Made by root (0755) after the binds, so that one inside a bind lands there. */
    if (rc == 0 && spec->cwd) {
        int fd = fbrt_open_in_root(rootfd, spec->cwd, 1, e);
        if (fd < 0)
            rc = fd;
        else
            close(fd);
    }
    return rc;
}

int fbrt_rootfs_enter(const struct fbrt_spec *spec, struct fbrt_error *e) {
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return fbrt_fail(e, errno, "make the container's mount tree private");
    char root[PATH_BYTES];
    int rootfd = mount_overlay(spec, root, e);
    if (rootfd < 0)
        return rootfd;
    int rc = populate(rootfd, spec, e);
    if (rc == 0 && fchdir(rootfd) < 0)
        rc = fbrt_fail(e, errno, "chdir %s", root);
    close(rootfd);
    if (rc < 0)
        return rc;
    /* pivot_root(".", ".") stacks the old root under the new one; detaching it leaves the
     * host's mounts out of the container entirely. */
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        return fbrt_fail(e, errno, "pivot_root into %s", root);
    if (umount2(".", MNT_DETACH) < 0)
        return fbrt_fail(e, errno, "detach the host root after pivot_root");
    if (chdir("/") < 0)
        return fbrt_fail(e, errno, "chdir / in the container");
    return 0;
}
