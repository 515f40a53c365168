/* Helpers shared by the C files of the runtime; not part of the cffi interface. */
#ifndef FBRT_INTERNAL_H
#define FBRT_INTERNAL_H

#include "fbrt.h"

/* Fill ERR with "<what>: strerror(errnum)" and return -errnum. */
int fbrt_fail(struct fbrt_error *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Bring the loopback interface of the current network namespace up. */
int fbrt_net_lo_up(struct fbrt_error *err);

#endif
