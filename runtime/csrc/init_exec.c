/* The container command's last steps before exec, in the process the init forked. */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "init.h"

extern char **environ;

/* Try each element of PATH in turn, as execvp does: an empty element is the working
 * directory (POSIX; the bare name resolves against it), never "/". Returns the errno to
 * report: the last failure other than "not there", else ENOENT. */
static int exec_search(const char *file, const char *path, char *const *argv) {
    int saved = ENOENT;
    for (const char *p = path;;) {
        const char *colon = strchrnul(p, ':');
        size_t dir_len = (size_t)(colon - p);
        char candidate[4096];
        int rc = dir_len ? fbrt_format(candidate, sizeof(candidate), "%.*s/%s", (int)dir_len, p,
                                       file)
                         : fbrt_format(candidate, sizeof(candidate), "%s", file);
        if (rc == 0) {
            execve(candidate, argv, environ);
            if (errno != ENOENT && errno != ENOTDIR)
                saved = errno;
        } else {
            saved = ENAMETOOLONG;
        }
        if (!*colon)
            return saved;
        p = colon + 1;
    }
}

void init_exec_command(const struct init_options *o) {
    struct fbrt_error e;
    memset(&e, 0, sizeof(e));
    for (int sig = 1; sig < NSIG; sig++)
        signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    umask(022);
    if (setgroups(o->ngroups, o->groups) < 0) {
        fbrt_fail(&e, errno, "setgroups (%zu groups)", o->ngroups);
        init_die(&e);
    }
    if (setresgid(o->gid, o->gid, o->gid) < 0) {
        fbrt_fail(&e, errno, "setgid %u", (unsigned)o->gid);
        init_die(&e);
    }
    if (setresuid(o->uid, o->uid, o->uid) < 0) {
        fbrt_fail(&e, errno, "setuid %u", (unsigned)o->uid);
        init_die(&e);
    }
    if (o->cwd && chdir(o->cwd) < 0) {
        fbrt_fail(&e, errno, "chdir %s (working directory, as uid %u)", o->cwd,
                  (unsigned)o->uid);
        init_die(&e);
    }
    const char *file = o->argv[0];
    if (strchr(file, '/')) {
        execve(file, o->argv, environ);
        fbrt_fail(&e, errno, "exec %s", file);
        init_die(&e);
    }
    const char *path = o->path ? o->path : FBRT_DEFAULT_PATH;
    fbrt_fail(&e, exec_search(file, path, o->argv), "exec %s (searched PATH=%s)", file, path);
    init_die(&e);
}
