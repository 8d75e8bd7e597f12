#define _GNU_SOURCE
#include <sys/random.h>
#include <unistd.h>
#include "hoist_system.h"

int hoist_syncfs(int fd) { return syncfs(fd); }

long hoist_getrandom(void *buffer, unsigned long length) { return (long)getrandom(buffer, length, 0); }
