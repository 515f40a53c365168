/* The cloned child: it becomes PID 1 of the new namespaces. It joins the job's cgroups, puts
 * its descriptors where the init expects them, builds and enters the root, sets the hostname,
 * network and RLIMIT_MEMLOCK, then executes the init (init.c) from the sealed memfd.
 *
 * It runs on the agent's memory (CLONE_VM) while the agent's thread waits for its report and
 * other agent threads keep running: it only makes system calls, writes its own stack and
 * reads the spec. All signals stay blocked from clone to exec (the agent blocked them), so no
 * agent signal handler can run in here; the signals the agent ignored at the clone are put
 * back to their default here (default_ignored_signals), the handled ones go back at the
 * exec. */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "container.h"

/* Parked descriptors go above the low numbers so that dup3 onto 0..7 cannot clobber one. */
#define FD_HIGH 64

static void __attribute__((noreturn)) die(int report_fd, const struct fbrt_error *e) {
    if (report_fd >= 0) {
        ssize_t n = write(report_fd, e, sizeof(*e));
        (void)n;
    }
    _exit(127);
}

/* The numbers descriptors are placed on: 0..2, the FBRT_FD_* pipes, the init's binary and
 * the template (init_fd_number, template_fd_number), at most 0..7. */
#define FD_PLACED 8

/* FD itself when no placement can clobber it (it is above every number placed), else a
 * duplicate at a number >= FD_HIGH; -1 stays -1. The agent's descriptors are almost always
 * above 7, so a start places them without the eight F_DUPFD calls it made before. */
static int lift(int fd, int report_fd, struct fbrt_error *e, const char *what) {
    if (fd < 0 || fd >= FD_PLACED)
        return fd;
    int high = fcntl(fd, F_DUPFD, FD_HIGH);
    if (high < 0) {
        fbrt_fail(e, errno, "duplicate the %s descriptor %d", what, fd);
        die(report_fd, e);
    }
    return high;
}

/* Put HIGH (a descriptor above every placed number, see lift) on TARGET with FLAGS (0 or
 * O_CLOEXEC); HIGH < 0 places nothing. */
static void place(int high, int target, int flags, int report_fd, struct fbrt_error *e) {
    if (high >= 0 && dup3(high, target, flags) < 0) {
        fbrt_fail(e, errno, "dup3 %d onto %d", high, target);
        die(report_fd, e);
    }
}

/* Where the init's binary sits once the descriptors are placed. */
static int init_fd_number(const struct fbrt_spec *spec) {
    return spec->lifeline_fd >= 0 ? FBRT_FD_LIFELINE + 1 : FBRT_FD_STATUS + 1;
}

/* Where the template mount namespace's descriptor sits once the descriptors are placed. */
static int template_fd_number(const struct fbrt_spec *spec) {
    return init_fd_number(spec) + 1;
}

/* Stdio on 0..2, the error, status and lifeline pipes on their FBRT_FD_* numbers, the init's
 * binary and the template mount namespace above them, nothing else of the agent's (other
 * containers' pipes, sockets) left open. */
static void place_descriptors(const struct fbrt_child_args *args, struct fbrt_error *e) {
    const struct fbrt_spec *spec = args->spec;
    int report = args->error_w;
    int in = lift(spec->stdin_fd, report, e, "stdin");
    int out = lift(spec->stdout_fd, report, e, "stdout");
    int err = lift(spec->stderr_fd, report, e, "stderr");
    int error_high = lift(args->error_w, report, e, "error pipe");
    int status_high = lift(args->status_w, report, e, "status pipe");
    int lifeline = lift(spec->lifeline_fd, report, e, "lifeline");
    int init_high = lift(spec->init_fd, report, e, "init");
    int template_high = lift(spec->mnt_template_fd, report, e, "mount template");
    report = error_high;
    place(in, 0, 0, report, e);
    place(out, 1, 0, report, e);
    place(err, 2, 0, report, e);
    place(error_high, FBRT_FD_ERROR, 0, report, e);
    place(status_high, FBRT_FD_STATUS, 0, report, e);
    place(lifeline, FBRT_FD_LIFELINE, 0, report, e);
    report = FBRT_FD_ERROR;
    /* 0..5 without close-on-exec: they pass to the init, which keeps the pipes from the
     * command. The init's binary and the template go just above them, close-on-exec in the
     * same call, since only this child uses them. */
    int next = init_fd_number(spec);
    place(init_high, next, O_CLOEXEC, report, e);
    place(template_high, ++next, O_CLOEXEC, report, e);
    if (syscall(SYS_close_range, next + 1, ~0U, 0) < 0) {
        fbrt_fail(e, errno, "close inherited descriptors");
        die(report, e);
    }
}

