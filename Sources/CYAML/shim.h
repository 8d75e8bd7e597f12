// libyaml needs no varargs shims; this header only gathers it for Swift.
#ifndef HOIST_CYAML_SHIM_H
#define HOIST_CYAML_SHIM_H
#include <yaml.h>
#endif
