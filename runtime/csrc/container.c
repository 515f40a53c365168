/* Containers: clone(2) into new mount/PID/UTS/IPC (and optionally network) namespaces, build
 * the root from the shared EROFS mount plus an overlay, pivot_root, then run a small PID 1
 * that starts the command, reaps orphans, forwards signals and reports the exact status.
 *
 * The cloned child is a copy of a possibly multi-threaded Python process, so it never calls
 * malloc or glibc's locking wrappers (setuid, fork): only system calls and stack buffers. */
#include <errno.h>
#include <fcntl.h>
#include <elf.h>
#include <link.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fbrt_internal.h"

/* Descriptor numbers inside the container's PID 1. */
#define FD_ERROR 3
#define FD_STATUS 4
#define FD_LIFELINE 5
#define FD_HIGH 64

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Where the child reports a setup failure (the error pipe, wherever it currently is). */
static int report_fd = -1;

static void __attribute__((noreturn)) child_die(const struct fbrt_error *e) {
    if (report_fd >= 0) {
        ssize_t n = write(report_fd, e, sizeof(*e));
        (void)n;
    }
    _exit(127);
}

static int sys_openat2(int dirfd, const char *path, int flags, unsigned int mode) {
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)(flags | O_CLOEXEC);
    how.mode = mode;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/* Open PATH (relative to ROOTFD, resolved as if ROOTFD were /) as an O_PATH descriptor,
 * creating missing directories, and the last component as a directory or an empty file.
 * Symlinks in the image can never lead outside the container's root. */
