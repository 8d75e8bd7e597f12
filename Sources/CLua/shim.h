// Lua 5.4's API macros re-made as functions Swift can call.
#ifndef HOIST_CLUA_SHIM_H
#define HOIST_CLUA_SHIM_H
#include <lua.h>
#include <lualib.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <stdio.h>
#include <limits.h>
#include <time.h>
#include <string.h>

static inline int hoist_lua_pcall(lua_State *L, int nargs, int nresults, int msgh) { return lua_pcall(L, nargs, nresults, msgh); }
static inline void hoist_lua_pop(lua_State *L, int n) { lua_pop(L, n); }
static inline const char *hoist_lua_tostring(lua_State *L, int i) { return lua_tolstring(L, i, NULL); }
static inline lua_Number hoist_lua_tonumber(lua_State *L, int i) { return lua_tonumberx(L, i, NULL); }
static inline lua_Integer hoist_lua_tointeger(lua_State *L, int i) { return lua_tointegerx(L, i, NULL); }
static inline void hoist_lua_newtable(lua_State *L) { lua_newtable(L); }
static inline int hoist_lua_isnil(lua_State *L, int i) { return lua_isnil(L, i); }
static inline int hoist_lua_isfunction(lua_State *L, int i) { return lua_isfunction(L, i); }
static inline int hoist_lua_istable(lua_State *L, int i) { return lua_istable(L, i); }
static inline void hoist_lua_pushcfunction(lua_State *L, lua_CFunction f) { lua_pushcfunction(L, f); }
static inline int hoist_lua_upvalueindex(int i) { return lua_upvalueindex(i); }
static inline int hoist_lua_registryindex(void) { return LUA_REGISTRYINDEX; }
static inline int hoist_lua_getglobal(lua_State *L, const char *name) { return lua_getglobal(L, name); }
static inline int hoist_luaL_loadbuffer(lua_State *L, const char *buf, size_t size, const char *name, const char *mode) {
    return luaL_loadbufferx(L, buf, size, name, mode);
}

/* ---- Budgets: a counting allocator and an instruction-count hook. ---- */

/// What the allocator and the hooks count. `relaxed` lifts the memory cap while Swift code
/// pushes values, so a memory error never unwinds through Swift frames (Swift checks sizes
/// first). `remaining`, `deadline` and `cancelled` bound one call: instructions in every
/// coroutine (a new thread inherits the hook of the thread that made it) and pattern-matching
/// work in C share `remaining`; `cancelled` may be set from any thread (`hoist_lua_cancel`).
typedef struct hoist_lua_budget {
    size_t used;
    size_t limit;
    int relaxed;
    int exceeded;
    int stopped;          /* the call is over budget: every instruction raises the error again */
    char where[240];      /* "script:line: " where it ran out */
    char reason[96];      /* what ran out */
    long long remaining;  /* instructions (and pattern steps) left in this call */
    int granularity;      /* instructions between two checks */
    int armed;            /* a call is running */
    double deadline;      /* CLOCK_MONOTONIC seconds the call must end by; 0: none */
    int cancelled;        /* the job is stopping: read and written atomically */
    long pending;         /* work done in C (loops.h) not charged yet: less than a tick */
} hoist_lua_budget;

static inline void *hoist_lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    hoist_lua_budget *budget = (hoist_lua_budget *)ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        budget->used -= old;
        free(ptr);
        return NULL;
    }
    if (nsize > old && budget->limit && !budget->relaxed && budget->used - old + nsize > budget->limit) {
        budget->exceeded = 1;
        return NULL;
    }
    void *grown = realloc(ptr, nsize);
    if (grown) budget->used = budget->used - old + nsize;
    return grown;
}

static inline lua_State *hoist_lua_newstate(hoist_lua_budget *budget) {
    return lua_newstate(hoist_lua_alloc, budget);
}

static inline hoist_lua_budget *hoist_lua_budget_of(lua_State *L) {
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return (hoist_lua_budget *)ud;
}

