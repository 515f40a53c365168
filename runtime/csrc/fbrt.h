/* Public interface of the Fuzzball node runtime (libfbrt), called from Python via cffi.
 *
 * Every entry point returns 0 (or a non-negative result) on success and a negative errno on
 * failure, in which case it has filled the caller's struct fbrt_error with what was attempted,
 * in words, followed by the errno's description.
 *
 * The declarations between the cffi-cdef markers are what Python sees: runtime/build_ffi.py
 * hands exactly that text to cffi's cdef(), so the header is the only copy of the interface.
 * Keep that section to plain declarations and comments (no preprocessor lines).
 */
#ifndef FBRT_H
#define FBRT_H

#include <stdint.h>

/* Version of the C runtime's ABI: bumped whenever a declaration below changes. Python's
 * fuzzball_runtime.native.ABI_VERSION must equal it; a compiled module reporting another
 * version is refused at import. */
#define FBRT_ABI_VERSION 9

/* cffi-cdef-begin */

int fbrt_abi_version(void);

struct fbrt_error {
    int err;        /* positive errno */
    char msg[512];  /* "mount erofs /dev/loop3 on /run/...: Invalid argument" */
};

/* ---- images: loop device + EROFS (mount.c) ---- */

/* Attach IMAGE read-only to a free loop device (LOOP_CTL_GET_FREE + LOOP_CONFIGURE, autoclear)
 * and mount it as EROFS on TARGET. The loop device detaches itself when the mount goes. */
int fbrt_image_mount(const char *image, const char *target, char *loopdev, int loopdev_len,
                     struct fbrt_error *err);
/* umount2(TARGET, flags); EINVAL/ENOENT (not mounted) are not errors. */
int fbrt_umount(const char *target, int detach, struct fbrt_error *err);

/* ---- rlimits (rlimit.c) ---- */

/* Decide the RLIMIT_MEMLOCK value a job asking for REQUESTED bytes gets: *granted is
 * REQUESTED when the hard limit allows it or CAP_SYS_RESOURCE is held, else the hard limit,
 * with *clamped set to 1. *hard receives the current hard limit. */
int fbrt_memlock_plan(int64_t requested, int64_t *granted, int64_t *hard, int *clamped,
                      struct fbrt_error *err);

/* ---- cgroups (cgroup.c) ---- */

int fbrt_cgroup_create(const char *dir, struct fbrt_error *err);
int fbrt_cgroup_write(const char *dir, const char *file, const char *value,
                      struct fbrt_error *err);
/* Reads at most len-1 bytes; returns the byte count. */
int fbrt_cgroup_read(const char *dir, const char *file, char *buf, int len,
                     struct fbrt_error *err);
/* A descriptor by which a container's child joins the job group DIR. In a v1 hierarchy (V1
 * set): DIR/tasks open for writing, the child writes "0" to it (one thread, which the child
 * is; cgroup.procs would move a whole thread group, under a lock whose every first taking
 * after a quiet spell waits for an RCU grace period, ~12 ms here). In the v2 tree: DIR
 * itself, which the child is cloned into (CLONE_INTO_CGROUP), or joins through its
 * cgroup.procs where clone3 cannot. */
int fbrt_cgroup_open_join(const char *dir, int v1, struct fbrt_error *err);
/* SIGKILLs whatever is left in DIR and removes it, retrying while the kernel still counts
 * dying tasks (at most timeout_ms). A missing directory is not an error. */
int fbrt_cgroup_remove(const char *dir, int timeout_ms, struct fbrt_error *err);

/* ---- eBPF metering (bpf_meter.c) ---- */

struct fbrt_counters {
    uint64_t ingress_bytes, ingress_packets, egress_bytes, egress_packets;
};

/* Attach the cgroup_skb ingress and egress counting programs (raw BPF instructions, loaded
 * once per process with their cgroup-storage maps) to the cgroup v2 directory CGROUP_DIR.
 * Returns a descriptor of that directory for fbrt_meter_read (close it when done). The
 * counters live as long as the cgroup: read them before removing it. */
int fbrt_meter_attach(const char *cgroup_dir, struct fbrt_error *err);
int fbrt_meter_read(int cgroup_fd, struct fbrt_counters *out, struct fbrt_error *err);

/* ---- instance metadata guard (bpf_guard.c) ---- */

/* Load the guard's cgroup_skb egress program (once per process) and test-run it on packets
 * to the guarded addresses and to others (BPF_PROG_TEST_RUN): 0 when it drops exactly what
 * it must; -errno naming the failed step or the packet it judged wrongly (EPROTO). */
