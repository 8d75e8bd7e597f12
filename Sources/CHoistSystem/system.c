#define _GNU_SOURCE
#include <unistd.h>
#include "hoist_system.h"

int hoist_syncfs(int fd) { return syncfs(fd); }
