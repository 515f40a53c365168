/* The container's root, built in the cloned child (see container.h), in three steps:
 *
 * 1. Still in the agent's mount namespace, the child takes from the host what the container
 *    needs, mounting nothing there: the overlay (the shared image mount as its lower layer,
 *    its upper layer on a new tmpfs or on the job's scratch directory) made with fsopen and
 *    fsmount, so that it is attached nowhere yet; each bind's source as a detached copy
 *    (open_tree); each requested host device's type, numbers and owner.
 * 2. It enters the template mount namespace (fbrt_mnt_template_open) and copies it: setns,
 *    then unshare. That namespace holds one empty tmpfs, so nothing of the host is copied.
 * 3. It attaches the overlay over that root, mounts /proc, /sys, /dev and /tmp, attaches the
 *    binds, and chroots into the overlay. /etc/hosts and resolv.conf are written into the
 *    upper layer before the overlay is made (seed_etc), or inside the root after the mounts
 *    where that cannot be done.
 *
 * Before, the child's clone copied the host's mount table (CLONE_NEWNS), made it private,
 * pivoted into the overlay and detached the host's tree again: the detach waited for an
 * expedited RCU grace period (about 2 ms of wall time per start at load 10 on two CPUs), and
 * the copy, the walk and the detach grew with the host's mounts. The template's tmpfs (and
 * the upper layer's) stay under the overlay: the template's is empty and read-only, and
 * /proc/self/mountinfo leaves out mounts outside the process's root.
 *
 * Every descriptor opened here is close-on-exec: the init's exec, or the child's exit on a
 * failure, closes them; the attached mounts hold their own references. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "container.h"

#define PATH_BYTES 4096
/* Bounds of the per-container arrays on the child's stack (256 KiB, see start.c). */
#define MAX_BINDS 1024
#define MAX_DEVICES 1024
/* The container's /tmp, a directory of the upper layer's tmpfs beside "upper" and "work". */
#define TMP_DIR "tmp"

/* A bind's source, copied (open_tree) while the host's paths are still reachable. */
struct bind_tree {
    int fd;
    int dir; /* the source is a directory (the target is made as one) */
};

static int fs_open(const char *fstype, struct fbrt_error *e) {
    int fd = (int)syscall(SYS_fsopen, fstype, FSOPEN_CLOEXEC);
    if (fd < 0)
        return fbrt_fail(e, errno, "fsopen %s", fstype);
    return fd;
}

static int fs_set(int fs, const char *fstype, const char *key, const char *value,
                  struct fbrt_error *e) {
    if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, key, value, 0) < 0)
        return fbrt_fail(e, errno, "%s option %s=%s", fstype, key, value);
    return 0;
}

/* Create the filesystem configured on FS and return a detached mount of it (FS is closed). */
static int fs_mount(int fs, const char *fstype, unsigned int attrs, struct fbrt_error *e) {
    int mnt = -1;
    if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        mnt = fbrt_fail(e, errno, "create the %s filesystem", fstype);
    else if ((mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs)) < 0)
        mnt = fbrt_fail(e, errno, "fsmount %s", fstype);
    close(fs);
    return mnt;
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

/* Write CONTENT as the new file NAME in the directory DIRFD. */
static int write_new_file(int dirfd, const char *name, const char *content,
                          struct fbrt_error *e) {
    int fd = openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return fbrt_fail(e, errno, "create /etc/%s in the container's upper layer", name);
    size_t len = strlen(content);
    int rc = 0;
    if (write(fd, content, len) != (ssize_t)len)
        rc = fbrt_fail(e, errno, "write /etc/%s in the container's upper layer", name);
    close(fd);
    return rc;
}

/* /etc/hosts and /etc/resolv.conf written into the fresh upper layer TMP before the overlay
 * exists, in an upper etc directory with the image's /etc mode and owner: the overlay then
 * merges that directory with the image's and shows these two files over the image's. Written
 * through the overlay instead, each file first copied /etc up (a directory created and its
 * attributes copied in the upper layer, a path walk through the overlay): 0.14 ms of CPU per
 * file (perf). Returns 1 when written, 0 when the image's /etc is not a plain directory
 * (a symlink, say: the files are then written inside the root, resolved as the image
 * resolves them), or -errno. */