static int open_in_root(int rootfd, const char *path, int want_dir, struct fbrt_error *e) {
    char prefix[4096];
    while (*path == '/')
        path++;
    size_t len = strlen(path);
    if (len >= sizeof(prefix))
        return fbrt_fail(e, ENAMETOOLONG, "container path /%s", path);
    int parent = sys_openat2(rootfd, ".", O_PATH | O_DIRECTORY, 0);
    if (parent < 0)
        return fbrt_fail(e, errno, "open container root");
    size_t start = 0;
    while (start < len) {
        size_t end = start;
        while (end < len && path[end] != '/')
            end++;
        int last = end >= len || path[end + 1] == '\0';
        memcpy(prefix, path, end);
        prefix[end] = '\0';
        const char *name = prefix + start;
        int dir = !last || want_dir;
        int fd = sys_openat2(rootfd, prefix, O_PATH | (dir ? O_DIRECTORY : 0), 0);
        if (fd < 0 && errno == ENOENT) {
            if (dir) {
                if (mkdirat(parent, name, 0755) < 0 && errno != EEXIST) {
                    int rc = fbrt_fail(e, errno, "mkdir /%s in the container", prefix);
                    close(parent);
                    return rc;
                }
            } else {
                int f = openat(parent, name, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
                if (f < 0) {
                    int rc = fbrt_fail(e, errno, "create /%s in the container", prefix);
                    close(parent);
                    return rc;
                }
                close(f);
            }
            fd = sys_openat2(rootfd, prefix, O_PATH | (dir ? O_DIRECTORY : 0), 0);
        }
        if (fd < 0) {
            int rc = fbrt_fail(e, errno, "open /%s in the container", prefix);
            close(parent);
            return rc;
        }
        close(parent);
        parent = fd;
        start = end + 1;
        while (start < len && path[start] == '/')
            start++;
    }
    return parent;
}

static int mount_at(const char *source, int target_fd, const char *where, const char *fstype,
                    unsigned long flags, const char *data, struct fbrt_error *e) {
    char target[64];
    snprintf(target, sizeof(target), "/proc/self/fd/%d", target_fd);
    if (mount(source, target, fstype, flags, data) < 0)
        return fbrt_fail(e, errno, "mount %s %s on %s", fstype ? fstype : "bind",
                         source ? source : "", where);
    return 0;
}

/* Mount a fresh filesystem on container path WHERE. */
static int mount_in_root(int rootfd, const char *where, const char *fstype, unsigned long flags,
                         const char *data, struct fbrt_error *e) {
    int fd = open_in_root(rootfd, where, 1, e);
    if (fd < 0)
        return fd;
    int rc = mount_at(fstype, fd, where, fstype, flags, data, e);
    close(fd);
    return rc;
}

/* Replace container file PATH (e.g. /etc/hosts, possibly a symlink in the image). */
static int write_in_root(int rootfd, const char *dir, const char *name, const char *content,
                         struct fbrt_error *e) {
    int dirfd = open_in_root(rootfd, dir, 1, e);
    if (dirfd < 0)
        return dirfd;
    unlinkat(dirfd, name, 0);
    int fd = openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    int rc = 0;
    if (fd < 0) {
        rc = fbrt_fail(e, errno, "create %s/%s in the container", dir, name);
    } else {
        size_t len = strlen(content);
        if (write(fd, content, len) != (ssize_t)len)
            rc = fbrt_fail(e, errno, "write %s/%s in the container", dir, name);
        close(fd);
    }
    close(dirfd);
    return rc;
}

struct dev_node {
    const char *name;
    unsigned int major, minor;
};

static const struct dev_node STANDARD_DEVICES[] = {
    {"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9},
    {"tty", 5, 0},
};

static const char *const DEV_LINKS[][2] = {
    {"/proc/self/fd", "fd"},          {"/proc/self/fd/0", "stdin"},
    {"/proc/self/fd/1", "stdout"},    {"/proc/self/fd/2", "stderr"},
    {"pts/ptmx", "ptmx"},
};

static int setup_dev(int rootfd, const struct fbrt_spec *spec, struct fbrt_error *e) {
    int rc = mount_in_root(rootfd, "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
                           "mode=0755,size=65536k", e);
    if (rc < 0)
        return rc;
    int dev = open_in_root(rootfd, "/dev", 1, e);
    if (dev < 0)
        return dev;
    for (size_t i = 0; i < sizeof(STANDARD_DEVICES) / sizeof(STANDARD_DEVICES[0]); i++) {
        const struct dev_node *d = &STANDARD_DEVICES[i];
        if (mknodat(dev, d->name, S_IFCHR | 0666, makedev(d->major, d->minor)) < 0) {
            rc = fbrt_fail(e, errno, "mknod /dev/%s in the container", d->name);
            goto out;
        }
    }
    for (size_t i = 0; i < sizeof(DEV_LINKS) / sizeof(DEV_LINKS[0]); i++) {
        if (symlinkat(DEV_LINKS[i][0], dev, DEV_LINKS[i][1]) < 0) {
            rc = fbrt_fail(e, errno, "symlink /dev/%s in the container", DEV_LINKS[i][1]);
            goto out;
        }
    }
    if (mkdirat(dev, "shm", 01777) < 0 || mkdirat(dev, "pts", 0755) < 0) {
        rc = fbrt_fail(e, errno, "mkdir /dev/shm and /dev/pts in the container");
        goto out;
    }
    rc = mount_in_root(rootfd, "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                       "newinstance,ptmxmode=0666,mode=0620", e);
    if (rc < 0)
        goto out;
    for (int i = 0; i < spec->ndevices; i++) {
        const char *path = spec->devices[i];
        struct stat st;
        if (strncmp(path, "/dev/", 5) != 0 || strstr(path, "/../")) {
            rc = fbrt_fail(e, EINVAL, "device %s: not a path under /dev", path);
            goto out;
        }
        if (stat(path, &st) < 0) {
            rc = fbrt_fail(e, errno, "stat device %s", path);
            goto out;
        }
        if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
            rc = fbrt_fail(e, ENODEV, "device %s: not a character or block device", path);
            goto out;
        }
        /* Make the parent directories, then the node itself at the same path. */
        char parent[4096];
        snprintf(parent, sizeof(parent), "%s", path);
        char *slash = strrchr(parent, '/');
        *slash = '\0';
        int pfd = open_in_root(rootfd, parent, 1, e);
        if (pfd < 0) {
            rc = pfd;
            goto out;
        }
        int made = mknodat(pfd, slash + 1, st.st_mode & (S_IFMT | 07777), st.st_rdev);
        int err = errno;
        if (made == 0 && fchownat(pfd, slash + 1, st.st_uid, st.st_gid, 0) < 0) {
            made = -1;
            err = errno;
        }
        close(pfd);
        if (made < 0) {
            rc = fbrt_fail(e, err, "create device node %s in the container", path);
            goto out;
        }
    }
out:
    close(dev);
    return rc;
}

static int setup_binds(int rootfd, const struct fbrt_spec *spec, struct fbrt_error *e) {
    for (int i = 0; i < spec->nbinds; i++) {
        const struct fbrt_bind *b = &spec->binds[i];
        struct stat st;
        if (stat(b->src, &st) < 0)
            return fbrt_fail(e, errno, "stat bind source %s", b->src);
        int fd = open_in_root(rootfd, b->dst, S_ISDIR(st.st_mode), e);
        if (fd < 0)
            return fd;
        int rc = mount_at(b->src, fd, b->dst, NULL, MS_BIND | MS_REC, NULL, e);
        close(fd);
        if (rc < 0)
            return rc;
        if (b->readonly) {
            /* Resolve again: the fresh lookup lands on the bind mount just made. */
            fd = open_in_root(rootfd, b->dst, S_ISDIR(st.st_mode), e);
            if (fd < 0)
                return fd;
            rc = mount_at(NULL, fd, b->dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL, e);
            close(fd);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

static int setup_root(const struct fbrt_spec *spec, struct fbrt_error *e) {
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return fbrt_fail(e, errno, "make the container's mount tree private");
    const char *base = spec->scratch;
    if (!base) {
        if (mount("tmpfs", spec->work_mnt, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
            return fbrt_fail(e, errno, "mount tmpfs on %s", spec->work_mnt);
        base = spec->work_mnt;
    }
    char upper[4096], work[4096], root[4096], options[8192];
    snprintf(upper, sizeof(upper), "%s/upper", base);
    snprintf(work, sizeof(work), "%s/work", base);
    snprintf(root, sizeof(root), "%s/root", base);
    if ((mkdir(upper, 0755) < 0 && errno != EEXIST) ||
        (mkdir(work, 0700) < 0 && errno != EEXIST) || (mkdir(root, 0755) < 0 && errno != EEXIST))
        return fbrt_fail(e, errno, "mkdir upper, work and root in %s", base);
    int n = snprintf(options, sizeof(options), "lowerdir=%s,upperdir=%s,workdir=%s",
                     spec->lower, upper, work);
    if (n < 0 || (size_t)n >= sizeof(options))
        return fbrt_fail(e, ENAMETOOLONG, "overlay options for %s", spec->lower);
    if (mount("overlay", root, "overlay", 0, options) < 0)
        return fbrt_fail(e, errno, "mount overlay %s on %s", options, root);
    int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return fbrt_fail(e, errno, "open container root %s", root);
    int rc = mount_in_root(rootfd, "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, e);
    /* Read-only, as Docker and Apptainer give it: MPI transports (UCX, libfabric), hwloc and
     * GPU stacks find network interfaces and devices there. */
    if (rc == 0)
        rc = mount_in_root(rootfd, "/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                           NULL, e);
    if (rc == 0)
        rc = setup_dev(rootfd, spec, e);
    if (rc == 0)
        rc = mount_in_root(rootfd, "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", e);
    if (rc == 0 && spec->hosts)
        rc = write_in_root(rootfd, "/etc", "hosts", spec->hosts, e);
    if (rc == 0 && spec->resolv)
        rc = write_in_root(rootfd, "/etc", "resolv.conf", spec->resolv, e);
    if (rc == 0)
        rc = setup_binds(rootfd, spec, e);
    if (rc == 0 && fchdir(rootfd) < 0)
        rc = fbrt_fail(e, errno, "chdir %s", root);
    close(rootfd);
    if (rc < 0)
        return rc;
    /* pivot_root(".", ".") stacks the old root under the new one; detaching it leaves the
     * host's mounts out of the container entirely. */
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        return fbrt_fail(e, errno, "pivot_root into %s", root);
    if (umount2(".", MNT_DETACH) < 0)
        return fbrt_fail(e, errno, "detach the host root after pivot_root");
    if (chdir("/") < 0)
        return fbrt_fail(e, errno, "chdir / in the container");
    return 0;
}

static void __attribute__((noreturn)) exec_command(const struct fbrt_spec *spec) {
    struct fbrt_error e;
    memset(&e, 0, sizeof(e));
    sigset_t none;
    sigemptyset(&none);
    for (int sig = 1; sig < NSIG; sig++)
        signal(sig, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    close(FD_STATUS);
    umask(022);
    /* Raw system calls: glibc's setuid family would try to signal the parent's threads. */
    if (syscall(SYS_setgroups, (size_t)spec->ngroups, spec->groups) < 0) {
        fbrt_fail(&e, errno, "setgroups (%d groups)", spec->ngroups);
        child_die(&e);
    }
    if (syscall(SYS_setresgid, spec->gid, spec->gid, spec->gid) < 0) {
        fbrt_fail(&e, errno, "setgid %u", spec->gid);
        child_die(&e);
    }
    if (syscall(SYS_setresuid, spec->uid, spec->uid, spec->uid) < 0) {
        fbrt_fail(&e, errno, "setuid %u", spec->uid);
        child_die(&e);
    }
    if (spec->cwd && chdir(spec->cwd) < 0) {
        fbrt_fail(&e, errno, "chdir %s (working directory, as uid %u)", spec->cwd, spec->uid);
        child_die(&e);
    }
    const char *file = spec->argv[0];
    char *const *argv = (char *const *)spec->argv;
    char *const *envp = (char *const *)spec->envp;
    if (strchr(file, '/')) {
        execve(file, argv, envp);
        fbrt_fail(&e, errno, "exec %s", file);
        child_die(&e);
    }
    const char *path = spec->path ? spec->path : DEFAULT_PATH;
    int saved = ENOENT;
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t dirlen = colon ? (size_t)(colon - path) : strlen(path);
        char candidate[4096];
        snprintf(candidate, sizeof(candidate), "%.*s/%s", (int)dirlen,
                 dirlen ? path : ".", file);
        execve(candidate, argv, envp);
        if (errno != ENOENT && errno != ENOTDIR)
            saved = errno;
        path += dirlen + (colon ? 1 : 0);
        if (!colon)
            break;
    }
    fbrt_fail(&e, saved, "exec %s (searched PATH=%s)", file,
              spec->path ? spec->path : DEFAULT_PATH);
    child_die(&e);
}

/* Move descriptor FD above the low numbers so dup2 onto 0..4 cannot clobber another. */
static int lift(int fd, struct fbrt_error *e, const char *what) {
    if (fd < 0)
        return -1;
    int high = fcntl(fd, F_DUPFD, FD_HIGH);
    if (high < 0) {
        fbrt_fail(e, errno, "duplicate the %s descriptor %d", what, fd);
        child_die(e);
    }
    return high;
}

static void place(int high, int target, struct fbrt_error *e) {
    if (high >= 0 && dup2(high, target) < 0) {
        fbrt_fail(e, errno, "dup2 %d onto %d", high, target);
        child_die(e);
    }
}


/* ---- PID 1 sheds the agent's memory --------------------------------------------------
 * PID 1 is a copy-on-write clone of the agent (a Python process). Kept as is, it would pin
 * a snapshot of the agent's heap for the job's whole life: every page the agent writes
 * afterwards would be duplicated. Once the command runs, PID 1 needs only its stack, its
 * thread control block and the loaded objects (code, data, .bss, found from their ELF
 * program headers), so it unmaps every other anonymous mapping. */

#define MAX_RANGES 512
#define SHED_AFTER_MS 20

struct range {
    uintptr_t start, end;
};

struct maps_line {
    uintptr_t start, end, offset;
    int readable;
    const char *path;  /* "" for anonymous mappings */
};

static uintptr_t parse_hex(const char **p) {
    uintptr_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        if (c >= '0' && c <= '9')
            v = v * 16 + (uintptr_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (uintptr_t)(c - 'a' + 10);
        else
            return v;
    }
}

static int parse_maps_line(const char *line, struct maps_line *m) {
    const char *p = line;
    m->start = parse_hex(&p);
    if (*p++ != '-')
        return -1;
    m->end = parse_hex(&p);
    while (*p == ' ')
        p++;
    m->readable = *p == 'r';
    while (*p && *p != ' ')
        p++;
    while (*p == ' ')
        p++;
    m->offset = parse_hex(&p);
    for (int field = 0; field < 2; field++) { /* dev, inode */
        while (*p == ' ')
            p++;
        while (*p && *p != ' ')
            p++;
    }
    while (*p == ' ')
        p++;
    m->path = p;
    return m->end > m->start ? 0 : -1;
}

/* Call VISIT for every line of /proc/self/maps; stops early when VISIT returns non-zero. */
static void each_mapping(int (*visit)(const struct maps_line *, void *), void *ctx) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[8192];
    size_t have = 0;
    for (int eof = 0, stop = 0; !eof && !stop;) {
        ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (n <= 0) {
            eof = 1;
            n = 0;
        }
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf;
        char *nl;
        while (!stop && (nl = memchr(line, '\n', (size_t)(buf + have - line)))) {
            *nl = '\0';
            struct maps_line m;
            if (parse_maps_line(line, &m) == 0)
                stop = visit(&m, ctx);
            line = nl + 1;
        }
        size_t rest = (size_t)(buf + have - line);
        memmove(buf, line, rest);
        have = rest >= sizeof(buf) - 1 ? 0 : rest;
    }
    close(fd);
}

struct shed_plan {
    uintptr_t sp, tp, page;
    struct range keep[MAX_RANGES];
    int nkeep;
    struct range drop[MAX_RANGES];
    int ndrop;
    int overflow;
};

/* A loaded object's first mapping holds its ELF header: keep all its PT_LOAD segments. */
static int note_loaded_object(const struct maps_line *m, void *ctx) {
    struct shed_plan *plan = ctx;
    if (m->path[0] != '/' || m->offset != 0 || !m->readable)
        return 0;
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)m->start;
    if (m->end - m->start < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
        return 0;
    if (eh->e_phoff + (uintptr_t)eh->e_phnum * sizeof(ElfW(Phdr)) > m->end - m->start)
        return 0;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(m->start + eh->e_phoff);
    uintptr_t first = UINTPTR_MAX;
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first)
            first = ph[i].p_vaddr;
    if (first == UINTPTR_MAX)
        return 0;
    uintptr_t bias = m->start - (first & ~(plan->page - 1));
    for (int i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD)
            continue;
        if (plan->nkeep == MAX_RANGES) {
            plan->overflow = 1;
            return 1;
        }
        uintptr_t lo = bias + (ph[i].p_vaddr & ~(plan->page - 1));
        uintptr_t hi = bias + ph[i].p_vaddr + ph[i].p_memsz;
        plan->keep[plan->nkeep++] = (struct range){lo, (hi + plan->page - 1) & ~(plan->page - 1)};
    }
    return 0;
}

static int note_droppable(const struct maps_line *m, void *ctx) {
    struct shed_plan *plan = ctx;
    if (m->path[0] != '\0' && strcmp(m->path, "[heap]") != 0 && strcmp(m->path, "[stack]") != 0)
        return 0; /* files, vdso, vvar, vsyscall */
    if (plan->sp >= m->start && plan->sp < m->end)
        return 0;
    /* The thread control block with the static TLS below it (errno, stack guard). */
    if (m->start < plan->tp + 4096 && m->end > plan->tp - 65536)
        return 0;
    for (int i = 0; i < plan->nkeep; i++)
        if (m->start < plan->keep[i].end && m->end > plan->keep[i].start)
            return 0;
    if (plan->ndrop == MAX_RANGES)
        return 1;
    plan->drop[plan->ndrop++] = (struct range){m->start, m->end};
    return 0;
}

static void shed_agent_memory(void) {
    static struct shed_plan plan; /* too big for a small thread stack; .bss is kept */
    memset(&plan, 0, sizeof(plan));
    plan.sp = (uintptr_t)__builtin_frame_address(0);
    plan.tp = (uintptr_t)__builtin_thread_pointer();
    plan.page = (uintptr_t)getpagesize();
    each_mapping(note_loaded_object, &plan);
    if (plan.overflow)
        return; /* could not see every object: keep everything rather than guess */
    for (int pass = 0; pass < 16; pass++) {
        plan.ndrop = 0;
        each_mapping(note_droppable, &plan);
        for (int i = 0; i < plan.ndrop; i++)
            munmap((void *)plan.drop[i].start, plan.drop[i].end - plan.drop[i].start);
        if (plan.ndrop < MAX_RANGES)
            return;
    }
}

static void __attribute__((noreturn)) container_init(const struct fbrt_spec *spec, int error_w,
                                                     int status_w) {
    struct fbrt_error e;
    memset(&e, 0, sizeof(e));
    report_fd = error_w;
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    signal(SIGCHLD, SIG_DFL);
    umask(0);
    for (int i = 0; i < spec->ncgroup_fds; i++) {
        if (write(spec->cgroup_fds[i], "0", 1) < 0) {
            fbrt_fail(&e, errno, "join cgroup (cgroup.procs descriptor %d)",
                      spec->cgroup_fds[i]);
            child_die(&e);
        }
    }
    int in = lift(spec->stdin_fd, &e, "stdin");
    int out = lift(spec->stdout_fd, &e, "stdout");
    int errfd = lift(spec->stderr_fd, &e, "stderr");
    int error_high = lift(error_w, &e, "error pipe");
    int status_high = lift(status_w, &e, "status pipe");
    int lifeline = lift(spec->lifeline_fd, &e, "lifeline");
    report_fd = error_high;
    place(in, 0, &e);
    place(out, 1, &e);
    place(errfd, 2, &e);
    place(error_high, FD_ERROR, &e);
    place(status_high, FD_STATUS, &e);
    place(lifeline, FD_LIFELINE, &e);
    report_fd = FD_ERROR;
    fcntl(FD_ERROR, F_SETFD, FD_CLOEXEC);
    fcntl(FD_STATUS, F_SETFD, FD_CLOEXEC);
    fcntl(FD_LIFELINE, F_SETFD, FD_CLOEXEC);
    /* Nothing of the agent's (other containers' pipes, sockets) may stay open in here. */
    if (syscall(SYS_close_range, lifeline >= 0 ? FD_LIFELINE + 1 : FD_STATUS + 1, ~0U, 0) < 0) {
        fbrt_fail(&e, errno, "close inherited descriptors");
        child_die(&e);
    }
    setsid();
    prctl(PR_SET_NAME, "fbrt-init", 0, 0, 0);
    if (setup_root(spec, &e) < 0)
        child_die(&e);
    if (spec->hostname && sethostname(spec->hostname, strlen(spec->hostname)) < 0) {
        fbrt_fail(&e, errno, "sethostname %s", spec->hostname);
        child_die(&e);
    }
    if (spec->new_net && fbrt_net_lo_up(&e) < 0)
        child_die(&e);
    if (spec->memlock >= 0) {
        struct rlimit limit = {(rlim_t)spec->memlock, (rlim_t)spec->memlock};
        if (setrlimit(RLIMIT_MEMLOCK, &limit) < 0) {
            fbrt_fail(&e, errno, "setrlimit RLIMIT_MEMLOCK to %lld bytes",
                      (long long)spec->memlock);
            child_die(&e);
        }
    }
    /* Signals stay blocked in PID 1 and are read here, to be forwarded or reaped. */
    int signals = signalfd(-1, &all, SFD_CLOEXEC);
    if (signals < 0) {
        fbrt_fail(&e, errno, "signalfd for the container's PID 1");
        child_die(&e);
    }
    pid_t command = vfork();
    if (command < 0) {
        fbrt_fail(&e, errno, "fork the container command");
        child_die(&e);
    }
    if (command == 0)
        exec_command(spec);
    /* The command has exec'd (or reported why not): the agent reads EOF now. */
    close(FD_ERROR);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        close(null);
    }
    struct pollfd watch[2] = {{signals, POLLIN, 0}, {FD_LIFELINE, POLLIN, 0}};
    nfds_t nwatch = lifeline >= 0 ? 2 : 1;
    /* Short jobs end before their copy of the agent's memory matters: shed it only once the
     * command has run for a while, keeping it off the start-to-exit path. */
    int shed = 0;
    for (;;) {
        int ready = poll(watch, nwatch, shed ? -1 : SHED_AFTER_MS);
        if (ready == 0 && !shed) {
            shed_agent_memory();
            shed = 1;
        }
        if (ready <= 0)
            continue;
        /* The agent is gone: PID 1 exiting takes the whole PID namespace with it. */
        if (nwatch == 2 && watch[1].revents)
            _exit(137);
        struct signalfd_siginfo info;
        if (!(watch[0].revents & POLLIN) || read(signals, &info, sizeof(info)) != sizeof(info))
            continue;
        if (info.ssi_signo != SIGCHLD) {
            kill(command, (int)info.ssi_signo);
            continue;
        }
        for (;;) {
            int status;
            pid_t reaped = waitpid(-1, &status, WNOHANG);
            if (reaped <= 0)
                break;
            if (reaped == command) {
                ssize_t n = write(FD_STATUS, &status, sizeof(status));
                (void)n;
                _exit(0);
            }
        }
    }
}

int fbrt_container_start(const struct fbrt_spec *spec, struct fbrt_started *out,
                         struct fbrt_error *err) {
    if (!spec->argv || !spec->argv[0])
        return fbrt_fail(err, EINVAL, "start container: empty command");
    int error_pipe[2], status_pipe[2];
    if (pipe2(error_pipe, O_CLOEXEC) < 0)
        return fbrt_fail(err, errno, "pipe for container errors");
    if (pipe2(status_pipe, O_CLOEXEC) < 0) {
        int rc = fbrt_fail(err, errno, "pipe for container status");
        close(error_pipe[0]);
        close(error_pipe[1]);
        return rc;
    }
    unsigned long flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
                          CLONE_PIDFD | SIGCHLD;
    if (spec->new_net)
        flags |= CLONE_NEWNET;
    int pidfd = -1;
    /* A raw clone behaves like fork without glibc's atfork handlers and their locks. */
    long pid = syscall(SYS_clone, flags, NULL, &pidfd, NULL, NULL);
    if (pid == 0)
        container_init(spec, error_pipe[1], status_pipe[1]);
    int clone_errno = errno;
    close(error_pipe[1]);
    close(status_pipe[1]);
    if (pid < 0) {
        close(error_pipe[0]);
        close(status_pipe[0]);
        return fbrt_fail(err, clone_errno, "clone into new namespaces");
    }
    struct fbrt_error child;
    memset(&child, 0, sizeof(child));
    size_t got = 0;
    while (got < sizeof(child)) {
        ssize_t n = read(error_pipe[0], (char *)&child + got, sizeof(child) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(error_pipe[0]);
    if (got > 0) {
        kill((pid_t)pid, SIGKILL);
        while (waitpid((pid_t)pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
        close(pidfd);
        close(status_pipe[0]);
        if (got != sizeof(child) || child.err <= 0)
            return fbrt_fail(err, EIO, "container setup failed (truncated report)");
        *err = child;
        err->msg[sizeof(err->msg) - 1] = '\0';
        return -child.err;
    }
    out->pid = (int)pid;
    out->pidfd = pidfd;
    out->status_fd = status_pipe[0];
    return 0;
}
