// Lua 5.4's API macros re-made as functions Swift can call.
#ifndef HOIST_CLUA_SHIM_H
#define HOIST_CLUA_SHIM_H
#include <lua.h>
#include <lualib.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <stdio.h>

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

/// What the allocator counts. `relaxed` lifts the cap while Swift code pushes values, so a
/// memory error never unwinds through Swift frames.
typedef struct hoist_lua_budget {
    size_t used;
    size_t limit;
    int relaxed;
    int exceeded;
    int stopped;          /* the instruction budget ran out in this call */
    char where[240];      /* "script:line: " where it ran out */
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

/// Once the budget is spent, every instruction raises the error again, so `pcall` inside the
/// script cannot swallow it: the error reaches the host's own `lua_pcall`.
static inline void hoist_lua_count_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    void *ud = NULL;
    lua_getallocf(L, &ud);
    hoist_lua_budget *budget = (hoist_lua_budget *)ud;
    if (!budget->stopped) {
        lua_Debug here;
        budget->where[0] = 0;
        for (int level = 0; lua_getstack(L, level, &here); level++) {
            lua_getinfo(L, "Sl", &here);
            if (here.currentline > 0) {
                snprintf(budget->where, sizeof budget->where, "%s:%d: ", here.short_src, here.currentline);
                break;
            }
        }
        budget->stopped = 1;
    }
    lua_sethook(L, hoist_lua_count_hook, LUA_MASKCOUNT, 1);
    lua_pushfstring(L, "%sinstruction budget exceeded (the hook ran too long)", budget->where);
    lua_error(L);
}

static inline void hoist_lua_set_budget(lua_State *L, int instructions) {
    if (instructions > 0) lua_sethook(L, hoist_lua_count_hook, LUA_MASKCOUNT, instructions);
    else lua_sethook(L, NULL, 0, 0);
}

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
/// reported only after Swift has returned, so no longjmp crosses a Swift frame.
static inline int hoist_lua_trampoline(lua_State *L) {
    hoist_lua_swift_function function = (hoist_lua_swift_function)lua_touserdata(L, lua_upvalueindex(1));
    void *context = lua_touserdata(L, lua_upvalueindex(2));
    int results = function(L, context);
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
static inline void hoist_lua_collect(lua_State *L) { lua_gc(L, LUA_GCCOLLECT); }
#endif
