/* Network namespace bring-up: only lo for now (a later issue configures the rest). */
#include <errno.h>
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
