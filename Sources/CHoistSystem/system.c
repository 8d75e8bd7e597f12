#define _GNU_SOURCE
#include <sys/random.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <linux/openat2.h>
#include "hoist_system.h"

/* Defined by the object scripts/build-release links in (the repository's version): a weak
** reference, absent from a plain `swift build`. Given at link time, so a new version relinks
** the binary and recompiles nothing. */
extern const char *hoist_build_version(void) __attribute__((weak));

const char *hoist_version(void) { return hoist_build_version ? hoist_build_version() : "0.1.0-dev"; }

int hoist_syncfs(int fd) { return syncfs(fd); }

long hoist_getrandom(void *buffer, unsigned long length) { return (long)getrandom(buffer, length, 0); }

int hoist_open_unnamed(const char *directory, unsigned int mode) {
    return open(directory, O_TMPFILE | O_WRONLY | O_CLOEXEC, (mode_t)mode);
}

int hoist_link_open_file(int fd, const char *path) {
    char self[32];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}

int hoist_locate(const char *path, int follow_links) {
    return open(path, O_PATH | O_CLOEXEC | (follow_links ? 0 : O_NOFOLLOW));
}

int hoist_locate_in(int folder, const char *name) {
    return openat(folder, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

int hoist_reopen_for_reading(int located) {
    char self[32];
    snprintf(self, sizeof self, "/proc/self/fd/%d", located);
    return open(self, O_RDONLY | O_CLOEXEC);
}

long hoist_descriptor_path(int fd, char *buffer, unsigned long size) {
    char self[32];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(self, buffer, size);
    if (length < 0) return -1;
    if ((unsigned long)length >= size) { errno = ENAMETOOLONG; return -1; }
    buffer[length] = 0;
    return (long)length;
}

int hoist_locate_beneath(int root, const char *relative) {
#ifdef SYS_openat2
    struct open_how how = {
        .flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    return (int)syscall(SYS_openat2, root, relative, &how, sizeof how);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int hoist_open_folder(const char *path) {
    return open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

int hoist_locate_folder_in(int folder, const char *name) {
    return openat(folder, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

int hoist_set_attribute(int fd, const char *name, const void *value, unsigned long size) {
    return fsetxattr(fd, name, value, (size_t)size, 0);
}

long hoist_get_attribute_located(int located, const char *name, void *buffer, unsigned long size) {
    char self[32];
    snprintf(self, sizeof self, "/proc/self/fd/%d", located);
    return (long)getxattr(self, name, buffer, (size_t)size);
}

long hoist_get_attribute(int fd, const char *name, void *buffer, unsigned long size) {
    return (long)fgetxattr(fd, name, buffer, (size_t)size);
}
