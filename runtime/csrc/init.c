/* fbrt-init: PID 1 of every container, a small static program (like tini or catatonit).
 *
 * The setup child (child.c) executes it from a sealed memfd once the root is built, with the
 * descriptors of fbrt_internal.h in place and the command's environment. It starts the
 * command, forwards every signal it receives to it, reaps orphans, writes the command's exact
 * wait status to FBRT_FD_STATUS and exits 0; when the agent dies (EOF on the lifeline) it
 * exits 137, which takes the whole PID namespace with it. Statically linked, and without the C
 * library's start-up (init_sys.h), it runs in any image, with or without a libc. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>

#include "clone_run.h"
#include "init.h"

/* The supplementary groups, parsed from the option (no allocator here). */
static gid_t groups[NGROUPS_MAX];

void init_die(const struct fbrt_error *e) {
    long n = sys_write(FBRT_FD_ERROR, e, sizeof(*e));
    (void)n;
    sys_exit(127);
}

static void __attribute__((noreturn)) usage_error(const char *what, const char *arg) {
    struct fbrt_error e;
    memset(&e, 0, sizeof(e));
    fbrt_fail(&e, EINVAL, "%s: %s %s", FBRT_INIT_NAME, what, arg);
    init_die(&e);
}

/* A decimal id up to END (or the string's end); anything else is a usage error. */
static unsigned long parse_id(const char *text, const char *end, const char *arg) {
    unsigned long value = 0;
    if (text == end)
        usage_error("bad number in", arg);
    for (const char *c = text; c < end; c++) {
        if (*c < '0' || *c > '9')
            usage_error("bad number in", arg);
        value = value * 10 + (unsigned long)(*c - '0');
        if (value > 0xFFFFFFFEUL)
            usage_error("bad number in", arg);
    }
    return value;
}

static const char *text_end(const char *text) { return init_strchrnul(text, '\0'); }

static void parse_groups(const char *list, const char *arg, struct init_options *o) {
    o->groups = groups;
    o->ngroups = 0;
    if (!*list)
        return;
    for (const char *item = list;;) {
        const char *comma = init_strchrnul(item, ',');
        if (o->ngroups == NGROUPS_MAX)
            usage_error("too many groups in", arg);
        groups[o->ngroups++] = (gid_t)parse_id(item, comma, arg);
        if (!*comma)
            return;
        item = comma + 1;
    }
}

static const char *option_value(const char *arg, const char *name) {
    return init_starts_with(arg, name) ? arg + strlen(name) : NULL;
}

static void parse_affinity(const char *hex, const char *arg);
static int hex_digit(char c);

static unsigned long long parse_hex64(const char *hex, const char *arg) {
    unsigned long long value = 0;
    int n = 0;
    for (const char *c = hex; *c; c++, n++) {
        int digit = hex_digit(*c);
        if (digit < 0 || n == 16)
            usage_error("bad mask in", arg);
        value = value << 4 | (unsigned long long)digit;
    }
    if (n == 0)
        usage_error("bad mask in", arg);
    return value;
}

static void parse_options(int argc, char **argv, struct init_options *o) {
    memset(o, 0, sizeof(*o));
    int i = 1;
    for (; i < argc && init_strcmp(argv[i], "--") != 0; i++) {
        const char *arg = argv[i];
        const char *value;
        if ((value = option_value(arg, FBRT_OPT_UID)))
            o->uid = (uid_t)parse_id(value, text_end(value), arg);
        else if ((value = option_value(arg, FBRT_OPT_GID)))
            o->gid = (gid_t)parse_id(value, text_end(value), arg);
        else if ((value = option_value(arg, FBRT_OPT_GROUPS)))
            parse_groups(value, arg, o);
        else if ((value = option_value(arg, FBRT_OPT_CWD)))
            o->cwd = value;
        else if ((value = option_value(arg, FBRT_OPT_PATH)))
            o->path = value;
        else if (init_strcmp(arg, FBRT_OPT_LIFELINE) == 0)
            o->lifeline = 1;
        else if ((value = option_value(arg, FBRT_OPT_AFFINITY)))
            parse_affinity(value, arg);
        else if ((value = option_value(arg, FBRT_OPT_CAPS))) {
            o->caps_kept = parse_hex64(value, arg);
            o->drop_caps = 1;
        } else
            usage_error("unknown option", arg);
    }
    if (i + 1 >= argc)
        usage_error("no command after", "--");
    o->argv = argv + i + 1;
}

