/* RLIMIT_MEMLOCK planning: the job's memory allocation, or the highest permitted value. */
#include <errno.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fbrt_internal.h"

static int has_cap_sys_resource(void) {
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &header, data) < 0)
        return 0;
    return (data[CAP_SYS_RESOURCE / 32].effective >> (CAP_SYS_RESOURCE % 32)) & 1;
}

int fbrt_memlock_plan(int64_t requested, int64_t *granted, int64_t *hard, int *clamped,
                      struct fbrt_error *err) {
    struct rlimit current;
    if (getrlimit(RLIMIT_MEMLOCK, &current) < 0)
        return fbrt_fail(err, errno, "getrlimit RLIMIT_MEMLOCK");
    *hard = current.rlim_max == RLIM_INFINITY ? INT64_MAX : (int64_t)current.rlim_max;
    *clamped = 0;
    *granted = requested;
    if (requested > *hard && !has_cap_sys_resource()) {
        *granted = *hard;
        *clamped = 1;
    }
    return 0;
}
