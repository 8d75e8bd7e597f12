/* Library functions that loop in C over a size the script chooses, written again for Hoist so
** that their work is charged to the call's budget as it goes (hoist_lua_work): the instruction
** count never sees a loop in C, and the clock and a stop (a signal) are checked only where work
** is charged. Same arguments, results and errors as Lua 5.4's, installed over them by
** LuaRuntime (hoist_loops_install):
**   string.rep    an empty result at once (2^40 copies of "" took 40 s in C); else made by
**                 doubling what is written, one unit per copy and per 64 bytes copied;
**   table.concat  one unit per element (each read may call an __index written in C);
**   table.unpack  one unit per element (a million reads per call, per instruction);
**   table.insert, table.remove, table.move   one unit per element shifted or copied (#t of a
**                 sparse table can be 2^50);
**   table.sort    a quicksort (median of three, a random pivot on long ranges), one unit per
**                 comparison and per element moved (Lua's own scanned 2^31 elements of a
**                 table whose __len said so, with a C order function, in C); an order function
**                 that is not a strict order is found as Lua finds it, when a scan runs past its
**                 range ("invalid order function for sorting").
** Each checks its arguments and reports as Lua 5.4's does, with the same messages: a hook
** writer's script behaves as under plain Lua, only within its budget.
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
#include <time.h>
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
  /* Lua 5.4 makes no string longer than INT_MAX bytes this way (MAXSIZE in lstrlib.c). */
  if (length + separatorLength < length || length + separatorLength > (size_t)INT_MAX / (lua_Unsigned)count)
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

/* What a value used as a table must support when it is not one: reads, writes, its length. */
#define HOIST_TAB_R 1
#define HOIST_TAB_W 2
#define HOIST_TAB_L 4
#define HOIST_TAB_RW (HOIST_TAB_R | HOIST_TAB_W)

/* Argument `arg` must be a table, or have a metatable with the metamethods `what` names (read
** raw, as Lua's table library does); else "bad argument #arg to 'f' (table expected, got T)". */
static inline void hoist_loops_checktab(lua_State *L, int arg, int what) {
  if (lua_type(L, arg) == LUA_TTABLE) return;
  int usable = 0;
  if (lua_getmetatable(L, arg)) {
    usable = (!(what & HOIST_TAB_R) || hoist_loops_hasfield(L, "__index")) &&
             (!(what & HOIST_TAB_W) || hoist_loops_hasfield(L, "__newindex")) &&
             (!(what & HOIST_TAB_L) || hoist_loops_hasfield(L, "__len"));
    lua_pop(L, 1);
  }
  if (!usable) luaL_checktype(L, arg, LUA_TTABLE);
}

/* The length of argument 1, checked as usable with `what` and its length ("object length is
** not an integer" from luaL_len when __len says otherwise). */
static inline lua_Integer hoist_loops_length(lua_State *L, int what) {
  hoist_loops_checktab(L, 1, what | HOIST_TAB_L);
  return luaL_len(L, 1);
}

static inline void hoist_loops_addfield(lua_State *L, luaL_Buffer *buffer, lua_Integer index) {
  lua_geti(L, 1, index);
  if (!lua_isstring(L, -1))
    luaL_error(L, "invalid value (at index %I) in table for 'concat'", (LUAI_UACINT)index);
  luaL_addvalue(buffer);
}

