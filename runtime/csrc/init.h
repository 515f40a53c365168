/* The container init (a static program of its own: init.c, init_exec.c, error.c). */
#ifndef FBRT_INIT_H
#define FBRT_INIT_H

#include <string.h>
#include <sys/types.h>

#include "fbrt_internal.h"
#include "init_sys.h"

/* What the agent asked for, from the init's options (see fbrt_internal.h). */
struct init_options {
    uid_t uid;
    gid_t gid;
    gid_t *groups;
    size_t ngroups;
    const char *cwd;     /* NULL: stay in / */
    const char *path;    /* NULL: FBRT_DEFAULT_PATH */
    int lifeline;        /* FBRT_FD_LIFELINE is open */
    int drop_caps;       /* FBRT_OPT_CAPS was given: keep only caps_kept */
    unsigned long long caps_kept;
    char *const *argv;   /* the command */
};

/* Give this process the CPU affinity PID 1 had before it cloned the command on its own CPU
 * (init.c); nothing when PID 1 was not pinned. */
void init_affinity_restore(void);

/* Write E to the error pipe and exit 127: the agent reports it as the start failure. */
void __attribute__((noreturn)) init_die(const struct fbrt_error *e);

/* In the forked command process: signals unblocked, credentials, working directory, then
 * execute the command, searching PATH when argv[0] has no slash. Never returns. */
void __attribute__((noreturn)) init_exec_command(const struct init_options *o);

#endif
