/* clone3 with the child on a stack of its own, calling a function: shared by the agent's
 * start (start.c) and the container init (init.c), which has no C library at run time, so
 * this is system calls and constants only. */
#ifndef FBRT_CLONE_RUN_H
#define FBRT_CLONE_RUN_H

#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL /* Linux 5.7 */
#endif

/* clone3's arguments up to the cgroup (CLONE_ARGS_SIZE_VER2), as <linux/sched.h> of 5.7 has
 * them; declared here so that older headers build too. */
struct fbrt_clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    uint64_t set_tid, set_tid_size, cgroup;
};

/* clone3 with the child on ARGS's stack calling FN(ARG), then exit with its result: the child
 * starts on another stack, so it cannot return through this function's frame as a forked
 * child would. The syscall and the child's first instructions are glibc's __clone3 (which
 * glibc does not export); returns the pid, or -errno, or -ENOSYS on other architectures. */
static inline long fbrt_clone3_run(struct fbrt_clone_args *ca, int (*fn)(void *), void *arg) {
#if defined(__x86_64__)
    long ret;
    register void *r8 __asm__("r8") = (void *)fn;
    register void *r9 __asm__("r9") = arg;
    __asm__ volatile("syscall\n\t"
                     "testq %%rax, %%rax\n\t"
                     "jnz 1f\n\t"
                     /* the child: its stack is 16-byte aligned, as a call needs */
                     "xorl %%ebp, %%ebp\n\t"
                     "movq %%r9, %%rdi\n\t"
                     "callq *%%r8\n\t"
                     "movl %%eax, %%edi\n\t"
                     "movl %[nr_exit], %%eax\n\t"
                     "syscall\n\t"
                     "hlt\n"
                     "1:\n\t"
                     : "=a"(ret)
                     : "0"((long)SYS_clone3), "D"(ca), "S"(sizeof(*ca)), "r"(r8), "r"(r9),
                       [nr_exit] "i"(SYS_exit)
                     : "rcx", "r11", "memory", "cc");
    return ret;
#elif defined(__aarch64__)
    register long x0 __asm__("x0") = (long)ca;
    register long x1 __asm__("x1") = (long)sizeof(*ca);
    register long x8 __asm__("x8") = SYS_clone3;
    register void *x10 __asm__("x10") = (void *)fn;
    register void *x11 __asm__("x11") = arg;
    __asm__ volatile("svc #0\n\t"
                     "cbnz x0, 1f\n\t"
                     "mov x29, #0\n\t"
                     "mov x0, x11\n\t"
                     "blr x10\n\t"
                     "mov x8, %[nr_exit]\n\t"
                     "svc #0\n"
                     "1:\n\t"
                     : "+r"(x0)
                     : "r"(x1), "r"(x8), "r"(x10), "r"(x11), [nr_exit] "i"(SYS_exit)
                     : "x30", "memory", "cc");
    return x0;
#else
    (void)ca;
    (void)fn;
    (void)arg;
    return -ENOSYS;
#endif
}

#endif