static inline double hoist_lua_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/// Stops the running call (and refuses later ones) from any thread: a signal, a stopping job.
static inline void hoist_lua_cancel(hoist_lua_budget *budget) { __atomic_store_n(&budget->cancelled, 1, __ATOMIC_RELAXED); }
static inline int hoist_lua_is_cancelled(hoist_lua_budget *budget) { return __atomic_load_n(&budget->cancelled, __ATOMIC_RELAXED); }

/// Charges `spent` units to the call; returns what ran out, or NULL.
static inline const char *hoist_lua_charge(hoist_lua_budget *budget, long long spent) {
    budget->remaining -= spent;
    if (hoist_lua_is_cancelled(budget)) return "stopped: the job is stopping";
    if (budget->remaining <= 0) return "instruction budget exceeded (the hook ran too long)";
    if (budget->deadline > 0 && hoist_lua_now() > budget->deadline) return "time limit exceeded (the hook ran too long)";
    return NULL;
}

static inline void hoist_lua_count_hook(lua_State *L, lua_Debug *ar);

/// Records where the call ran out, and makes every later instruction of `L` raise again.
static inline void hoist_lua_stop(lua_State *L, hoist_lua_budget *budget, const char *reason) {
    if (!budget->stopped) {
        lua_Debug here;
        budget->where[0] = 0;
        for (int level = 0; lua_getstack(L, level, &here); level++) {
            lua_getinfo(L, "Sl", &here);
            if (here.currentline > 0 && strcmp(here.source, "=(hoist)") != 0) {   /* the script's line, not the host's */
                snprintf(budget->where, sizeof budget->where, "%s:%d: ", here.short_src, here.currentline);
                break;
            }
        }
        snprintf(budget->reason, sizeof budget->reason, "%s", reason);
        budget->stopped = 1;
    }
    lua_sethook(L, hoist_lua_count_hook, LUA_MASKCOUNT, 1);
}

/// Every `granularity` instructions of any thread: charge them, and stop the call when it is
/// over budget, late, or cancelled. Once stopped, every instruction raises the error again, so
/// `pcall` inside the script cannot swallow it: the error reaches the host's own `lua_pcall`.
static inline void hoist_lua_count_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    hoist_lua_budget *budget = hoist_lua_budget_of(L);
    if (!budget->armed) return;
    if (!budget->stopped) {
        int count = lua_gethookcount(L);
        const char *reason = hoist_lua_charge(budget, count);
        if (reason == NULL) {
            if (count != budget->granularity) lua_sethook(L, hoist_lua_count_hook, LUA_MASKCOUNT, budget->granularity);
            return;
        }
        hoist_lua_stop(L, budget, reason);
    }
    lua_sethook(L, hoist_lua_count_hook, LUA_MASKCOUNT, 1);
    lua_pushfstring(L, "%s%s", budget->where, budget->reason);
    lua_error(L);
}

/// Pattern matching in C (patterns.h) pays for its work here.
static inline void hoist_pm_spend(lua_State *L, long units) {
    hoist_lua_budget *budget = hoist_lua_budget_of(L);
    if (!budget->armed) return;
    const char *reason = budget->stopped ? budget->reason : hoist_lua_charge(budget, units);
    if (reason == NULL) return;
    hoist_lua_stop(L, budget, reason);
    lua_pushfstring(L, "%s%s", budget->where, budget->reason);   /* where it ran out, once */
    lua_error(L);
}

/// Starts a call's budgets: `instructions` (0: unlimited) and `seconds` of wall clock (0: none).
static inline void hoist_lua_arm(lua_State *L, long long instructions, double seconds) {
    hoist_lua_budget *budget = hoist_lua_budget_of(L);
    budget->remaining = instructions > 0 ? instructions : LLONG_MAX;
    budget->granularity = instructions > 0 && instructions < 1000 ? (int)instructions : 1000;
    budget->deadline = seconds > 0 ? hoist_lua_now() + seconds : 0;
    budget->stopped = 0;
    budget->exceeded = 0;
    budget->relaxed = 0;
    budget->pending = 0;
    budget->armed = 1;
    lua_sethook(L, hoist_lua_count_hook, LUA_MASKCOUNT, budget->granularity);
}

