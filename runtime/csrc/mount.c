/* Images: a read-only loop device set up with LOOP_CONFIGURE, mounted as EROFS. */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <unistd.h>

#include "fbrt_internal.h"

/* Another process may take the device LOOP_CTL_GET_FREE handed us before we configure it. */
#define LOOP_ATTEMPTS 16

/* Returns the configured loop device's descriptor; the control descriptor is closed on every
 * path out (it was once kept open on success: one leaked descriptor per mounted image). */
static int loop_attach(int backing_fd, const char *image, char *dev, int dev_len,
                       struct fbrt_error *err) {
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        return fbrt_fail(err, errno, "open /dev/loop-control");
    int rc = -EBUSY;
    for (int attempt = 0; attempt < LOOP_ATTEMPTS; attempt++) {
        int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (nr < 0) {
            rc = fbrt_fail(err, errno, "ioctl LOOP_CTL_GET_FREE");
            break;
        }
        if (fbrt_format(dev, dev_len > 0 ? (size_t)dev_len : 0, "/dev/loop%d", nr) < 0) {
            rc = fbrt_fail(err, ENAMETOOLONG, "name of loop device %d (%d bytes given)", nr,
                           dev_len);
            break;
        }
        int loop = open(dev, O_RDONLY | O_CLOEXEC);
        if (loop < 0) {
            rc = fbrt_fail(err, errno, "open %s", dev);
            break;
        }
        struct loop_config config;
        memset(&config, 0, sizeof(config));
        config.fd = (unsigned int)backing_fd;
        config.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
        strncpy((char *)config.info.lo_file_name, image, LO_NAME_SIZE - 1);
        if (ioctl(loop, LOOP_CONFIGURE, &config) == 0) {
            rc = loop;
            break;
        }
        int e = errno;
        close(loop);
        if (e != EBUSY) {
            rc = fbrt_fail(err, e, "ioctl LOOP_CONFIGURE %s backed by %s", dev, image);
            break;
        }
        rc = fbrt_fail(err, e, "ioctl LOOP_CONFIGURE %s backed by %s (%d attempts)", dev,
                       image, attempt + 1);
    }
    close(ctl);
    return rc;
}

int fbrt_image_mount(const char *image, const char *target, char *loopdev, int loopdev_len,
                     struct fbrt_error *err) {
    int backing = open(image, O_RDONLY | O_CLOEXEC);
    if (backing < 0)
        return fbrt_fail(err, errno, "open image %s", image);
    int loop = loop_attach(backing, image, loopdev, loopdev_len, err);
    close(backing);
    if (loop < 0)
        return loop;
    int rc = 0;
    if (mount(loopdev, target, "erofs", MS_RDONLY | MS_NODEV | MS_NOSUID, NULL) < 0)
        rc = fbrt_fail(err, errno, "mount erofs %s (image %s) on %s", loopdev, image, target);
    /* With autoclear set, closing our last descriptor detaches the device once the mount
     * (or, on failure, nothing) holds it. */
    close(loop);
    return rc;
}

int fbrt_umount(const char *target, int detach, struct fbrt_error *err) {
    if (umount2(target, detach ? MNT_DETACH : 0) < 0) {
        if (errno == EINVAL || errno == ENOENT)
            return 0;
        return fbrt_fail(err, errno, "umount %s", target);
    }
    return 0;
}
