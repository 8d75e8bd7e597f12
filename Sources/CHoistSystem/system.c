#define _GNU_SOURCE
#include <sys/random.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include "hoist_system.h"

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