int fbrt_guard_check(struct fbrt_error *err);
/* Attach the guard (BPF_F_ALLOW_MULTI, beside metering) to the cgroup v2 directory
 * CGROUP_DIR: what the group's sockets send to the clouds' instance metadata addresses is
 * dropped from then on. The attachment goes with the group. */
int fbrt_guard_attach(const char *cgroup_dir, struct fbrt_error *err);

/* ---- containers (start.c in the agent, child.c and rootfs.c in the child, init.c as PID 1) */

/* Copy the static init binary at PATH into a sealed memfd (no writes, no resizing) and return
 * that descriptor (close-on-exec). fbrt_container_start executes the container's PID 1 from
 * it, so the init reaches every container whatever its image holds, and a process inside
 * cannot write through /proc/1/exe to the binary on the host. One per agent is enough. */
int fbrt_init_open(const char *path, struct fbrt_error *err);

/* Create the template mount namespace and return a descriptor of it (close-on-exec): a
 * private namespace holding nothing but an empty, read-only tmpfs as its root (mounted on
 * DIR, an existing directory, inside that namespace only, then made its root). Each
 * container's child enters it and copies it (setns, then unshare) instead of copying the
 * host's mount table, so nothing of the host is in the container's namespace and there is
 * no host tree to detach (rootfs.c). One per agent is enough. */
int fbrt_mnt_template_open(const char *dir, struct fbrt_error *err);

struct fbrt_bind {
    const char *src;  /* host path */
    const char *dst;  /* path inside the container */
    int readonly;
};

struct fbrt_spec {
    const char *lower;        /* the shared, mounted image directory (host path) */
    int mnt_template_fd;      /* from fbrt_mnt_template_open: the namespace the child copies */
    const char *scratch;      /* NULL: upper layer on a private tmpfs; else this host
                               * directory */
    const char *const *argv;  /* NULL-terminated */
    const char *const *envp;  /* NULL-terminated */
    const char *path;         /* PATH used to find argv[0] when it has no slash (NULL: the
                               * default PATH); an empty element is the working directory,
                               * as for execvp */
    const char *cwd;
    const char *hostname;
    const char *hosts;        /* content of /etc/hosts */
    const char *resolv;       /* content of /etc/resolv.conf */
    unsigned int uid, gid;
    uint64_t capabilities;    /* those the command may hold (bit N: capability N); every
                               * other one leaves the bounding set before PID 1 starts it.
                               * All ones: the agent's own, none dropped */
    const unsigned int *groups;
    int ngroups;
    const struct fbrt_bind *binds;
    int nbinds;
    const char *const *devices;  /* host device nodes recreated at the same path */
    int ndevices;
    int new_net;              /* new network namespace with lo up */
    int net_fd;               /* >=0: join this network namespace (setns) instead, lo up;
                               * -1: none (new_net decides) */
    int64_t memlock;          /* <0: keep the inherited RLIMIT_MEMLOCK */
    const int *cgroup_fds;    /* v1 groups' tasks fds to join (fbrt_cgroup_open_join) */
    int ncgroup_fds;
    int cgroup_v2_fd;         /* the v2 job group's directory (fbrt_cgroup_open_join);
                               * -1: none */
    int stdin_fd, stdout_fd, stderr_fd;  /* -1: inherit */
    int lifeline_fd;          /* read end of a pipe only the agent writes to; -1: none.
                               * At its EOF (the agent died) PID 1 exits, ending the job. */
    int init_fd;              /* from fbrt_init_open: the binary PID 1 runs */
};

struct fbrt_started {
    int pid;        /* host pid of the container's PID 1 */
    int pidfd;      /* pidfd of that process */
    int status_fd;  /* PID 1 writes the command's 4-byte wait status here before it exits */
    long long start_time;  /* PID 1's start time as /proc/PID/stat gives it (clock ticks
                            * since boot): with the pid, it names the process for good */
};

/* Start the container: PID 1 is the static init from spec->init_fd, which starts the command,
 * forwards signals to it, reaps orphans and reports the command's wait status on status_fd.
 * Returns once the command has been exec'd (or failed to be, in which case everything started
 * is killed and reaped and the child's error is returned). Safe to call from any thread of a
 * multi-threaded process. */
int fbrt_container_start(const struct fbrt_spec *spec, struct fbrt_started *out,
                         struct fbrt_error *err);

/* cffi-cdef-end */

#endif
