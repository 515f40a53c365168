/* fbrt-init: PID 1 of every container, a small static program (like tini or catatonit).
 *
 * The setup child (child.c) executes it from a sealed memfd once the root is built, with the
 * descriptors of fbrt_internal.h in place and the command's environment. It starts the
 * command, forwards every signal it receives to it, reaps orphans, writes the command's exact
 * wait status to FBRT_FD_STATUS and exits 0; when the agent dies (EOF on the lifeline) it
 * exits 137, which takes the whole PID namespace with it. Statically linked, it runs in any
 * image, with or without a libc. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init.h"

void init_die(const struct fbrt_error *e) {
    ssize_t n = write(FBRT_FD_ERROR, e, sizeof(*e));
    (void)n;
    _exit(127);
}

static void __attribute__((noreturn)) usage_error(const char *what, const char *arg) {
    struct fbrt_error e;
    memset(&e, 0, sizeof(e));
    fbrt_fail(&e, EINVAL, "%s: %s %s", FBRT_INIT_NAME, what, arg);
    init_die(&e);
}

static unsigned long parse_id(const char *text, const char *arg) {
    char *end;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (errno || end == text || *end || value > 0xFFFFFFFEUL)
        usage_error("bad number in", arg);
    return value;
}

static void parse_groups(const char *list, const char *arg, struct init_options *o) {
    o->ngroups = 0;
    if (!*list)
        return;
    size_t n = 1;
    for (const char *c = list; *c; c++)
        n += *c == ',';
    o->groups = calloc(n, sizeof(gid_t));
    if (!o->groups)
        usage_error("no memory for", arg);
    char *copy = strdup(list);
    if (!copy)
        usage_error("no memory for", arg);
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save))
        o->groups[o->ngroups++] = (gid_t)parse_id(item, arg);
    free(copy);
}

static const char *option_value(const char *arg, const char *name) {
    size_t len = strlen(name);
    return strncmp(arg, name, len) == 0 ? arg + len : NULL;
}

static void parse_options(int argc, char **argv, struct init_options *o) {
    memset(o, 0, sizeof(*o));
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *arg = argv[i];
        const char *value;
        if ((value = option_value(arg, FBRT_OPT_UID)))
            o->uid = (uid_t)parse_id(value, arg);
        else if ((value = option_value(arg, FBRT_OPT_GID)))
            o->gid = (gid_t)parse_id(value, arg);
        else if ((value = option_value(arg, FBRT_OPT_GROUPS)))
            parse_groups(value, arg, o);
        else if ((value = option_value(arg, FBRT_OPT_CWD)))
            o->cwd = value;
        else if ((value = option_value(arg, FBRT_OPT_PATH)))
            o->path = value;
        else if (strcmp(arg, FBRT_OPT_LIFELINE) == 0)
            o->lifeline = 1;
        else
            usage_error("unknown option", arg);
    }
    if (i + 1 >= argc)
        usage_error("no command after", "--");
    o->argv = argv + i + 1;
}

/* Reap every child that has ended; when the command is among them, report it and exit. */
static void reap(pid_t command) {
    for (;;) {
        int status;
        pid_t reaped = waitpid(-1, &status, WNOHANG);
        if (reaped <= 0)
            return;
        if (reaped == command) {
            ssize_t n = write(FBRT_FD_STATUS, &status, sizeof(status));
            (void)n;
            _exit(0);
        }
    }
}

int main(int argc, char **argv) {
    struct init_options o;
    parse_options(argc, argv, &o);
    prctl(PR_SET_NAME, FBRT_INIT_NAME, 0, 0, 0);
    /* Signals stay blocked here and are read from a signalfd, to be forwarded or reaped.
     * Dispositions go back to the default: the agent ignores some (SIGPIPE) and an ignored
     * SIGCHLD would have the kernel reap the command before its status is read. */
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    for (int sig = 1; sig < NSIG; sig++)
        signal(sig, SIG_DFL);
    fcntl(FBRT_FD_ERROR, F_SETFD, FD_CLOEXEC);
    fcntl(FBRT_FD_STATUS, F_SETFD, FD_CLOEXEC);
    if (o.lifeline)
        fcntl(FBRT_FD_LIFELINE, F_SETFD, FD_CLOEXEC);
    struct fbrt_error e;
    memset(&e, 0, sizeof(e));
    int signals = signalfd(-1, &all, SFD_CLOEXEC);
    if (signals < 0) {
        fbrt_fail(&e, errno, "signalfd for the container's PID 1");
        init_die(&e);
    }
    pid_t command = fork();
    if (command < 0) {
        fbrt_fail(&e, errno, "fork the container command");
        init_die(&e);
    }
    if (command == 0)
        init_exec_command(&o);
    /* The command's copy of the error pipe closes when it executes (or after it reported
     * why not): the agent reads EOF then, and knows the command runs. */
    close(FBRT_FD_ERROR);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        close(null);
    }
    struct pollfd watch[2] = {{signals, POLLIN, 0}, {FBRT_FD_LIFELINE, POLLIN, 0}};
    nfds_t nwatch = o.lifeline ? 2 : 1;
    for (;;) {
        if (poll(watch, nwatch, -1) <= 0)
            continue;
        /* The agent is gone: PID 1 exiting takes the whole PID namespace with it. */
        if (nwatch == 2 && watch[1].revents)
            _exit(137);
        struct signalfd_siginfo info;
        if (!(watch[0].revents & POLLIN) || read(signals, &info, sizeof(info)) != sizeof(info))
            continue;
        if (info.ssi_signo == SIGCHLD)
            reap(command);
        else
            kill(command, (int)info.ssi_signo);
    }
}