/* Reap every child that has ended; when the command is among them, report it and exit. */
static void reap(long command) {
    for (;;) {
        int status;
        long reaped = sys_wait_any(&status, WNOHANG);
        if (reaped <= 0)
            return;
        if (reaped == command) {
            long n = sys_write(FBRT_FD_STATUS, &status, sizeof(status));
            (void)n;
            sys_exit(0);
        }
    }
}

/* The command's process runs on this stack until it executes the command (or exits). PID 1
 * runs on, on its own stack, and never touches this one. exec_search's path buffer (4 KiB)
 * and an error report are the deepest frames. */
static char command_stack[32 * 1024] __attribute__((aligned(16)));

static int command_main(void *options) { init_exec_command(options); }

/* PID 1's affinity while it is pinned to its CPU for the command's clone; the command reads
 * it here too (it runs on PID 1's memory until its exec). */
static unsigned long affinity[FBRT_AFFINITY_BYTES / sizeof(unsigned long)];
static long affinity_bytes; /* 0: not pinned */
static long affinity_given; /* bytes of FBRT_OPT_AFFINITY (the agent's); 0: none */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static void parse_affinity(const char *hex, const char *arg) {
    unsigned char *bytes = (unsigned char *)affinity;
    long n = 0;
    for (const char *c = hex; *c; c += 2) {
        int high = hex_digit(c[0]), low = high < 0 ? -1 : hex_digit(c[1]);
        if (low < 0 || n == (long)sizeof(affinity))
            usage_error("bad mask in", arg);
        bytes[n++] = (unsigned char)(high << 4 | low);
    }
    if (n == 0)
        usage_error("bad mask in", arg);
    affinity_given = n;
}

/* The command is cloned on PID 1's CPU. Left to the kernel, a new process goes to the CPU that
 * looks least loaded, and the container's session (the child's setsid) is a scheduling group
 * of its own where the kernel groups tasks by session (autogroup), or so is the job's cgroup:
 * on a busy machine the command, the first of its group on the other CPU, waited there 2.7 ms
 * (median, perf sched, load 10) before its first instruction. PID 1 and the command take the
 * affinity back at once (init_affinity_restore). */
static void pin_to_this_cpu(void) {
    unsigned int cpu;
    /* The agent's affinity when it started this container pinned (start.c), else our own. */
    long bytes = affinity_given ? affinity_given : sys_sched_getaffinity(affinity, sizeof(affinity));
    if (bytes <= 0 || sys_getcpu(&cpu) < 0 || cpu >= 8 * sizeof(affinity))
        return;
    unsigned long here[sizeof(affinity) / sizeof(affinity[0])];
    for (unsigned long i = 0; i < sizeof(here) / sizeof(here[0]); i++)
        here[i] = 0;
    here[cpu / (8 * sizeof(unsigned long))] = 1UL << (cpu % (8 * sizeof(unsigned long)));
    if (sys_sched_setaffinity(here, (size_t)bytes) == 0)
        affinity_bytes = bytes;
}

void init_affinity_restore(void) {
    if (affinity_bytes > 0)
        sys_sched_setaffinity(affinity, (size_t)affinity_bytes);
}

/* Start the command's process: clone3 with CLONE_VM on command_stack instead of fork. A fork
 * copied PID 1's page tables for a process that only sets its credentials and executes,
 * then took copy-on-write faults on both sides and tore the copy down again at the exec.
 * The child has its own descriptor table and fs state (no CLONE_FILES, CLONE_FS), so its
 * credentials, umask, directory and close-on-exec descriptors are its own, as after fork;
 * until its exec it only reads PID 1's memory (the options, the groups, the environment),
 * which PID 1 no longer writes. Not CLONE_VFORK: PID 1 goes on at once to close its end of
 * the error pipe, so the agent's EOF comes with the command's exec, not after PID 1's next
 * turn on a CPU (a wake-up more on every start's path). A kernel without clone3 gets the
 * fork. Returns the pid, or -errno. */
static long spawn_command(const struct init_options *o) {
    struct fbrt_clone_args ca;
    memset(&ca, 0, sizeof(ca));
    ca.flags = CLONE_VM;
    ca.exit_signal = SIGCHLD;
    ca.stack = (uint64_t)(unsigned long)command_stack;
    ca.stack_size = sizeof(command_stack);
    long pid = fbrt_clone3_run(&ca, command_main, (void *)o);
    if (pid != -ENOSYS)
        return pid;
    pid = sys_fork();
    if (pid == 0)
        init_exec_command(o);
    return pid;
}

