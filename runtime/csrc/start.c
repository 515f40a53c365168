/* The agent's side of starting a container (see container.h for the other parts).
 *
 * The child is created much as posix_spawn and crun create theirs: clone(CLONE_VM) on a stack
 * of its own. Sharing the agent's memory spares copying the page tables of a large Python
 * process for every job (the cost grows with the agent's size); this thread then waits for
 * the child's report, which ends after the child executed the init, from when the child has
 * a small address space of its own (posix_spawn holds the thread with CLONE_VFORK until that
 * exec instead, a wake-up more). The child may therefore only do what child.c does. A job with a
 * cgroup v2 group is cloned into it (clone3's CLONE_INTO_CGROUP) rather than joining it by
 * writing cgroup.procs: that write takes the cgroup threadgroup lock for writing, and the first
 * taking after a quiet spell waits for an RCU grace period (~12 ms per start here, about half
 * of a hello-world's time on its node). */
#include <errno.h>
#include <fcntl.h>
#include <linux/memfd.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clone_run.h"
#include "container.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3; needed where vm.memfd_noexec is set */
#endif

/* The child builds paths in a few 4 KiB buffers (at most ~40 KiB deep); the rest is margin. */
#define CHILD_STACK_BYTES (256 * 1024)

int fbrt_init_open(const char *path, struct fbrt_error *err) {
    int src = open(path, O_RDONLY | O_CLOEXEC);
    if (src < 0)
        return fbrt_fail(err, errno, "open the container init %s", path);
    struct stat st;
    if (fstat(src, &st) < 0) {
        int rc = fbrt_fail(err, errno, "stat the container init %s", path);
        close(src);
        return rc;
    }
    unsigned int flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
    int mem = memfd_create(FBRT_INIT_NAME, flags | MFD_EXEC);
    if (mem < 0 && errno == EINVAL) /* a kernel older than MFD_EXEC */
        mem = memfd_create(FBRT_INIT_NAME, flags);
    if (mem < 0) {
        int rc = fbrt_fail(err, errno, "memfd_create for the container init");
        close(src);
        return rc;
    }
    int rc = mem;
    for (off_t copied = 0; copied < st.st_size && rc >= 0;) {
        ssize_t n = sendfile(mem, src, &copied, (size_t)(st.st_size - copied));
        if (n < 0 && errno != EINTR)
            rc = fbrt_fail(err, errno, "copy the container init %s into a memfd", path);
        else if (n == 0)
            rc = fbrt_fail(err, EIO, "copy the container init %s: it shrank", path);
    }
    /* Sealed, the copy cannot change: not by the agent, not by a process in a container
     * opening /proc/1/exe for writing (the runc CVE-2019-5736 pattern). */
    if (rc >= 0 && fcntl(mem, F_ADD_SEALS,
                         F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
        rc = fbrt_fail(err, errno, "seal the container init's memfd");
    close(src);
    if (rc < 0)
        close(mem);
    return rc;
}

/* The init's argument vector: FBRT_INIT_NAME, the options, "--", the command's argv. The
 * options (argv[1] .. argv[nopts]) are allocated here; the rest points into SPEC. The agent
 * builds it, since the child may not allocate. */
struct init_argv {
    char **argv;
    int nopts;
};

static char *option_text(const char *name, const char *value) {
    size_t len = strlen(name) + strlen(value) + 1;
    char *text = malloc(len);
    if (text && fbrt_format(text, len, "%s%s", name, value) < 0) {
        free(text);
        text = NULL;
    }
    return text;
}

static char *option_number(const char *name, unsigned int value) {
    char digits[16];
    return fbrt_format(digits, sizeof(digits), "%u", value) < 0 ? NULL
                                                                 : option_text(name, digits);
}

static char *option_groups(const struct fbrt_spec *spec) {
    /* Ten digits and a comma per group. */
    size_t cap = (size_t)spec->ngroups * 11 + 1;
    char *list = malloc(cap);
    if (!list)
        return NULL;
    list[0] = '\0';
    size_t len = 0;
    for (int i = 0; i < spec->ngroups; i++) {
        if (fbrt_format(list + len, cap - len, "%s%u", i ? "," : "", spec->groups[i]) < 0) {
            free(list);
            return NULL;
        }
        len += strlen(list + len);
    }
    char *text = option_text(FBRT_OPT_GROUPS, list);
    free(list);
    return text;
}

static void init_argv_free(struct init_argv *a) {
    if (!a->argv)
        return;
    for (int i = 1; i <= a->nopts; i++)
        free(a->argv[i]);
    free(a->argv);
    a->argv = NULL;
}

/* FBRT_OPT_CAPS with the mask in hex. */
static char *option_capabilities(uint64_t kept) {
    char hex[17];
    snprintf(hex, sizeof(hex), "%llx", (unsigned long long)kept);
    return option_text(FBRT_OPT_CAPS, hex);
}

/* FBRT_OPT_AFFINITY with MASK's LEN bytes in hex. */
static char *option_affinity(const unsigned char *mask, size_t len) {
    static const char digits[] = "0123456789abcdef";
    char hex[2 * FBRT_AFFINITY_BYTES + 1];
    for (size_t i = 0; i < len; i++) {
        hex[2 * i] = digits[mask[i] >> 4];
        hex[2 * i + 1] = digits[mask[i] & 15];
    }
    hex[2 * len] = '\0';
    return option_text(FBRT_OPT_AFFINITY, hex);
}

/* A start that no other start of this process overlaps runs on the CPU of the thread that
 * makes it: the thread pins itself there for the clone, so the child and its set-up start on
 * it, and PID 1 (which clones the command on its own CPU, init.c) takes the thread's affinity
 * back from FBRT_OPT_AFFINITY. On a busy machine the kernel's choice for a new process, the CPU
 * that looks least loaded, made it wait there for its first turn (2.4 ms median at load 5 from
 * a busy process). Starts that overlap are left to the kernel, which spreads a burst of them
 * over the CPUs (pinned, 32 at once took a quarter longer). */
struct start_cpu {
    cpu_set_t affinity; /* the thread's own */
    size_t len;         /* its bytes up to the last CPU in it; 0: unknown or one CPU */
    int pinned;
};

static int starts_in_flight;

static void start_cpu_read(struct start_cpu *p) {
    p->len = 0;
    p->pinned = 0;
    if (sched_getaffinity(0, sizeof(p->affinity), &p->affinity) < 0 ||
        CPU_COUNT(&p->affinity) < 2)
        return;
    const unsigned char *bytes = (const unsigned char *)&p->affinity;
    size_t len = sizeof(p->affinity) < FBRT_AFFINITY_BYTES ? sizeof(p->affinity)
                                                            : FBRT_AFFINITY_BYTES;
    while (len > 0 && bytes[len - 1] == 0)
        len--;
    p->len = len;
}

static void start_cpu_pin(struct start_cpu *p) {
    if (__atomic_add_fetch(&starts_in_flight, 1, __ATOMIC_RELAXED) != 1 || !p->len)
        return;
    int cpu = sched_getcpu();
    if (cpu < 0)
        return;
    cpu_set_t here;
    CPU_ZERO(&here);
    CPU_SET(cpu, &here);
    p->pinned = sched_setaffinity(0, sizeof(here), &here) == 0;
}

/* The thread's own affinity back, once the child is cloned. */
static void start_cpu_unpin(const struct start_cpu *p) {
    if (p->pinned)
        sched_setaffinity(0, sizeof(p->affinity), &p->affinity);
}

/* The start is over (the command runs, or it failed): no longer in flight. */
static void start_cpu_done(void) { __atomic_sub_fetch(&starts_in_flight, 1, __ATOMIC_RELAXED); }

static int init_argv_build(const struct fbrt_spec *spec, const struct start_cpu *cpu,
                           struct init_argv *a, struct fbrt_error *err) {
    int nargs = 0;
    while (spec->argv[nargs])
        nargs++;
    enum { MAX_OPTIONS = 8 };
    a->nopts = 0;
    a->argv = calloc((size_t)(1 + MAX_OPTIONS + 1 + nargs + 1), sizeof(char *));
    if (!a->argv)
        return fbrt_fail(err, ENOMEM, "arguments of the container init");
    a->argv[0] = (char *)FBRT_INIT_NAME;
    char *options[MAX_OPTIONS];
    int n = 0;
    options[n++] = option_number(FBRT_OPT_UID, spec->uid);
    options[n++] = option_number(FBRT_OPT_GID, spec->gid);
    options[n++] = option_groups(spec);
    if (spec->cwd)
        options[n++] = option_text(FBRT_OPT_CWD, spec->cwd);
    if (spec->path)
        options[n++] = option_text(FBRT_OPT_PATH, spec->path);
    if (spec->lifeline_fd >= 0)
        options[n++] = option_text(FBRT_OPT_LIFELINE, "");
    if (cpu->len)
        options[n++] = option_affinity((const unsigned char *)&cpu->affinity, cpu->len);
    if (spec->capabilities != UINT64_MAX)
        options[n++] = option_capabilities(spec->capabilities);
    int missing = 0;
    for (int i = 0; i < n; i++) {
        a->argv[++a->nopts] = options[i];
        missing |= options[i] == NULL;
    }
    if (missing) {
        init_argv_free(a);
        return fbrt_fail(err, ENOMEM, "arguments of the container init");
    }
    a->argv[1 + n] = (char *)"--";
    for (int i = 0; i < nargs; i++)
        a->argv[2 + n + i] = (char *)spec->argv[i];
    return 0;
}

/* The child's stack is kept per agent thread between starts. The child is done with it once
 * it has executed the init or exited, which the thread waits for before it starts another
 * (CLONE_VFORK, or the report's EOF in fbrt_container_start), so the next start from the
 * same thread can use it again; a fresh one per start
 * cost an mmap, an mprotect and a munmap (whose TLB shootdown interrupts the CPU the child
 * ran on), and the child's page faults on new zero pages. Unmapped when the thread ends. */
static pthread_key_t stack_key;
static pthread_once_t stack_key_once = PTHREAD_ONCE_INIT;
static int stack_key_failed;

static void stack_unmap(void *stack) { munmap(stack, CHILD_STACK_BYTES); }

static void stack_key_create(void) {
    stack_key_failed = pthread_key_create(&stack_key, stack_unmap) != 0;
}

/* This thread's child stack (mapped with a guard page on first use); NULL with *ERR set on
 * failure. *OWNED is set when the caller must unmap it (it could not be kept). */
static char *child_stack(int *owned, int *err) {
    pthread_once(&stack_key_once, stack_key_create);
    *owned = 0;
    if (!stack_key_failed) {
        char *kept = pthread_getspecific(stack_key);
        if (kept)
            return kept;
    }
    char *stack = mmap(NULL, CHILD_STACK_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED) {
        *err = errno;
        return NULL;
    }
    /* A guard page: an overflow faults instead of writing over the agent's memory. */
    if (mprotect(stack, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE) < 0) {
        *err = errno;
        munmap(stack, CHILD_STACK_BYTES);
        return NULL;
    }
    if (stack_key_failed || pthread_setspecific(stack_key, stack) != 0)
        *owned = 1;
    return stack;
}

/* Set once clone3 or its CLONE_INTO_CGROUP turned out to be missing (ENOSYS: before 5.3 or
 * filtered; E2BIG: before 5.7): later starts go straight to clone. */
static int clone3_missing;

/* clone(FN, ARG) on this thread's child stack with all signals blocked (see the top of this
 * file); with CGROUP_FD >= 0, clone3 into that v2 group instead, falling back to clone when
 * the kernel cannot (*INTO_CGROUP says which it was). Returns the pid or -errno. */
static long clone_on_stack(int (*fn)(void *), void *arg, int flags, int *pidfd, int cgroup_fd,
                           int *into_cgroup) {
    int owned, err = 0;
    char *stack = child_stack(&owned, &err);
    if (!stack)
        return -err;
    if (owned) /* unmapped below, as soon as clone returns: the child must be done with it */
        flags |= CLONE_VFORK;
    /* Blocked in the child from its first instruction: a handler of the agent's running on
     * the shared memory could corrupt it. The child keeps them blocked through exec. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    long pid = -ENOSYS;
    *into_cgroup = 0;
    if (cgroup_fd >= 0 && !__atomic_load_n(&clone3_missing, __ATOMIC_RELAXED)) {
        struct fbrt_clone_args ca;
        memset(&ca, 0, sizeof(ca));
        ca.flags = (uint64_t)(flags & ~0xff) | CLONE_INTO_CGROUP;
        ca.pidfd = (uint64_t)(uintptr_t)pidfd;
        ca.exit_signal = (uint64_t)(flags & 0xff);
        ca.stack = (uint64_t)(uintptr_t)stack;
        ca.stack_size = CHILD_STACK_BYTES;
        ca.cgroup = (uint64_t)cgroup_fd;
        *into_cgroup = 1; /* set before: the child reads it before clone returns here */
        pid = fbrt_clone3_run(&ca, fn, arg);
        if (pid == -ENOSYS || pid == -E2BIG)
            __atomic_store_n(&clone3_missing, 1, __ATOMIC_RELAXED);
        if (pid < 0)
            *into_cgroup = 0;
    }
    /* Any failure of clone3 is retried as clone: the child then joins through cgroup.procs,
     * and a failure that is not clone3's own is reported by clone as before. */
    if (pid < 0) {
        pid = clone(fn, stack + CHILD_STACK_BYTES, flags, arg, pidfd);
        pid = pid < 0 ? -errno : pid;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (owned)
        munmap(stack, CHILD_STACK_BYTES);
    return pid;
}

/* clone the container's child, into its v2 group when it has one; returns its pid or -errno.
 * No CLONE_NEWNS: the child copies the template mount namespace instead of the agent's
 * (rootfs.c). No CLONE_VFORK: this thread goes on to wait for the child's report (the pipe's
 * EOF once the command is executed, which comes after the child left this memory by
 * executing the init), instead of sleeping in clone until the init's exec and then again
 * in the read: one wake-up fewer per start, each a turn in the run queue on a busy node. */
static long clone_child(const struct fbrt_spec *spec, struct fbrt_child_args *args, int *pidfd) {
    int flags = CLONE_VM | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_PIDFD | SIGCHLD;
    if (spec->new_net && spec->net_fd < 0)
        flags |= CLONE_NEWNET;
    return clone_on_stack(fbrt_child_main, args, flags, pidfd, spec->cgroup_v2_fd,
                          &args->in_cgroup_v2);
}

/* What the template's child reports back through the shared memory. */
struct template_args {
    const char *dir;
    int fd; /* the namespace's descriptor, in the agent's table (CLONE_FILES) */
    struct fbrt_error err;
};

/* In a new mount namespace (a copy of the agent's): keep a descriptor of it, then make it
 * nothing but an empty, read-only tmpfs: private, the tmpfs mounted on DIR, pivoted into,
 * the copied host tree detached. The namespace lives on through the descriptor. */
static int template_child(void *arg) {
    struct template_args *a = arg;
    /* Opened first: once pivoted, the namespace has no /proc to open it through. */
    a->fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    if (a->fd < 0)
        fbrt_fail(&a->err, errno, "open the template mount namespace");
    else if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        fbrt_fail(&a->err, errno, "make the template mount namespace private");
    else if (mount("fbrt-template", a->dir, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   "mode=0755,size=4k") < 0)
        fbrt_fail(&a->err, errno, "mount the template's tmpfs on %s", a->dir);
    else if (chdir(a->dir) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
             umount2(".", MNT_DETACH) < 0)
        fbrt_fail(&a->err, errno, "make the tmpfs on %s the template's root", a->dir);
    _exit(a->err.err > 0);
}

int fbrt_mnt_template_open(const char *dir, struct fbrt_error *err) {
    struct template_args args;
    memset(&args, 0, sizeof(args));
    args.dir = dir;
    args.fd = -1;
    /* CLONE_FILES: the descriptor the child opens is the agent's; CLONE_VM: so is its
     * report. Not CLONE_FS: the child changes its root and directory. */
    int into_cgroup;
    long pid = clone_on_stack(template_child, &args,
                              CLONE_VM | CLONE_VFORK | CLONE_FILES | CLONE_NEWNS | SIGCHLD,
                              NULL, -1, &into_cgroup);
    if (pid < 0)
        return fbrt_fail(err, (int)-pid, "clone the template mount namespace");
    int status = 0;
    while (waitpid((pid_t)pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && args.fd >= 0)
        return args.fd;
    if (args.fd >= 0)
        close(args.fd);
    if (args.err.err > 0) {
        *err = args.err;
        return -args.err.err;
    }
    return fbrt_fail(err, EIO, "template mount namespace: its child ended with status %d",
                     status);
}

/* PID's start time from /proc/PID/stat (field 22, clock ticks since boot); 0 if unreadable. */
static long long proc_start_time(pid_t pid) {
    char path[64], buf[1024];
    if (fbrt_format(path, sizeof(path), "/proc/%d/stat", (int)pid) < 0)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: fields start after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    for (int field = 2; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoll(p + 1, NULL, 10) : 0;
}

static long long boottime_ns(void) {
    struct timespec now;
    if (clock_gettime(CLOCK_BOOTTIME, &now) < 0)
        return 0;
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

/* The child's start time as /proc/PID/stat gives it. The kernel takes it (CLOCK_BOOTTIME, in
 * clock ticks there) inside clone, after BEFORE (the agent's clock before the call) and
 * before AFTER (the child's first instruction): when both fall in the same tick, that tick
 * is the answer, without opening a new process's file in /proc (the agent's Python spent
 * about 70 us per start on it). Otherwise, or without a clock, /proc is read. */
static long long child_start_time(pid_t pid, long long before, long long after) {
    long hz = sysconf(_SC_CLK_TCK);
    if (hz > 0 && 1000000000LL % hz == 0 && before > 0 && after >= before) {
        long long ns_per_tick = 1000000000LL / hz;
        if (before / ns_per_tick == after / ns_per_tick)
            return before / ns_per_tick;
    }
    return proc_start_time(pid);
}

/* Read the child's error report: 0 when there is none (the command runs), else -errno with
 * ERR filled. */
static int read_report(int fd, struct fbrt_error *err) {
    struct fbrt_error child;
    memset(&child, 0, sizeof(child));
    size_t got = 0;
    while (got < sizeof(child)) {
        ssize_t n = read(fd, (char *)&child + got, sizeof(child) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got == 0)
        return 0;
    if (got != sizeof(child) || child.err <= 0)
        return fbrt_fail(err, EIO, "container setup failed (truncated report)");
    *err = child;
    err->msg[sizeof(err->msg) - 1] = '\0';
    return -child.err;
}

int fbrt_container_start(const struct fbrt_spec *spec, struct fbrt_started *out,
                         struct fbrt_error *err) {
    if (!spec->argv || !spec->argv[0])
        return fbrt_fail(err, EINVAL, "start container: empty command");
    if (spec->init_fd < 0)
        return fbrt_fail(err, EINVAL, "start container: no init (see fbrt_init_open)");
    struct start_cpu cpu;
    start_cpu_read(&cpu);
    struct init_argv init;
    int rc = init_argv_build(spec, &cpu, &init, err);
    if (rc < 0)
        return rc;
    int error_pipe[2], status_pipe[2];
    if (pipe2(error_pipe, O_CLOEXEC) < 0) {
        rc = fbrt_fail(err, errno, "pipe for container errors");
        init_argv_free(&init);
        return rc;
    }
    if (pipe2(status_pipe, O_CLOEXEC) < 0) {
        rc = fbrt_fail(err, errno, "pipe for container status");
        close(error_pipe[0]);
        close(error_pipe[1]);
        init_argv_free(&init);
        return rc;
    }
    /* Read just before the clone, whose copy of the dispositions the child then has: a
     * disposition another thread changes between the two is the only one missed. */
    struct fbrt_child_args args = {spec, error_pipe[1], status_pipe[1], init.argv, 0, 0,
                                   fbrt_ignored_signals()};
    int pidfd = -1;
    long long before = boottime_ns();
    start_cpu_pin(&cpu);
    long pid = clone_child(spec, &args, &pidfd);
    start_cpu_unpin(&cpu);
    close(error_pipe[1]);
    close(status_pipe[1]);
    if (pid < 0) {
        start_cpu_done();
        init_argv_free(&init);
        close(error_pipe[0]);
        close(status_pipe[0]);
        return fbrt_fail(err, (int)-pid, "clone into new namespaces");
    }
    /* EOF once the command has been executed: the init closes its end then. The child may
     * still be running on this process's memory until then (no CLONE_VFORK), reading ARGS,
     * INIT and SPEC: none of them is touched before. */
    rc = read_report(error_pipe[0], err);
    start_cpu_done();
    close(error_pipe[0]);
    init_argv_free(&init);
    if (rc < 0) {
        kill((pid_t)pid, SIGKILL);
        while (waitpid((pid_t)pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
        close(pidfd);
        close(status_pipe[0]);
        return rc;
    }
    out->pid = (int)pid;
    out->pidfd = pidfd;
    out->status_fd = status_pipe[0];
    out->start_time = child_start_time((pid_t)pid, before, args.boottime_ns);
    return 0;
}
