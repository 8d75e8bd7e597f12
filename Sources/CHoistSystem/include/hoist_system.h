// System calls Swift's Glibc module does not export (GNU extensions).
#ifndef HOIST_SYSTEM_H
#define HOIST_SYSTEM_H

/// syncfs(2): writes out every dirty page of the file system holding `fd`; 0 or -1 with errno.
int hoist_syncfs(int fd);

#endif
