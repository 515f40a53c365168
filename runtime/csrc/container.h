/* The parts of container start-up, one file each; not part of the cffi interface.
 *
 *   start.c   the agent's side: pipes, the child's stack, clone, the child's report
 *   child.c   the cloned child: cgroups, descriptors, root, hostname, network, rlimits, then
 *             it executes the init (init.c, a separate static program)
 *   rootfs.c  the container's root: overlay over the image, the template mount namespace,
 *             /proc, /sys, /tmp, /etc files, binds, chroot
 *   devices.c /dev: a tmpfs with the standard nodes, devpts and the requested host devices
 *   inroot.c  resolving, creating and mounting paths inside the new root
 *
 * Everything but start.c runs in the cloned child, which shares the agent's memory until it
 * executes the init: async-signal-safe calls only (see fbrt_internal.h). */
#ifndef FBRT_CONTAINER_H
#define FBRT_CONTAINER_H

#include <sys/types.h>

#include "fbrt_internal.h"

/* What the child needs; it lives on the agent's stack while the agent waits for the exec. */
struct fbrt_child_args {
    const struct fbrt_spec *spec;
    int error_w;                   /* write end of the error pipe */
    int status_w;                  /* write end of the status pipe */
    char *const *init_argv;        /* built by the agent: see fbrt_internal.h */
    long long boottime_ns;         /* CLOCK_BOOTTIME at the child's first instruction */
    int in_cgroup_v2;              /* cloned into spec->cgroup_v2_fd's group already */
    unsigned long long ignored;    /* bit N-1: signal N is ignored (fbrt_ignored_signals) */
};

/* The signals the agent ignores (dispositions are the process's, shared by its threads):
 * SigIgn of /proc/thread-self/status, whose entries stay in the dentry cache for a
 * long-lived thread (15 us here, where a new process's own /proc/self/status costs 31);
 * all 64 when it cannot be read or parsed (signals.c). */
unsigned long long fbrt_ignored_signals(void);

/* The child's entry point (clone's fn); never returns. */
int fbrt_child_main(void *args);

/* Build the root from spec->lower in a copy of the template mount namespace (open on
 * TEMPLATE_FD) and enter it (rootfs.c). */
int fbrt_rootfs_enter(const struct fbrt_spec *spec, int template_fd, struct fbrt_error *e);

/* What a requested host device is, read while the host's /dev is still reachable. */
struct fbrt_host_device {
    mode_t mode; /* type and permission bits */
    dev_t rdev;
    uid_t uid;
    gid_t gid;
};

/* Check spec->devices and fill OUT (spec->ndevices entries) from the host (devices.c). */
int fbrt_devices_stat(const struct fbrt_spec *spec, struct fbrt_host_device *out,
                      struct fbrt_error *e);

/* Populate /dev under ROOTFD, the requested devices from HOST (devices.c). */
int fbrt_devices_setup(int rootfd, const struct fbrt_spec *spec,
                       const struct fbrt_host_device *host, struct fbrt_error *e);

/* Open PATH relative to ROOTFD, resolved as if ROOTFD were /, as an O_PATH descriptor,
 * creating missing directories, and the last component as a directory (WANT_DIR) or an
 * empty file. Symlinks in the image can never lead outside the container's root (inroot.c). */
int fbrt_open_in_root(int rootfd, const char *path, int want_dir, struct fbrt_error *e);

/* mount(2) onto the O_PATH descriptor TARGET_FD (it becomes the working directory); WHERE
 * names it in errors. */
int fbrt_mount_at(const char *source, int target_fd, const char *where, const char *fstype,
                  unsigned long flags, const char *data, struct fbrt_error *e);

/* Mount a fresh filesystem on container path WHERE. */
int fbrt_mount_in_root(int rootfd, const char *where, const char *fstype, unsigned long flags,
                       const char *data, struct fbrt_error *e);

/* Replace container file DIR/NAME (e.g. /etc/hosts, possibly a symlink in the image). */
int fbrt_write_in_root(int rootfd, const char *dir, const char *name, const char *content,
                       struct fbrt_error *e);

#endif