static inline int hoist_loops_concat(lua_State *L) {
  lua_Integer last = hoist_loops_length(L, HOIST_TAB_R);
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

/* t[i] = t[j] read fresh: moves one element, charged. */
static inline void hoist_loops_copy(lua_State *L, int table, lua_Integer from, lua_Integer to) {
  lua_geti(L, 1, from);
  lua_seti(L, table, to);
  hoist_lua_work(L, 1);
}

static inline int hoist_loops_insert(lua_State *L) {
  lua_Integer end = hoist_loops_length(L, HOIST_TAB_RW);
  end = (lua_Integer)((lua_Unsigned)end + 1u);   /* the first free index (wraps as Lua's does) */
  lua_Integer position;
  switch (lua_gettop(L)) {
    case 2:
      position = end;
      break;
    case 3:
      position = luaL_checkinteger(L, 2);
      /* 1 <= position <= end, in unsigned arithmetic as Lua checks it */
      luaL_argcheck(L, (lua_Unsigned)position - 1u < (lua_Unsigned)end, 2, "position out of bounds");
      for (lua_Integer index = end; index > position; index--) hoist_loops_copy(L, 1, index - 1, index);
      break;
    default:
      return luaL_error(L, "wrong number of arguments to 'insert'");
  }
  lua_seti(L, 1, position);
  return 0;
}

static inline int hoist_loops_remove(lua_State *L) {
  lua_Integer size = hoist_loops_length(L, HOIST_TAB_RW);
  lua_Integer position = luaL_optinteger(L, 2, size);
  if (position != size)   /* a position given: 1 <= position <= size + 1 */
    luaL_argcheck(L, (lua_Unsigned)position - 1u <= (lua_Unsigned)size, 2, "position out of bounds");
  lua_geti(L, 1, position);
  for (; position < size; position++) hoist_loops_copy(L, 1, position + 1, position);
  lua_pushnil(L);
  lua_seti(L, 1, position);
  return 1;
}

static inline int hoist_loops_move(lua_State *L) {
  lua_Integer first = luaL_checkinteger(L, 2);
  lua_Integer last = luaL_checkinteger(L, 3);
  lua_Integer to = luaL_checkinteger(L, 4);
  int target = lua_isnoneornil(L, 5) ? 1 : 5;
  hoist_loops_checktab(L, 1, HOIST_TAB_R);
  hoist_loops_checktab(L, target, HOIST_TAB_W);
  if (last >= first) {
    luaL_argcheck(L, first > 0 || last < LUA_MAXINTEGER + first, 3, "too many elements to move");
    lua_Integer count = last - first + 1;
    luaL_argcheck(L, to <= LUA_MAXINTEGER - count + 1, 4, "destination wrap around");
    if (to > last || to <= first || (target != 1 && !lua_compare(L, 1, target, LUA_OPEQ))) {
      for (lua_Integer index = 0; index < count; index++) hoist_loops_copy(L, target, first + index, to + index);
    } else {
      for (lua_Integer index = count - 1; index >= 0; index--) hoist_loops_copy(L, target, first + index, to + index);
    }
  }
  lua_pushvalue(L, target);
  return 1;
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

/* Whether t[i] sorts before t[j]. */
static inline int hoist_loops_less_at(lua_State *L, lua_Integer i, lua_Integer j) {
  lua_geti(L, 1, i);
  lua_geti(L, 1, j);
  int less = hoist_loops_less(L, lua_gettop(L) - 1, lua_gettop(L));
  lua_pop(L, 2);
  return less;
}

/* Swaps t[i] and t[j]. */
static inline void hoist_loops_swap(lua_State *L, lua_Integer i, lua_Integer j) {
  lua_geti(L, 1, i);
  lua_geti(L, 1, j);
  lua_seti(L, 1, i);
  lua_seti(L, 1, j);
  hoist_lua_work(L, 2);
}

/* Ranges longer than this take a random pivot (from the clock), so no order of the input makes
** every partition lopsided; shorter ones the middle element. */
#define HOIST_SORT_RANDOM_PIVOT 100

/* Sorts t[low..high] (low < high): t[low], t[middle] and t[high] in order, the pivot (the
** median) kept at high - 1, then two scans towards each other. A scan that finds the pivot
** sorting before itself, or an element below the up-scan's stop sorting after the pivot, means
** the order function is not a strict order: Lua's "invalid order function for sorting". Recurses into the shorter part, loops on the longer. */
static inline void hoist_loops_quicksort(lua_State *L, lua_Integer low, lua_Integer high, unsigned seed) {
  while (low < high) {
    if (hoist_loops_less_at(L, high, low)) hoist_loops_swap(L, low, high);
    if (high - low == 1) return;
    lua_Integer middle = low + (high - low) / 2;
    if (high - low >= HOIST_SORT_RANDOM_PIVOT) {
      seed = seed * 1103515245u + 12345u;
      middle = low + 1 + (lua_Integer)((lua_Unsigned)seed % (lua_Unsigned)(high - low - 1));
    }
    if (hoist_loops_less_at(L, middle, low)) {
      hoist_loops_swap(L, middle, low);
    } else if (hoist_loops_less_at(L, high, middle)) {
      hoist_loops_swap(L, middle, high);
    }
    if (high - low == 2) return;
    hoist_loops_swap(L, middle, high - 1);
    lua_geti(L, 1, high - 1);   /* the pivot, at the top while the scans run */
    int pivot = lua_gettop(L);
    lua_Integer i = low, j = high - 1;
    for (;;) {
      for (;;) {   /* up while t[i] < pivot */
        lua_geti(L, 1, ++i);
        int less = hoist_loops_less(L, lua_gettop(L), pivot);
        lua_pop(L, 1);
        if (!less) break;
        if (i == high - 1) luaL_error(L, "invalid order function for sorting");   /* pivot < pivot */
      }
      for (;;) {   /* down while pivot < t[j] */
        lua_geti(L, 1, --j);
        int less = hoist_loops_less(L, pivot, lua_gettop(L));
        lua_pop(L, 1);
        if (!less) break;
        if (j < i) luaL_error(L, "invalid order function for sorting");   /* below i all sort before the pivot */
      }
      if (j < i) break;
      hoist_loops_swap(L, i, j);
    }
    lua_pop(L, 1);
    hoist_loops_swap(L, high - 1, i);   /* the pivot between the two parts */
    if (i - low < high - i) {
      hoist_loops_quicksort(L, low, i - 1, seed);
      low = i + 1;
    } else {
      hoist_loops_quicksort(L, i + 1, high, seed);
      high = i - 1;
    }
  }
}

static inline int hoist_loops_sort(lua_State *L) {
  lua_Integer count = hoist_loops_length(L, HOIST_TAB_RW);
  if (count > 1) {
    luaL_argcheck(L, count < INT_MAX, 1, "array too big");
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    hoist_loops_quicksort(L, 1, count, (unsigned)clock() ^ (unsigned)time(NULL));
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
  lua_pushcfunction(L, hoist_loops_insert); lua_setfield(L, -2, "insert");
  lua_pushcfunction(L, hoist_loops_remove); lua_setfield(L, -2, "remove");
  lua_pushcfunction(L, hoist_loops_move); lua_setfield(L, -2, "move");
}
#endif
