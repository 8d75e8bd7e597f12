/* Library functions that loop in C over a size the script chooses, written again for Hoist so
** that their work is charged to the call's budget as it goes (hoist_lua_work): the instruction
** count never sees a loop in C, and the clock and a stop (a signal) are checked only where work
** is charged. Same arguments, results and errors as Lua 5.4's, installed over them by
** LuaRuntime (hoist_loops_install):
**   string.rep    an empty result at once (2^40 copies of "" took 40 s in C); else made by
**                 doubling what is written, one unit per copy and per 64 bytes copied;
**   table.concat  one unit per element (each read may call an __index written in C);
**   table.unpack  one unit per element (a million reads per call, per instruction);
**   table.sort    a heapsort (n log n whatever the order function says), one unit per
**                 comparison and per element moved (Lua's quicksort scanned 2^31 elements of a
**                 table whose __len said so, with a C order function, in C).
** The library's other functions in C loop at most over their arguments (at most the stack's
** million values: utf8.char, string.char, string.byte, select; string.format's widths have at
** most 2 digits) or over a string's bytes (utf8.len, utf8.offset, string.upper, string.packsize,
** load...): these check the clock and a stop before they start when given a long string
** (hoist_loops_timed), so a loop of them ends within one call of the time limit.
*/
#ifndef HOIST_CLUA_LOOPS_H
#define HOIST_CLUA_LOOPS_H
#include <limits.h>
#include <string.h>
#include <lua.h>
#include <lauxlib.h>

/* Defined in shim.h: charges `units` of work done in C, a clock read per HOIST_PM_TICK units;
** charges `units` at once, with a clock read. */
static inline void hoist_lua_work(lua_State *L, long units);
static inline void hoist_pm_spend(lua_State *L, long units);

static inline int hoist_loops_rep(lua_State *L) {
  size_t length, separatorLength;
  const char *text = luaL_checklstring(L, 1, &length);
  lua_Integer count = luaL_checkinteger(L, 2);
  const char *separator = luaL_optlstring(L, 3, "", &separatorLength);
  if (count <= 0 || length + separatorLength == 0) {
    lua_pushliteral(L, "");
    return 1;
  }
  if (length + separatorLength < length || length + separatorLength > (size_t)LUA_MAXINTEGER / (lua_Unsigned)count)
    return luaL_error(L, "resulting string too large");
  size_t total = (size_t)count * length + (size_t)(count - 1) * separatorLength;
  luaL_Buffer buffer;
  char *out = luaL_buffinitsize(L, &buffer, total);
  /* The text, then (separator, text) once, then what is written so far after it, doubling:
  ** a few large copies, each charged for its bytes. */
  memcpy(out, text, length);
  if (count > 1) {
    memcpy(out + length, separator, separatorLength);
    memcpy(out + length + separatorLength, text, length);
    size_t filled = length + separatorLength, rest = total - length;
    while (filled < rest) {
      size_t chunk = filled < rest - filled ? filled : rest - filled;
      memcpy(out + length + filled, out + length, chunk);
      filled += chunk;
      hoist_lua_work(L, 1 + (long)(chunk / 64));
    }
  }
  luaL_pushresultsize(&buffer, total);
  return 1;
}

/* Whether the metatable on top has `field` (read raw, as Lua's table library does). */
static inline int hoist_loops_hasfield(lua_State *L, const char *field) {
  lua_pushstring(L, field);
  int found = lua_rawget(L, -2) != LUA_TNIL;
  lua_pop(L, 1);
  return found;
}

/* Argument 1 must be a table, or have the metamethods the function uses (reads, lengths, writes). */
static inline void hoist_loops_checktable(lua_State *L, int writes) {
  if (lua_type(L, 1) == LUA_TTABLE) return;
  int usable = 0;
  if (lua_getmetatable(L, 1)) {
    usable = hoist_loops_hasfield(L, "__index") && hoist_loops_hasfield(L, "__len") &&
             (!writes || hoist_loops_hasfield(L, "__newindex"));
    lua_pop(L, 1);
  }
  if (!usable) luaL_checktype(L, 1, LUA_TTABLE);
}

static inline void hoist_loops_addfield(lua_State *L, luaL_Buffer *buffer, lua_Integer index) {
  lua_geti(L, 1, index);
  if (!lua_isstring(L, -1))
    luaL_error(L, "invalid value (at index %I) in table for 'concat'", (LUAI_UACINT)index);
  luaL_addvalue(buffer);
}

static inline int hoist_loops_concat(lua_State *L) {
  hoist_loops_checktable(L, 0);
  lua_Integer last = luaL_len(L, 1);
  size_t separatorLength;
  const char *separator = luaL_optlstring(L, 2, "", &separatorLength);
  lua_Integer index = luaL_optinteger(L, 3, 1);
  last = luaL_optinteger(L, 4, last);
  luaL_Buffer buffer;
  luaL_buffinit(L, &buffer);
  long perElement = 1 + (long)(separatorLength / 64);
  if (index <= last) {
    for (;;) {   /* `index == last` ends it: `last` may be the largest integer */
      hoist_loops_addfield(L, &buffer, index);
      hoist_lua_work(L, perElement);
      if (index == last) break;
      luaL_addlstring(&buffer, separator, separatorLength);
      index++;
    }
  }
  luaL_pushresult(&buffer);
  return 1;
}