static inline void hoist_lua_disarm(lua_State *L) {
    hoist_lua_budget_of(L)->armed = 0;
    hoist_lua_budget_of(L)->relaxed = 0;
    lua_sethook(L, NULL, 0, 0);
}

/// Whether the running call is over budget (the sandbox's xpcall then skips the script's
/// message handler, which Lua would run with hooks off).
static inline int hoist_lua_stopped(lua_State *L) {
    hoist_lua_budget *budget = hoist_lua_budget_of(L);
    lua_pushboolean(L, budget->stopped || hoist_lua_is_cancelled(budget));
    return 1;
}

/// The Lua release this was built against, such as "Lua 5.4.6" (LUA_RELEASE is a string macro).
static inline const char *hoist_lua_release(void) { return LUA_RELEASE; }

#include "patterns.h"

/// Work done in C outside the VM (loops.h), added up and charged a tick at a time, so a call
/// doing little pays no clock read.
static inline void hoist_lua_work(lua_State *L, long units) {
    hoist_lua_budget *budget = hoist_lua_budget_of(L);
    budget->pending += units;
    if (budget->pending >= HOIST_PM_TICK) {
        long due = budget->pending;
        budget->pending = 0;
        hoist_pm_spend(L, due);
    }
}

#include "loops.h"

/// The message handler of every host call: the error with a traceback.
static inline int hoist_lua_traceback(lua_State *L) {
    const char *message = lua_tostring(L, 1);
    if (message == NULL) message = "(error object is not a string)";
    luaL_traceback(L, L, message, 1);
    return 1;
}

/* ---- Swift functions called from Lua. ---- */

/// Swift's side of a call: returns the number of results pushed, or -1 with an error message
/// pushed. It never raises a Lua error itself.
typedef int (*hoist_lua_swift_function)(lua_State *L, void *context);

/// Upvalue 1: the Swift function pointer; upvalue 2: its context. Raises the error Swift
/// reported only after Swift has returned, so no longjmp crosses a Swift frame, with the
/// script and line that called (as `luaL_error` does). The memory cap
/// is lifted while Swift runs (it checks sizes itself) and restored here, before any error is
/// raised; every call's arming and disarming restores it too.
static inline int hoist_lua_trampoline(lua_State *L) {
    hoist_lua_swift_function function = (hoist_lua_swift_function)lua_touserdata(L, lua_upvalueindex(1));
    void *context = lua_touserdata(L, lua_upvalueindex(2));
    hoist_lua_budget *budget = hoist_lua_budget_of(L);
    int relaxed = budget->relaxed;
    budget->relaxed = 1;
    int results = function(L, context);
    if (results < 0) {   /* "script:line: " of the Lua code calling, before Swift's message */
        luaL_where(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
    }
    budget->relaxed = relaxed;
    if (results < 0) return lua_error(L);
    return results;
}

static inline void hoist_lua_push_swift_function(lua_State *L, hoist_lua_swift_function function, void *context) {
    lua_pushlightuserdata(L, (void *)function);
    lua_pushlightuserdata(L, context);
    lua_pushcclosure(L, hoist_lua_trampoline, 2);
}

static inline int hoist_lua_isinteger(lua_State *L, int i) { return lua_isinteger(L, i); }
static inline int hoist_luaL_dostring(lua_State *L, const char *code) { return luaL_dostring(L, code); }
/// Runs host code (the sandbox's Lua parts) as chunk "=(hoist)": a budget error in it names the
/// script line that called it.
static inline int hoist_lua_dohost(lua_State *L, const char *code) {
    int status = luaL_loadbufferx(L, code, strlen(code), "=(hoist)", "t");
    return status != LUA_OK ? status : lua_pcall(L, 0, LUA_MULTRET, 0);
}
static inline void hoist_lua_collect(lua_State *L) { lua_gc(L, LUA_GCCOLLECT); }
#endif
