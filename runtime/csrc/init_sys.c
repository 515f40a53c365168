/* The container init's run-time support (see init_sys.h): the entry point, the system call
 * instruction, and the memory and string functions a C program needs without a C library.
 * glibc's static archive still provides strerrordesc_np to error.c: a table lookup that
 * needs none of the start-up skipped here. */
#include "init_sys.h"

char **init_environ;

int main(int argc, char **argv);

/* Called by _start with the initial stack: argc, then argv[], NULL, then envp[], NULL. */
void __attribute__((noreturn, used)) init_start(long *stack) {
    int argc = (int)stack[0];
    char **argv = (char **)(stack + 1);
    init_environ = argv + argc + 1;
    sys_exit(main(argc, argv));
}

#if defined(__x86_64__)
__asm__(".text\n"
        ".global _start\n"
        ".type _start,@function\n"
        "_start:\n"
        "    xor %rbp, %rbp\n"
        "    mov %rsp, %rdi\n"
        "    and $-16, %rsp\n"
        "    call init_start\n"
        "    hlt\n");

long init_syscall(long number, long a, long b, long c, long d, long e, long f) {
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return result;
}
#elif defined(__aarch64__)
__asm__(".text\n"
        ".global _start\n"
        ".type _start,%function\n"
        "_start:\n"
        "    mov x29, #0\n"
        "    mov x30, #0\n"
        "    mov x0, sp\n"
        "    and x1, x0, #-16\n"
        "    mov sp, x1\n"
        "    bl init_start\n"
        "    brk #0\n");

long init_syscall(long number, long a, long b, long c, long d, long e, long f) {
    register long x8 __asm__("x8") = number;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc #0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    return x0;
}
#else
#error "fbrt-init: no system call entry for this architecture (x86_64 and aarch64 only)"
#endif

void *memset(void *dest, int c, size_t n) {
    unsigned char *d = dest;
    while (n--)
        *d++ = (unsigned char)c;
    return dest;
}

void *memcpy(void *dest, const void *src, size_t n) {
    unsigned char *d = dest;
    const unsigned char *s = src;
    while (n--)
        *d++ = *s++;
    return dest;
}

size_t strlen(const char *s) {
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

size_t strnlen(const char *s, size_t max) {
    size_t n = 0;
    while (n < max && s[n])
        n++;
    return n;
}

int init_strcmp(const char *a, const char *b) {
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return (unsigned char)*a - (unsigned char)*b;
}

int init_starts_with(const char *text, const char *prefix) {
    while (*prefix)
        if (*text++ != *prefix++)
            return 0;
    return 1;
}

const char *init_strchrnul(const char *s, int c) {
    while (*s && *s != (char)c)
        s++;
    return s;
}
