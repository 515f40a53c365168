/* Error reporting: every failure says what was attempted, then strerror(errno). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fbrt_internal.h"

int fbrt_fail(struct fbrt_error *err, int errnum, const char *fmt, ...) {
    if (errnum <= 0)
        errnum = EIO;
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        if (n < 0)
            n = 0;
        if ((size_t)n < sizeof(err->msg))
            snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %s", strerror(errnum));
        err->err = errnum;
    }
    return -errnum;
}