static int seed_etc(const struct fbrt_spec *spec, int tmp, struct fbrt_error *e) {
    if (!spec->hosts && !spec->resolv)
        return 0;
    char path[PATH_BYTES];
    if (fbrt_format(path, PATH_BYTES, "%s/etc", spec->lower) < 0)
        return fbrt_fail(e, ENAMETOOLONG, "the image's /etc under %s", spec->lower);
    struct stat st;
    if (lstat(path, &st) < 0) {
        if (errno != ENOENT)
            return fbrt_fail(e, errno, "stat the image's /etc (%s)", path);
        /* As the in-root path would make it: root's, 0755. */
        st.st_mode = S_IFDIR | 0755;
        st.st_uid = 0;
        st.st_gid = 0;
    } else if (!S_ISDIR(st.st_mode)) {
        return 0;
    }
    if (mkdirat(tmp, "upper/etc", st.st_mode & 07777) < 0)
        return fbrt_fail(e, errno, "mkdir /etc in the container's upper layer");
    int etc = openat(tmp, "upper/etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (etc < 0)
        return fbrt_fail(e, errno, "open /etc in the container's upper layer");
    int rc = 0;
    if ((st.st_uid || st.st_gid) && fchown(etc, st.st_uid, st.st_gid) < 0)
        rc = fbrt_fail(e, errno, "chown /etc in the container's upper layer");
    if (rc == 0 && spec->hosts)
        rc = write_new_file(etc, "hosts", spec->hosts, e);
    if (rc == 0 && spec->resolv)
        rc = write_new_file(etc, "resolv.conf", spec->resolv, e);
    close(etc);
    return rc < 0 ? rc : 1;
}

/* The mount points populate() mounts on, made in the fresh upper layer TMP where the image
 * has no such entry: made inside the root instead, through the overlay, each is a negative
 * lookup in every layer, a directory created in the work directory and renamed into the
 * upper one, and a second lookup (perf: about a tenth of the child's CPU before its exec with
 * an image lacking /proc, /sys and /dev, as images built from scratch do). An entry the image
 * has, whatever it is, is left to the in-root path, as is anything this cannot stat. */
static void seed_mount_points(const struct fbrt_spec *spec, int tmp) {
    static const char *const NAMES[] = {"proc", "sys", "dev", "tmp"};
    char path[PATH_BYTES], upper[32];
    for (size_t i = 0; i < sizeof(NAMES) / sizeof(NAMES[0]); i++) {
        struct stat st;
        if (fbrt_format(path, PATH_BYTES, "%s/%s", spec->lower, NAMES[i]) < 0 ||
            lstat(path, &st) == 0 || errno != ENOENT)
            continue;
        /* As the in-root path makes one: root's, 0755 (the child's umask is 0). A failure
         * leaves it to that path. */
        if (fbrt_format(upper, sizeof(upper), "upper/%s", NAMES[i]) == 0)
            (void)mkdirat(tmp, upper, 0755);
    }
}

/* The upper and work directories, their paths into UPPER and WORK: on the job's scratch
 * directory (*TMP = -1), or on a new tmpfs attached nowhere yet, whose detached mount is
 * *TMP (the paths go through this process's descriptor of it). */
static int upper_layer(const struct fbrt_spec *spec, char *upper, char *work, int *tmp,
                       int *etc_seeded, struct fbrt_error *e) {
    *tmp = -1;
    *etc_seeded = 0;
    if (spec->scratch) {
        int rc = make_dir_in(upper, spec->scratch, "upper", 0755, e);
        return rc < 0 ? rc : make_dir_in(work, spec->scratch, "work", 0700, e);
    }
    int fs = fs_open("tmpfs", e);
    if (fs < 0)
        return fs;
    int rc = fs_set(fs, "tmpfs", "mode", "0755", e);
    if (rc < 0) {
        close(fs);
        return rc;
    }
    *tmp = fs_mount(fs, "tmpfs", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, e);
    if (*tmp < 0)
        return *tmp;
    /* Beside the overlay's directories, the container's /tmp (TMP_DIR, attached by
     * attach_tmp): one tmpfs for both instead of a superblock of its own for /tmp. */
    if (mkdirat(*tmp, "upper", 0755) < 0 || mkdirat(*tmp, "work", 0700) < 0 ||
        mkdirat(*tmp, TMP_DIR, 01777) < 0)
        return fbrt_fail(e, errno, "mkdir the overlay's upper and work directories and /tmp");
    /* Only on a fresh tmpfs: a scratch directory's upper layer may hold a previous run's
     * /etc, which the in-root path handles as the job left it. */
    if ((*etc_seeded = seed_etc(spec, *tmp, e)) < 0)
        return *etc_seeded;
    seed_mount_points(spec, *tmp);
    /* Named relative to the tmpfs as this process's working directory (overlayfs resolves
     * its layers' paths from there): through /proc/self/fd/N each name cost a walk of this
     * new process's /proc directories, none of them in the dentry cache yet (perf: about
     * 2 % of a container's CPU). The root's set-up changes the directory again (setns). */
    if (fchdir(*tmp) < 0)
        return fbrt_fail(e, errno, "enter the container's upper layer tmpfs");
    strcpy(upper, "upper");
    strcpy(work, "work");
    return 0;
}

/* A detached overlay mount of the image (spec->lower) under a private upper layer, whose own
 * detached tmpfs, if any, goes to *TMP (see upper_layer). The layers' paths are resolved
 * now, in the host's namespace (fsconfig looks them up). */
static int make_overlay(const struct fbrt_spec *spec, int *tmp, int *etc_seeded,
                        struct fbrt_error *e) {
    char upper[PATH_BYTES], work[PATH_BYTES];
    int rc = upper_layer(spec, upper, work, tmp, etc_seeded, e);
    if (rc < 0)
        return rc;
    int fs = fs_open("overlay", e);
    if (fs < 0)
        return fs;
    rc = fs_set(fs, "overlay", "lowerdir", spec->lower, e);
    if (rc == 0)
        rc = fs_set(fs, "overlay", "upperdir", upper, e);
    if (rc == 0)
        rc = fs_set(fs, "overlay", "workdir", work, e);
    if (rc < 0) {
        close(fs);
        return rc;
    }
    return fs_mount(fs, "overlay", 0, e);
}

/* Copy each bind's source into TREES, every mount of each copy private, nosuid and nodev
 * (read-only ones made so too) before they are attached. */
static int open_binds(const struct fbrt_spec *spec, struct bind_tree *trees,
                      struct fbrt_error *e) {
    for (int i = 0; i < spec->nbinds; i++) {
        const struct fbrt_bind *b = &spec->binds[i];
        struct stat st;
        if (stat(b->src, &st) < 0)
            return fbrt_fail(e, errno, "stat bind source %s", b->src);
        trees[i].dir = S_ISDIR(st.st_mode);
        trees[i].fd = (int)syscall(SYS_open_tree, AT_FDCWD, b->src,
                                   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (trees[i].fd < 0)
            return fbrt_fail(e, errno, "copy bind source %s (open_tree)", b->src);
        /* Private, all of it: a copy of a shared mount joins the host's peer group, and
         * mounts made inside the container would then appear on the host. Nosuid and nodev,
         * all of it, in the same call, as the image, /tmp and /proc are (and as Apptainer
         * and Podman mount binds and volumes): otherwise a set-user-ID root program a root
         * job leaves on a shared volume makes a later non-root job root in its container,
         * and a device node on a volume opens the host's device past the container's /dev.
         * Nothing needs either through a bind: device nodes come through /dev (devices.c),
         * and the driver daemons' sockets and MPS pipes are no devices. */
        struct mount_attr confined = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                                      .propagation = MS_PRIVATE};
        if (syscall(SYS_mount_setattr, trees[i].fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &confined,
                    sizeof(confined)) < 0)
            return fbrt_fail(e, errno, "make the copy of bind source %s private, nosuid and nodev",
                             b->src);
        /* The top mount only, as a read-only bind remount does: mounts below it keep theirs. */
        struct mount_attr readonly = {.attr_set = MOUNT_ATTR_RDONLY};
        if (b->readonly && syscall(SYS_mount_setattr, trees[i].fd, "", AT_EMPTY_PATH, &readonly,
                                   sizeof(readonly)) < 0)
            return fbrt_fail(e, errno, "make bind source %s read-only", b->src);
    }
    return 0;
}

static int attach_binds(int rootfd, const struct fbrt_spec *spec,
                        const struct bind_tree *trees, struct fbrt_error *e) {
    for (int i = 0; i < spec->nbinds; i++) {
        const char *dst = spec->binds[i].dst;
        int fd = fbrt_open_in_root(rootfd, dst, trees[i].dir, e);
        if (fd < 0)
            return fd;
        int rc = 0;
        if (syscall(SYS_move_mount, trees[i].fd, "", fd, "",
                    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
            rc = fbrt_fail(e, errno, "bind %s on %s", spec->binds[i].src, dst);
        close(fd);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The container's /tmp from the upper layer's tmpfs TMP (attached under the overlay by now,
 * so in this namespace): a bind of its TMP_DIR directory, sticky and world-writable like the
 * tmpfs it replaces, with that tmpfs' nosuid and nodev. The directory sits beside the
 * overlay's upper and work directories, out of the overlay's sight, and the bind's root is
 * that directory: nothing above it is reachable from the container. Its files count
 * towards the one tmpfs' size (half the memory by default, as /tmp's was), and the memory
 * cgroup bounds both as before. */
static int attach_tmp(int rootfd, int tmp, struct fbrt_error *e) {
    int tree = (int)syscall(SYS_open_tree, tmp, TMP_DIR, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (tree < 0)
        return fbrt_fail(e, errno, "copy the upper layer's /tmp directory (open_tree)");
    int rc = 0;
    int fd = fbrt_open_in_root(rootfd, "/tmp", 1, e);
    if (fd < 0)
        rc = fd;
    else if (syscall(SYS_move_mount, tree, "", fd, "",
                     MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        rc = fbrt_fail(e, errno, "attach /tmp in the container");
    if (fd >= 0)
        close(fd);
    close(tree);
    return rc;
}

/* Everything mounted or written inside the new root before entering it. */
static int populate(int rootfd, int tmp, const struct fbrt_spec *spec,
                    const struct bind_tree *trees, const struct fbrt_host_device *devices,
                    int etc_seeded, struct fbrt_error *e) {
    int rc = fbrt_mount_in_root(rootfd, "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
                                e);
    /* Read-only, as Docker and Apptainer give it: MPI transports (UCX, libfabric), hwloc and
     * GPU stacks find network interfaces and devices there. */
    if (rc == 0)
        rc = fbrt_mount_in_root(rootfd, "/sys", "sysfs",
                                MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, e);
    if (rc == 0)
        rc = fbrt_devices_setup(rootfd, spec, devices, e);
    if (rc == 0)
        rc = tmp >= 0 ? attach_tmp(rootfd, tmp, e)
                      : fbrt_mount_in_root(rootfd, "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
                                           "mode=1777", e);
    if (rc == 0 && spec->hosts && !etc_seeded)
        rc = fbrt_write_in_root(rootfd, "/etc", "hosts", spec->hosts, e);
    if (rc == 0 && spec->resolv && !etc_seeded)
        rc = fbrt_write_in_root(rootfd, "/etc", "resolv.conf", spec->resolv, e);
    if (rc == 0)
        rc = attach_binds(rootfd, spec, trees, e);
    /* The working directory exists, as Docker makes it: an image's WorkingDir need not be in
     * its tree. Made by root (0755) after the binds, so that one inside a bind lands there. */
    if (rc == 0 && spec->cwd && strcmp(spec->cwd, "/") != 0) { /* the root is there */
        int fd = fbrt_open_in_root(rootfd, spec->cwd, 1, e);
        if (fd < 0)
            rc = fd;
        else
            close(fd);
    }
    return rc;
}

int fbrt_rootfs_enter(const struct fbrt_spec *spec, int template_fd, struct fbrt_error *e) {
    if (spec->nbinds > MAX_BINDS || spec->ndevices > MAX_DEVICES)
        return fbrt_fail(e, E2BIG, "%d binds and %d devices (at most %d and %d)", spec->nbinds,
                         spec->ndevices, MAX_BINDS, MAX_DEVICES);
    struct bind_tree trees[spec->nbinds > 0 ? spec->nbinds : 1];
    struct fbrt_host_device devices[spec->ndevices > 0 ? spec->ndevices : 1];
    int rc = open_binds(spec, trees, e);
    if (rc == 0)
        rc = fbrt_devices_stat(spec, devices, e);
    if (rc < 0)
        return rc;
    int tmp, etc_seeded;
    int rootfd = make_overlay(spec, &tmp, &etc_seeded, e);
    if (rootfd < 0)
        return rootfd;
    if (setns(template_fd, CLONE_NEWNS) < 0)
        return fbrt_fail(e, errno, "enter the template mount namespace");
    if (unshare(CLONE_NEWNS) < 0)
        return fbrt_fail(e, errno, "copy the template mount namespace");
    /* The upper layer's tmpfs is attached too, under the overlay: closing the last
     * descriptor of a detached mount unmounts it, and that waits for an expedited RCU grace
     * period (perf: one per start, in the init's exec, which closes it); attached, it goes
     * with the namespace. */
    if (tmp >= 0 && syscall(SYS_move_mount, tmp, "", AT_FDCWD, "/", MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return fbrt_fail(e, errno, "attach the upper layer's tmpfs on /");
    if (syscall(SYS_move_mount, rootfd, "", AT_FDCWD, "/", MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return fbrt_fail(e, errno, "attach the container's overlay on /");
    rc = populate(rootfd, tmp, spec, trees, devices, etc_seeded, e);
    if (rc < 0)
        return rc;
    /* chroot, not pivot_root: the namespace's own root is the template's empty tmpfs under
     * the overlay, so there is nothing to detach (and no grace period to wait for). */
    if (fchdir(rootfd) < 0 || chroot(".") < 0 || chdir("/") < 0)
        return fbrt_fail(e, errno, "enter the container's root");
    return 0;
}
