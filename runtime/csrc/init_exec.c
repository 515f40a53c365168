/* The container command's last steps before exec, in the process the init forked. */
#include <errno.h>
#include <signal.h>

#include "init.h"

/* Try each element of PATH in turn, as execvp does: an empty element is the working
 * directory (POSIX; the bare name resolves against it), never "/". Returns the errno to
 * report: the last failure other than "not there", else ENOENT. */
static int exec_search(const char *file, const char *path, char *const *argv) {
    int saved = ENOENT;
    for (const char *p = path;;) {
        const char *colon = init_strchrnul(p, ':');
        size_t dir_len = (size_t)(colon - p);
        char candidate[4096];
        int rc = dir_len ? fbrt_format(candidate, sizeof(candidate), "%.*s/%s", (int)dir_len, p,
                                       file)
                         : fbrt_format(candidate, sizeof(candidate), "%s", file);
        if (rc == 0) {
            long err = -sys_execve(candidate, argv, init_environ);
            if (err != ENOENT && err != ENOTDIR)
                saved = (int)err;
        } else {
            saved = ENAMETOOLONG;
        }
        if (!*colon)
            return saved;
        p = colon + 1;
    }
}

void init_exec_command(const struct init_options *o) {
    /* Dispositions are already the defaults: the set-up child put back the ignored ones, the
     * init's exec the handled ones, and PID 1 installs no handler (it reads signals from a
     * signalfd). Only the mask is left. */
    init_sigset none = 0;
    sys_sigprocmask(SIG_SETMASK, &none);
    /* Nothing of PID 1's passes on but stdio: the error pipe closes at the exec (the agent's
     * EOF: the command runs), the status and lifeline pipes and the signalfd with it. In
     * this process's own table (cloned without CLONE_FILES), so PID 1 keeps its copies. */
    init_cloexec_from(FBRT_FD_ERROR, FBRT_FD_LIFELINE);
    sys_umask(022);
    init_affinity_restore(); /* cloned on PID 1's CPU (init.c) */
    struct fbrt_error e;
    memset(&e, 0, sizeof(e));
    long rc = sys_setgroups(o->ngroups, o->groups);
    if (rc < 0) {
        fbrt_fail(&e, (int)-rc, "setgroups (%zu groups)", o->ngroups);
        init_die(&e);
    }
    if ((rc = sys_setresgid(o->gid)) < 0) {
        fbrt_fail(&e, (int)-rc, "setgid %u", (unsigned)o->gid);
        init_die(&e);
    }
    if ((rc = sys_setresuid(o->uid)) < 0) {
        fbrt_fail(&e, (int)-rc, "setuid %u", (unsigned)o->uid);
        init_die(&e);
    }
    /* "/" is where the set-up child left PID 1 (and so this process): no walk for it. */
    if (o->cwd && init_strcmp(o->cwd, "/") != 0 && (rc = sys_chdir(o->cwd)) < 0) {
        fbrt_fail(&e, (int)-rc, "chdir %s (working directory, as uid %u)", o->cwd,
                  (unsigned)o->uid);
        init_die(&e);
    }
    const char *file = o->argv[0];
    if (*init_strchrnul(file, '/')) {
        rc = sys_execve(file, o->argv, init_environ);
        fbrt_fail(&e, (int)-rc, "exec %s", file);
        init_die(&e);
    }
    const char *path = o->path ? o->path : FBRT_DEFAULT_PATH;
    fbrt_fail(&e, exec_search(file, path, o->argv), "exec %s (searched PATH=%s)", file, path);
    init_die(&e);
}
