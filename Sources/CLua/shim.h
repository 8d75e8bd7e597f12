// Lua 5.4's API macros re-made as functions Swift can call.
#ifndef HOIST_CLUA_SHIM_H
#define HOIST_CLUA_SHIM_H
#include <lua.h>
#include <lualib.h>
#include <lauxlib.h>

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
#endif