/* Keep only the capabilities in KEPT, for PID 1 and all it starts: every other one leaves the
 * bounding set (so no exec, of a set-user-ID root program or of anything as root, gets it
 * back) and the effective, permitted and inheritable sets; the ambient set is emptied. PID 1
 * keeps what it needs of the default set: CAP_SETUID, CAP_SETGID and CAP_SETPCAP for the
 * command's credentials, CAP_KILL to forward signals to a command of another user. A job
 * running as root then holds no CAP_SYS_ADMIN, CAP_NET_ADMIN or CAP_BPF (the node's mounts,
 * its network, the metadata guard's program) and no CAP_NET_RAW (packets past that program),
 * as Podman's default set leaves them out. */
static void drop_capabilities(unsigned long long kept) {
    struct fbrt_error e;
    memset(&e, 0, sizeof(e));
    for (unsigned long cap = 0; cap < 64; cap++) {
        if (kept >> cap & 1)
            continue;
        long rc = sys_prctl(PR_CAPBSET_DROP, cap);
        if (rc == -EINVAL)
            break; /* past the kernel's last capability */
        if (rc < 0) {
            fbrt_fail(&e, (int)-rc, "drop capability %lu from the bounding set", cap);
            init_die(&e);
        }
    }
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    long rc = sys_capget(&header, data);
    for (int i = 0; rc == 0 && i < 2; i++) {
        unsigned int word = (unsigned int)(kept >> (32 * i));
        data[i].effective &= word;
        data[i].permitted &= word;
        data[i].inheritable &= word;
    }
    if (rc == 0)
        rc = sys_capset(&header, data);
    if (rc == 0)
        rc = INIT_SYS5(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (rc < 0) {
        fbrt_fail(&e, (int)-rc, "keep only the container's capabilities (mask %llx)", kept);
        init_die(&e);
    }
}

int main(int argc, char **argv) {
    struct init_options o;
    parse_options(argc, argv, &o);
    sys_prctl(PR_SET_NAME, (unsigned long)FBRT_INIT_NAME);
    /* Signals stay blocked here and are read from a signalfd, to be forwarded or reaped.
     * Every disposition is the default already, which the command inherits: the set-up
     * child put back those the agent ignores (child.c), the exec the handled ones. */
    init_sigset all = INIT_ALL_SIGNALS;
    sys_sigprocmask(SIG_SETMASK, &all);
    /* The error, status and lifeline pipes stay open across the command's exec only until
     * it runs: the command marks them close-on-exec in its own descriptor table
     * (init_exec_command), one call there instead of three here. */
    struct fbrt_error e;
    memset(&e, 0, sizeof(e));
    long signals = sys_signalfd(&all, SFD_CLOEXEC);
    if (signals < 0) {
        fbrt_fail(&e, (int)-signals, "signalfd for the container's PID 1");
        init_die(&e);
    }
    if (o.drop_caps)
        drop_capabilities(o.caps_kept);
    pin_to_this_cpu();
    long command = spawn_command(&o);
    init_affinity_restore();
    if (command < 0) {
        fbrt_fail(&e, (int)-command, "fork the container command");
        init_die(&e);
    }
    /* The command's copy of the error pipe closes when it executes (or after it reported
     * why not): the agent reads EOF then, and knows the command runs. PID 1 lets go of its
     * own copy and of the job's stdio with it, so that the job's pipes end with the
     * command's last process, in one close_range: it opens nothing afterwards, so nothing
     * lands on 0..2 (it used to put /dev/null there: an open, three dup2 and two closes). */
    init_close_low(FBRT_FD_ERROR);
    struct pollfd watch[2] = {{(int)signals, POLLIN, 0}, {FBRT_FD_LIFELINE, POLLIN, 0}};
    unsigned long nwatch = o.lifeline ? 2 : 1;
    for (;;) {
        if (sys_poll_forever(watch, nwatch) <= 0)
            continue;
        /* The agent is gone: PID 1 exiting takes the whole PID namespace with it. */
        if (nwatch == 2 && watch[1].revents)
            sys_exit(137);
        struct signalfd_siginfo info;
        if (!(watch[0].revents & POLLIN) ||
            sys_read((int)signals, &info, sizeof(info)) != sizeof(info))
            continue;
        if (info.ssi_signo == SIGCHLD)
            reap(command);
        else
            sys_kill((pid_t)command, (int)info.ssi_signo);
    }
}
