/* Network namespace bring-up in the container's child: lo up, in a namespace of its own or in
 * the one the agent prepared for an isolated job (its veth, address and routes configured
 * from Python with pyroute2, runtime/network.py). */
#include <errno.h>
#include <sched.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fbrt_internal.h"

int fbrt_net_lo_up(struct fbrt_error *err) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return fbrt_fail(err, errno, "socket for configuring lo");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    strcpy(ifr.ifr_name, "lo");
    int rc = 0;
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
        rc = fbrt_fail(err, errno, "ioctl SIOCGIFFLAGS lo");
    } else {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
            rc = fbrt_fail(err, errno, "ioctl SIOCSIFFLAGS lo up");
    }
    close(s);
    return rc;
}

int fbrt_net_join(int fd, struct fbrt_error *err) {
    if (setns(fd, CLONE_NEWNET) < 0)
        return fbrt_fail(err, errno, "join the job's network namespace (setns descriptor %d)", fd);
    return fbrt_net_lo_up(err);
}
