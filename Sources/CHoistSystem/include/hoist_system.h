// System calls Swift's Glibc module does not export (GNU extensions).
#ifndef HOIST_SYSTEM_H
#define HOIST_SYSTEM_H

/// syncfs(2): writes out every dirty page of the file system holding `fd`; 0 or -1 with errno.
int hoist_syncfs(int fd);

/// getrandom(2) with no flags: up to `length` bytes from the kernel's CSPRNG; the count, or -1 with errno.
long hoist_getrandom(void *buffer, unsigned long length);

#endif
