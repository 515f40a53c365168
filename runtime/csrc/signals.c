/* Which signals the agent ignores, for the set-up child to put back to their default before
 * the init's exec (child.c): an ignored disposition survives exec, a handled one does not. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "container.h"

#define SIGIGN_FIELD "\nSigIgn:\t"

unsigned long long fbrt_ignored_signals(void) {
    char status[4096];
    int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ~0ULL;
    ssize_t n = read(fd, status, sizeof(status) - 1);
    close(fd);
    if (n <= 0)
        return ~0ULL;
    status[n] = '\0';
    const char *field = strstr(status, SIGIGN_FIELD);
    if (!field)
        return ~0ULL;
    unsigned long long mask = 0;
    int digits = 0;
    for (const char *c = field + strlen(SIGIGN_FIELD); *c && *c != '\n'; c++, digits++) {
        int v = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
        if (v < 0 || digits == 16)
            return ~0ULL;
        mask = mask << 4 | (unsigned long long)v;
    }
    return digits ? mask : ~0ULL;
}