static inline int hoist_loops_unpack(lua_State *L) {
  lua_Integer first = luaL_optinteger(L, 2, 1);
  lua_Integer last = lua_isnoneornil(L, 3) ? luaL_len(L, 1) : luaL_checkinteger(L, 3);
  if (first > last) return 0;
  lua_Unsigned count = (lua_Unsigned)last - (lua_Unsigned)first;
  if (count >= (lua_Unsigned)INT_MAX || !lua_checkstack(L, (int)(++count)))
    return luaL_error(L, "too many results to unpack");
  for (lua_Integer index = first; index < last; index++) {
    lua_geti(L, 1, index);
    hoist_lua_work(L, 1);
  }
  lua_geti(L, 1, last);
  return (int)count;
}

/* Whether the value at stack index `a` sorts before the one at `b` (absolute indices), by the
** order function at index 2 or by `<`. */
static inline int hoist_loops_less(lua_State *L, int a, int b) {
  hoist_lua_work(L, 1);
  if (lua_isnil(L, 2)) return lua_compare(L, a, b, LUA_OPLT);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, a);
  lua_pushvalue(L, b);
  lua_call(L, 2, 1);
  int less = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return less;
}

/* Moves t[root] down the heap t[1..end] to where it belongs. */
static inline void hoist_loops_siftdown(lua_State *L, lua_Integer root, lua_Integer end) {
  lua_geti(L, 1, root);
  int moving = lua_gettop(L);
  for (;;) {
    lua_Integer child = 2 * root;
    if (child > end) break;
    lua_geti(L, 1, child);
    if (child < end) {
      lua_geti(L, 1, child + 1);
      if (hoist_loops_less(L, lua_gettop(L) - 1, lua_gettop(L))) {
        lua_remove(L, -2);
        child++;
      } else {
        lua_pop(L, 1);
      }
    }
    if (!hoist_loops_less(L, moving, lua_gettop(L))) {
      lua_pop(L, 1);
      break;
    }
    lua_seti(L, 1, root);   /* t[root] = t[child] */
    hoist_lua_work(L, 1);
    root = child;
  }
  lua_seti(L, 1, root);
}

static inline int hoist_loops_sort(lua_State *L) {
  hoist_loops_checktable(L, 1);
  lua_Integer count = luaL_len(L, 1);
  if (count > 1) {
    luaL_argcheck(L, count < INT_MAX, 1, "array too big");
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    for (lua_Integer root = count / 2; root >= 1; root--) hoist_loops_siftdown(L, root, count);
    for (lua_Integer end = count; end > 1; end--) {
      lua_geti(L, 1, 1);
      lua_geti(L, 1, end);
      lua_seti(L, 1, 1);      /* t[1] = t[end] */
      lua_seti(L, 1, end);    /* t[end] = the largest */
      hoist_loops_siftdown(L, 1, end - 1);
    }
  }
  return 0;
}

/* A string argument this long (bytes) may keep a library function in C for a while. */
#define HOIST_LOOPS_LONG_STRING 65536

/* Any other library function written in C, with upvalue 1 the function itself: one given a
** long string (utf8.len, utf8.offset, string.upper, string.packsize, load...: 0.3 s for 30 MB,
** and 250 such calls fit between two runs of the count hook) first checks the call's clock and
** a stop, so a loop of them ends within one call of the time limit. Nothing is charged to the
** instruction budget (s:sub(i, i) on a long string is cheap). */
static inline int hoist_loops_timed(lua_State *L) {
  int count = lua_gettop(L);
  for (int index = 1; index <= count; index++) {
    if (lua_type(L, index) == LUA_TSTRING && lua_rawlen(L, index) >= HOIST_LOOPS_LONG_STRING) {
      hoist_pm_spend(L, 0);   /* the clock and a stop, nothing charged */
      break;
    }
  }
  return lua_tocfunction(L, lua_upvalueindex(1))(L);
}

/* Every C function of the table on top, timed (hoist_loops_timed). */
static inline void hoist_loops_time_all(lua_State *L) {
  lua_pushnil(L);
  while (lua_next(L, -2) != 0) {
    if (lua_tocfunction(L, -1) != NULL) {
      lua_pushcclosure(L, hoist_loops_timed, 1);
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, -4);
    } else {
      lua_pop(L, 1);
    }
  }
}

/* Installs them over the `string` table at -2 and the `table` table at -1, and times the rest
** of `string`, all of `utf8` and the base library's `load`. */
static inline void hoist_loops_install(lua_State *L) {
  lua_pushvalue(L, -2);
  hoist_loops_time_all(L);
  lua_pop(L, 1);
  lua_getglobal(L, "utf8");
  hoist_loops_time_all(L);
  lua_pop(L, 1);
  lua_getglobal(L, "load");
  lua_pushcclosure(L, hoist_loops_timed, 1);
  lua_setglobal(L, "load");
  lua_pushcfunction(L, hoist_loops_rep); lua_setfield(L, -3, "rep");
  lua_pushcfunction(L, hoist_loops_concat); lua_setfield(L, -2, "concat");
  lua_pushcfunction(L, hoist_loops_unpack); lua_setfield(L, -2, "unpack");
  lua_pushcfunction(L, hoist_loops_sort); lua_setfield(L, -2, "sort");
}
#endif