/* The command must start with every disposition at its default. Handled signals go back to
 * it at the init's exec, ignored ones survive it (the agent ignores SIGPIPE, and an ignored
 * SIGCHLD would have the kernel reap the command before PID 1 reads its status): those the
 * agent's thread read just before the clone (args->ignored, fbrt_ignored_signals) are put
 * back here. Two calls for Python's two, where the init made all 64 (34 us in a new
 * process here; the thread's read 15). */
static void default_ignored_signals(unsigned long long ignored) {
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        unsigned long long mask;
    } dfl = {SIG_DFL, 0, NULL, 0}; /* the kernel's struct sigaction, as the init passes it */
    for (int sig = 1; sig <= 64; sig++)
        if (ignored >> (sig - 1) & 1)
            syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
}

int fbrt_child_main(void *arg) {
    struct fbrt_child_args *args = arg;
    /* First: the agent brackets this process's start time with it (start.c). The vDSO's
     * clock_gettime is a read of shared pages, async-signal-safe. */
    struct timespec now;
    if (clock_gettime(CLOCK_BOOTTIME, &now) == 0)
        args->boottime_ns = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
    const struct fbrt_spec *spec = args->spec;
    struct fbrt_error e;
    memset(&e, 0, sizeof(e));
    umask(0);
    default_ignored_signals(args->ignored);
    for (int i = 0; i < spec->ncgroup_fds; i++) {
        if (write(spec->cgroup_fds[i], "0", 1) < 0) {
            fbrt_fail(&e, errno, "join cgroup (tasks descriptor %d)", spec->cgroup_fds[i]);
            die(args->error_w, &e);
        }
    }
    if (spec->cgroup_v2_fd >= 0 && !args->in_cgroup_v2) {
        /* clone could not place it (start.c): joined as before CLONE_INTO_CGROUP existed */
        int procs = openat(spec->cgroup_v2_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
        if (procs < 0 || write(procs, "0", 1) < 0) {
            fbrt_fail(&e, errno, "join cgroup (cgroup.procs of descriptor %d)",
                      spec->cgroup_v2_fd);
            die(args->error_w, &e);
        }
        close(procs);
    }
    /* Before the descriptors are placed: placing closes every other one, the namespace's
     * included. Before the root is built too, so that its /sys shows this namespace. */
    if (spec->net_fd >= 0 && fbrt_net_join(spec->net_fd, &e) < 0)
        die(args->error_w, &e);
    place_descriptors(args, &e);
    setsid();
    if (fbrt_rootfs_enter(spec, template_fd_number(spec), &e) < 0)
        die(FBRT_FD_ERROR, &e);
    if (spec->hostname && sethostname(spec->hostname, strlen(spec->hostname)) < 0) {
        fbrt_fail(&e, errno, "sethostname %s", spec->hostname);
        die(FBRT_FD_ERROR, &e);
    }
    if (spec->new_net && spec->net_fd < 0 && fbrt_net_lo_up(&e) < 0)
        die(FBRT_FD_ERROR, &e);
    if (spec->memlock >= 0) {
        struct rlimit limit = {(rlim_t)spec->memlock, (rlim_t)spec->memlock};
        if (setrlimit(RLIMIT_MEMLOCK, &limit) < 0) {
            fbrt_fail(&e, errno, "setrlimit RLIMIT_MEMLOCK to %lld bytes",
                      (long long)spec->memlock);
            die(FBRT_FD_ERROR, &e);
        }
    }
    /* The command's environment is the init's too; the init hands it on unchanged. */
    syscall(SYS_execveat, init_fd_number(spec), "", args->init_argv, spec->envp, AT_EMPTY_PATH);
    fbrt_fail(&e, errno, "execute the container init (%s)", FBRT_INIT_NAME);
    die(FBRT_FD_ERROR, &e);
}
