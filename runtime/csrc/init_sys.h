/* The container init's system interface: raw system calls, no C library at run time.
 *
 * fbrt-init is linked without glibc's start-up code (-nostdlib, its own _start in
 * init_sys.c). That start-up is most of a static glibc program's cost here: it runs CPUID
 * dozens of times (init_cpu_features, the cache sizes), and CPUID traps to the hypervisor in
 * a virtual machine, which made the init's start cost as much as the command's own. Without
 * it there is no TLS, hence no errno and no glibc wrapper (they use TLS for errno and for
 * cancellation), so every call below returns the kernel's result: >= 0, or -errno.
 *
 * glibc headers are still included, for constants and types only. */
#ifndef FBRT_INIT_SYS_H
#define FBRT_INIT_SYS_H

#include <fcntl.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/types.h>

long init_syscall(long number, long a, long b, long c, long d, long e, long f);

#define INIT_SYS0(n) init_syscall((n), 0, 0, 0, 0, 0, 0)
#define INIT_SYS1(n, a) init_syscall((n), (long)(a), 0, 0, 0, 0, 0)
#define INIT_SYS2(n, a, b) init_syscall((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define INIT_SYS3(n, a, b, c) init_syscall((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define INIT_SYS4(n, a, b, c, d) \
    init_syscall((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define INIT_SYS5(n, a, b, c, d, e) \
    init_syscall((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

/* The kernel's sigset_t for the rt_* calls: 64 signals, one bit each. */
typedef unsigned long long init_sigset;
#define INIT_SIGSET_BYTES sizeof(init_sigset)
#define INIT_ALL_SIGNALS (~0ULL)

/* The environment _start found; the command is executed with it. */
extern char **init_environ;

static inline void __attribute__((noreturn)) sys_exit(int code) {
    for (;;)
        INIT_SYS1(SYS_exit_group, code);
}
static inline long sys_read(int fd, void *buf, size_t len) {
    return INIT_SYS3(SYS_read, fd, buf, len);
}
static inline long sys_write(int fd, const void *buf, size_t len) {
    return INIT_SYS3(SYS_write, fd, buf, len);
}
static inline long sys_close(int fd) { return INIT_SYS1(SYS_close, fd); }
static inline long sys_open(const char *path, int flags) {
    return INIT_SYS4(SYS_openat, -100 /* AT_FDCWD */, path, flags, 0);
}
/* dup2 without the dup2 call (aarch64 has only dup3, which refuses OLD == NEW). */
static inline long sys_dup2(int old, int new_fd) {
    return old == new_fd ? new_fd : INIT_SYS3(SYS_dup3, old, new_fd, 0);
}
static inline long sys_fcntl(int fd, int cmd, long arg) {
    return INIT_SYS3(SYS_fcntl, fd, cmd, arg);
}
static inline long sys_close_range(unsigned int first, unsigned int last, unsigned int flags) {
    return INIT_SYS3(SYS_close_range, first, last, flags);
}
#define INIT_CLOSE_RANGE_CLOEXEC (1U << 2) /* linux/close_range.h, Linux 5.11 */

/* Close descriptors 0..LAST in one call; one by one where close_range is missing. */
static inline void init_close_low(int last) {
    if (sys_close_range(0, (unsigned int)last, 0) < 0)
        for (int fd = 0; fd <= last; fd++)
            sys_close(fd);
}

/* Mark every descriptor from FIRST on close-on-exec in one call; where the kernel lacks
 * CLOSE_RANGE_CLOEXEC, FIRST..UPTO one by one (the caller's highest open one). */
static inline void init_cloexec_from(int first, int upto) {
    if (sys_close_range((unsigned int)first, ~0U, INIT_CLOSE_RANGE_CLOEXEC) < 0)
        for (int fd = first; fd <= upto; fd++)
            sys_fcntl(fd, F_SETFD, FD_CLOEXEC);
}
static inline long sys_prctl(int option, unsigned long arg) {
    return INIT_SYS5(SYS_prctl, option, arg, 0, 0, 0);
}
static inline long sys_capget(void *header, void *data) {
    return INIT_SYS2(SYS_capget, header, data);
}
static inline long sys_capset(void *header, const void *data) {
    return INIT_SYS2(SYS_capset, header, data);
}
static inline long sys_sigprocmask(int how, const init_sigset *set) {
    return INIT_SYS4(SYS_rt_sigprocmask, how, set, 0, INIT_SIGSET_BYTES);
}
static inline long sys_signalfd(const init_sigset *set, int flags) {
    return INIT_SYS4(SYS_signalfd4, -1, set, INIT_SIGSET_BYTES, flags);
}
/* fork: a plain clone that signals SIGCHLD; the child continues on a copy of the stack. */
static inline long sys_fork(void) { return INIT_SYS5(SYS_clone, 17 /* SIGCHLD */, 0, 0, 0, 0); }
static inline long sys_wait_any(int *status, int options) {
    return INIT_SYS4(SYS_wait4, -1, status, options, 0);
}
static inline long sys_kill(pid_t pid, int sig) { return INIT_SYS2(SYS_kill, pid, sig); }
/* poll with no timeout (ppoll: aarch64 has no poll). */
static inline long sys_poll_forever(void *fds, unsigned long nfds) {
    return INIT_SYS5(SYS_ppoll, fds, nfds, 0, 0, INIT_SIGSET_BYTES);
}
static inline long sys_setgroups(size_t n, const gid_t *groups) {
    return INIT_SYS2(SYS_setgroups, n, groups);
}
static inline long sys_setresgid(gid_t g) { return INIT_SYS3(SYS_setresgid, g, g, g); }
static inline long sys_setresuid(uid_t u) { return INIT_SYS3(SYS_setresuid, u, u, u); }
static inline long sys_chdir(const char *path) { return INIT_SYS1(SYS_chdir, path); }
static inline long sys_umask(unsigned int mask) { return INIT_SYS1(SYS_umask, mask); }
static inline long sys_sched_getaffinity(void *mask, size_t len) {
    return INIT_SYS3(SYS_sched_getaffinity, 0, len, mask);
}
static inline long sys_sched_setaffinity(const void *mask, size_t len) {
    return INIT_SYS3(SYS_sched_setaffinity, 0, len, mask);
}
static inline long sys_getcpu(unsigned int *cpu) { return INIT_SYS3(SYS_getcpu, cpu, 0, 0); }
static inline long sys_execve(const char *path, char *const *argv, char *const *envp) {
    return INIT_SYS3(SYS_execve, path, argv, envp);
}

/* The few string functions the init uses (the compiler may also emit memset and memcpy
 * calls, which init_sys.c defines). */
int init_strcmp(const char *a, const char *b);
int init_starts_with(const char *text, const char *prefix);
const char *init_strchrnul(const char *s, int c);

#endif
