/* Helpers shared by the C files of the runtime and its init; not part of the cffi interface.
 *
 * Everything declared here is async-signal-safe (system calls, stack buffers, no malloc, no
 * locale, no stdio): the container's setup child runs on the agent's memory between clone
 * and exec (see start.c) and may call nothing else. */
#ifndef FBRT_INTERNAL_H
#define FBRT_INTERNAL_H

#include <stddef.h>

#include "fbrt.h"

/* ---- formatting (error.c) ----
 * A printf subset: %s %.*s %c %d %i %u %x with the l, ll and z sizes, and %%. The format
 * attribute lets the compiler check the arguments; the conversions used must stay within
 * that subset. */

/* Fill ERR with "<what>: <description of errnum>" and return -errnum. */
int fbrt_fail(struct fbrt_error *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Write the formatted text into OUT (CAP bytes, always NUL-terminated). Returns 0, or
 * -ENAMETOOLONG when it did not fit: a truncated path is never used as if it were whole. */
int fbrt_format(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- network (net.c) ---- */

/* Bring the loopback interface of the current network namespace up. */
int fbrt_net_lo_up(struct fbrt_error *err);
/* Enter the network namespace open on FD (setns), then bring its lo up. */
int fbrt_net_join(int fd, struct fbrt_error *err);

/* ---- the contract between the setup child (child.c) and the init (init.c) ----
 * The child places these descriptors before it executes the init; the init's arguments are
 * INIT_NAME, then options, then "--" and the command's argv. */

#define FBRT_FD_ERROR 3    /* a struct fbrt_error is written here if the command cannot start */
#define FBRT_FD_STATUS 4   /* the command's 4-byte wait status is written here */
#define FBRT_FD_LIFELINE 5 /* EOF here: the agent died (only with FBRT_OPT_LIFELINE) */

#define FBRT_INIT_NAME "fbrt-init"
#define FBRT_OPT_UID "--uid="       /* decimal */
#define FBRT_OPT_GID "--gid="       /* decimal */
#define FBRT_OPT_GROUPS "--groups=" /* comma-separated decimals; empty: none */
#define FBRT_OPT_CWD "--cwd="       /* absent: stay in / */
#define FBRT_OPT_PATH "--path="     /* absent: the default PATH */
#define FBRT_OPT_LIFELINE "--lifeline"
/* The capabilities the container keeps, a 64-bit mask in hex (bit N: capability N); absent:
 * every one PID 1 was started with. */
#define FBRT_OPT_CAPS "--caps="
/* The agent thread's CPU affinity, which PID 1 and the command keep (the start may run
 * pinned to the thread's CPU: see start.c): a cpu_set_t's bytes, two hex digits each. */
#define FBRT_OPT_AFFINITY "--affinity="
#define FBRT_AFFINITY_BYTES 128 /* CPU_SETSIZE (1024) bits */

#define FBRT_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#endif
