// System calls Swift's Glibc module does not export (GNU extensions).
#ifndef HOIST_SYSTEM_H
#define HOIST_SYSTEM_H

/// The version this binary was built as: what scripts/build-release (for scripts/install and
/// scripts/package) links in from the repository (scripts/version: a tag, else the commit); a
/// plain `swift build` says "0.1.0-dev".
const char *hoist_version(void);

/// syncfs(2): writes out every dirty page of the file system holding `fd`; 0 or -1 with errno.
int hoist_syncfs(int fd);

/// getrandom(2) with no flags: up to `length` bytes from the kernel's CSPRNG; the count, or -1 with errno.
long hoist_getrandom(void *buffer, unsigned long length);

/// open(2) with O_TMPFILE: an unnamed regular file, open for writing, in `directory`'s file
/// system; it vanishes when closed unless linked. The descriptor, or -1 with errno (EOPNOTSUPP,
/// EISDIR or EINVAL where the file system or kernel has no unnamed files).
int hoist_open_unnamed(const char *directory, unsigned int mode);

/// linkat(2) of an open file (one from `hoist_open_unnamed`) to `path`, through /proc/self/fd as
/// linkat(2) advises for callers without CAP_DAC_READ_SEARCH; 0 or -1 with errno (EEXIST when
/// `path` exists).
int hoist_link_open_file(int fd, const char *path);

/// open(2) with O_PATH: `path` located, not opened for reading or writing (a device or FIFO
/// there is not opened, so its driver sees nothing), not following a symbolic link at its end
/// unless `follow_links`. fstat(2) works on the descriptor. The descriptor, or -1 with errno.
int hoist_locate(const char *path, int follow_links);

/// openat2(2) of `relative` beneath the folder `root` (a descriptor), with O_PATH: no symbolic
/// link followed anywhere on the way (RESOLVE_NO_SYMLINKS, so no /proc magic link either) and no
/// escape from `root` (RESOLVE_BENEATH); a link at the end is located itself. The descriptor, or
/// -1 with errno: ELOOP for a link on the way, EXDEV for an escape, ENOSYS where the kernel
/// (before 5.6) or a seccomp filter has no openat2.
int hoist_locate_beneath(int root, const char *relative);

/// openat(2) of the folder `name` (one name, no slash) in the folder `folder`, with O_PATH |
/// O_DIRECTORY | O_NOFOLLOW: a link there is not followed (ENOTDIR or ELOOP): one step of a walk
/// beneath a root where openat2 is missing. The descriptor, or -1 with errno.
int hoist_locate_folder_in(int folder, const char *name);

/// openat(2) of `name` (one name, no slash) in the folder `folder`, with O_PATH | O_NOFOLLOW:
/// the file located, not opened (a device or FIFO there sees nothing), a link there located
/// itself. The descriptor, or -1 with errno.
int hoist_locate_in(int folder, const char *name);

/// open(2) of the folder `path` with O_PATH | O_DIRECTORY (links followed): a root to open files
/// beneath. The descriptor, or -1 with errno (ENOTDIR for a file).
int hoist_open_folder(const char *path);

/// The file `located` (from `hoist_locate`) opened for reading, through /proc/self/fd: the very
/// file located, whatever is at its path now. The descriptor, or -1 with errno (ENOENT when
/// /proc is not mounted).
int hoist_reopen_for_reading(int located);

/// The path the kernel has for open descriptor `fd` (readlink of /proc/self/fd/FD), written to
/// `buffer` with a NUL; its length, or -1 with errno (ENAMETOOLONG when it does not fit).
long hoist_descriptor_path(int fd, char *buffer, unsigned long size);

/// fsetxattr(2) of the attribute `name` (e.g. "user.hoist.object") on the open file `fd`,
/// created or replaced; 0 or -1 with errno (ENOSPC, E2BIG or ERANGE where the value does not
/// fit, ENOTSUP where the file system takes no such attribute).
int hoist_set_attribute(int fd, const char *name, const void *value, unsigned long size);

/// The attribute `name` of the file `located` (an O_PATH descriptor, as `hoist_locate_beneath`
/// gives: getxattr(2) through /proc/self/fd, so the file itself is not opened and a device or
/// FIFO there sees nothing) into `buffer`; its length, or -1 with errno (ENODATA when the file
/// has none, ERANGE when it is longer than `size`, ENOENT when /proc is not mounted).
long hoist_get_attribute_located(int located, const char *name, void *buffer, unsigned long size);

/// fgetxattr(2) of the attribute `name` of the open file `fd` into `buffer`: its length, or -1
/// with errno as `hoist_get_attribute_located`'s.
long hoist_get_attribute(int fd, const char *name, void *buffer, unsigned long size);

#endif
