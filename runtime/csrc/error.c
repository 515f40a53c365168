/* Error reporting and bounded formatting, async-signal-safe.
 *
 * vsnprintf and strerror are not: they may take locale locks or allocate, which can deadlock
 * a child cloned from a multi-threaded process (another thread may have held the lock at
 * clone time) and, in a child sharing the agent's memory, corrupt the agent's heap. This
 * formatter writes only into the caller's buffer, and the errno's description comes from
 * glibc's static table (strerrordesc_np), the text strerror gives in the C locale. */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "fbrt_internal.h"

struct sink {
    char *out;
    size_t cap; /* including the terminating NUL */
    size_t len;
    int overflow;
};

static void put(struct sink *s, const char *text, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s->len + 1 < s->cap)
            s->out[s->len++] = text[i];
        else
            s->overflow = 1;
    }
    if (s->cap)
        s->out[s->len] = '\0';
}

static void put_unsigned(struct sink *s, unsigned long long v, unsigned base) {
    char digits[24];
    size_t n = 0;
    do {
        digits[sizeof(digits) - ++n] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    put(s, digits + sizeof(digits) - n, n);
}

static void put_signed(struct sink *s, long long v) {
    if (v < 0) {
        put(s, "-", 1);
        put_unsigned(s, 0ULL - (unsigned long long)v, 10);
    } else {
        put_unsigned(s, (unsigned long long)v, 10);
    }
}

/* The size modifier of one conversion: none, l, ll or z. */
enum size { SIZE_INT, SIZE_LONG, SIZE_LLONG, SIZE_SIZE };

static long long signed_arg(va_list *ap, enum size size) {
    switch (size) {
    case SIZE_LONG:
        return va_arg(*ap, long);
    case SIZE_LLONG:
        return va_arg(*ap, long long);
    case SIZE_SIZE:
        return (long long)va_arg(*ap, ptrdiff_t);
    default:
        return va_arg(*ap, int);
    }
}

static unsigned long long unsigned_arg(va_list *ap, enum size size) {
    switch (size) {
    case SIZE_LONG:
        return va_arg(*ap, unsigned long);
    case SIZE_LLONG:
        return va_arg(*ap, unsigned long long);
    case SIZE_SIZE:
        return va_arg(*ap, size_t);
    default:
        return va_arg(*ap, unsigned int);
    }
}

static void format(struct sink *s, const char *fmt, va_list *ap) {
    if (s->cap)
        s->out[s->len] = '\0';
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            put(s, f, 1);
            continue;
        }
        const char *start = f++;
        int precision = -1;
        if (f[0] == '.' && f[1] == '*') {
            precision = va_arg(*ap, int);
            f += 2;
        }
        enum size size = SIZE_INT;
        if (f[0] == 'l' && f[1] == 'l') {
            size = SIZE_LLONG;
            f += 2;
        } else if (*f == 'l') {
            size = SIZE_LONG;
            f++;
        } else if (*f == 'z') {
            size = SIZE_SIZE;
            f++;
        }
        switch (*f) {
        case 's': {
            const char *text = va_arg(*ap, const char *);
            if (!text)
                text = "(null)";
            put(s, text, precision >= 0 ? strnlen(text, (size_t)precision) : strlen(text));
            break;
        }
        case 'c': {
            char c = (char)va_arg(*ap, int);
            put(s, &c, 1);
            break;
        }
        case 'd':
        case 'i':
            put_signed(s, signed_arg(ap, size));
            break;
        case 'u':
            put_unsigned(s, unsigned_arg(ap, size), 10);
            break;
        case 'x':
            put_unsigned(s, unsigned_arg(ap, size), 16);
            break;
        case '%':
            put(s, "%", 1);
            break;
        default:
            /* Outside the subset: show the directive as written rather than guess. */
            if (!*f)
                f--;
            put(s, start, (size_t)(f - start + 1));
            break;
        }
    }
}

int fbrt_format(char *out, size_t cap, const char *fmt, ...) {
    struct sink s = {out, cap, 0, cap == 0};
    va_list ap;
    va_start(ap, fmt);
    format(&s, fmt, &ap);
    va_end(ap);
    return s.overflow ? -ENAMETOOLONG : 0;
}

int fbrt_fail(struct fbrt_error *err, int errnum, const char *fmt, ...) {
    if (errnum <= 0)
        errnum = EIO;
    if (err) {
        struct sink s = {err->msg, sizeof(err->msg), 0, 0};
        va_list ap;
        va_start(ap, fmt);
        format(&s, fmt, &ap);
        va_end(ap);
        const char *description = strerrordesc_np(errnum);
        put(&s, ": ", 2);
        if (description) {
            put(&s, description, strlen(description));
        } else {
            put(&s, "errno ", 6);
            put_unsigned(&s, (unsigned)errnum, 10);
        }
        err->err = errnum;
    }
    return -errnum;
}
