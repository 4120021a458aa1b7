-- Trusted setup code of the evaluator sandbox (see sandbox.py and docs/evaluator.md).
--
-- Runs once in every fresh LuaRuntime, with the full standard library, and returns
-- `run(source, host, limits)`. Scripts never see this chunk's environment: they are loaded with a
-- whitelisted environment table, run in a coroutine with an instruction-count hook, and every way a
-- script could catch an error (pcall, xpcall, coroutine.resume/wrap/close) is wrapped so that a
-- stopped script stays stopped. Everything this code needs is captured in locals first, because a
-- script may replace any field of the tables it can reach.

local debug_sethook, debug_traceback = debug.sethook, debug.traceback
local co_create, co_resume, co_status, co_close = coroutine.create, coroutine.resume, coroutine.status, coroutine.close
local error, pcall, xpcall, type, tostring, tonumber, select, next =
  error, pcall, xpcall, type, tostring, tonumber, select, next
local rawget, rawlen, setmetatable, getmetatable, load = rawget, rawlen, setmetatable, getmetatable, load
local string_format, string_byte, string_sub, string_gsub, string_match, string_gmatch, string_find =
  string.format, string.byte, string.sub, string.gsub, string.match, string.gmatch, string.find
local table_concat, table_pack, table_unpack, table_sort = table.concat, table.pack, table.unpack, table.sort
local math_type, math_huge = math.type, math.huge
local utf8_len = utf8.len
local os_clock = os.clock

local MEMORY_ERROR = "not enough memory"
local MAX_MESSAGE = 2000

-- Strings crossing into Python must be valid UTF-8: invalid bytes become U+FFFD.
local function clean_utf8(s)
  if utf8_len(s) then
    return s
  end
  local parts, i, n = {}, 1, #s
  while i <= n do
    local ok, bad = utf8_len(s, i)
    if ok then
      parts[#parts + 1] = string_sub(s, i)
      break
    end
    parts[#parts + 1] = string_sub(s, i, bad - 1)
    parts[#parts + 1] = "\u{FFFD}"
    i = bad + 1
  end
  return table_concat(parts)
end

local function copy(t, without)
  local c = {}
  for k, v in next, t do
    if not (without and without[k]) then
      c[k] = v
    end
  end
  return c
end

return function(source, host, limits)
  local max_instructions, hook_every = limits.max_instructions, limits.hook_every
  local max_output, max_result, max_depth = limits.max_output, limits.max_result, limits.max_depth
  local max_argument = limits.max_argument
  local cpu_deadline = os_clock() + limits.cpu_seconds

  -- Messages are built before the script runs: at the memory cap there may be no room to build them.
  local messages = {
    instruction_limit = string_format("the script exceeded the limit of %d instructions", max_instructions),
    time_limit = string_format("the script exceeded the time limit of %g seconds", limits.cpu_seconds),
    memory_limit = string_format("the script exceeded the memory limit of %d bytes", limits.max_memory),
    output_limit = string_format("the script printed more than %d bytes", max_output),
    result_limit = string_format("the script's result is larger than %d bytes of JSON", max_result),
  }

  local instructions = 0
  local failure_kind, failure_message = nil, nil
  -- The error object that unwinds a stopped script. Scripts cannot name it, and the flag above, not this
  -- object, decides: a script that catches STOP is stopped again by the next wrapper or hook it reaches.
  local STOP = {}

  local function stop(kind, message)
    if failure_kind == nil then
      failure_kind, failure_message = kind, message or messages[kind]
    end
    error(STOP, 0)
  end

  local function hook()
    instructions = instructions + hook_every
    if failure_kind ~= nil then
      error(STOP, 0)
    end
    if instructions > max_instructions then
      stop("instruction_limit")
    end
    if os_clock() > cpu_deadline then
      stop("time_limit")
    end
  end

  local function hooked(co)
    debug_sethook(co, hook, "", hook_every)
    return co
  end

  -- After any protected call returns: re-raise a stop, and turn an out-of-memory error into one.
  local function checked(r)
    if failure_kind ~= nil then
      error(STOP, 0)
    end
    if r[1] == false and r[2] == MEMORY_ERROR then
      stop("memory_limit")
    end
    return table_unpack(r, 1, r.n)
  end

  local env = {}

  local function sandbox_pcall(f, ...)
    return checked(table_pack(pcall(f, ...)))
  end

  local function sandbox_xpcall(f, handler, ...)
    if type(handler) ~= "function" then
      error("bad argument #2 to 'xpcall' (function expected)", 2)
    end
    local function guarded(e)
      if failure_kind ~= nil then
        return e
      end
      return handler(e)
    end
    return checked(table_pack(xpcall(f, guarded, ...)))
  end

  local sandbox_coroutine = {
    status = coroutine.status,
    running = coroutine.running,
    yield = coroutine.yield,
    isyieldable = coroutine.isyieldable,
  }
  function sandbox_coroutine.create(f)
    if type(f) ~= "function" then
      error("bad argument #1 to 'create' (function expected)", 2)
    end
    -- Hooks are per coroutine: every coroutine a script creates gets the same counting hook.
    return hooked(co_create(f))
  end
  function sandbox_coroutine.resume(co, ...)
    return checked(table_pack(co_resume(co, ...)))
  end
  function sandbox_coroutine.close(co)
    return checked(table_pack(co_close(co)))
  end
  function sandbox_coroutine.wrap(f)
    local co = sandbox_coroutine.create(f)
    return function(...)
      local r = table_pack(co_resume(co, ...))
      if failure_kind ~= nil then
        error(STOP, 0)
      end
      if r[1] then
        return table_unpack(r, 2, r.n)
      end
      if r[2] == MEMORY_ERROR then
        stop("memory_limit")
      end
      co_close(co)
      error(r[2], 0)
    end
  end

  local output, output_bytes = {}, 0
  local function sandbox_print(...)
    local args = table_pack(...)
    local parts = {}
    for i = 1, args.n do
      parts[i] = tostring(args[i])
    end
    local line = table_concat(parts, "\t") .. "\n"
    if output_bytes + #line > max_output then
      output[#output + 1] = string_sub(line, 1, max_output - output_bytes)
      output_bytes = max_output
      stop("output_limit")
    end
    output[#output + 1] = line
    output_bytes = output_bytes + #line
  end

  local function sandbox_setmetatable(t, mt)
    -- Finalizers would run at garbage collection or when the runtime closes, outside any hook.
    if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
      error("setmetatable: __gc metamethods are not allowed in scripts", 2)
    end
    return setmetatable(t, mt)
  end

  local function sandbox_collectgarbage(opt)
    if opt ~= "count" then
      error("collectgarbage: only collectgarbage(\"count\") is allowed in scripts", 2)
    end
    return collectgarbage("count")
  end

  local function sandbox_load(chunk, chunkname, mode, chunk_env)
    if mode ~= nil and mode ~= "t" then
      error("load: only text chunks are allowed (mode \"t\"); precompiled bytecode is not", 2)
    end
    if type(chunk) == "string" and string_byte(chunk, 1) == 27 then
      return nil, "load: precompiled bytecode is not allowed"
    end
    -- Without an explicit environment, load would use the real global table: default to the script's.
    return load(chunk, chunkname or "=load", "t", chunk_env or env)
  end

  -- Arguments travel to the parent in one bounded frame: an oversized one would break the pipe protocol and
  -- kill the worker, so it is refused here with an error the script can read (and catch).
  local function check_size(name, position, value)
    if #value > max_argument then
      error(string_format("bad argument #%d to '%s' (%d bytes; the limit is %d bytes)", position, name, #value,
        max_argument), 4)
    end
    return value
  end

  local function string_arg(name, position, value)
    if type(value) ~= "string" then
      error(string_format("bad argument #%d to '%s' (string expected, got %s)", position, name, type(value)), 3)
    end
    -- Checked before and after the UTF-8 repair, which writes 3 bytes for each invalid byte.
    check_size(name, position, value)
    local cleaned = check_size(name, position, clean_utf8(value))
    return cleaned
  end

  local function line_arg(name, position, value)
    if value == nil then
      return nil
    end
    if math_type(value) == "float" and value == value and value % 1 == 0 and value < 2 ^ 53 and value > -2 ^ 53 then
      value = math.tointeger(value)
    end
    if math_type(value) ~= "integer" then
      error(string_format("bad argument #%d to '%s' (integer line number expected, got %s)", position, name,
        math_type(value) or type(value)), 3)
    end
    return value
  end

  -- Host calls go to the parent process, which runs them with the caller's permissions and limits.
  local function call_host(name, ...)
    local status, value, kind = host(name, ...)
    if status == "ok" then
      return value
    end
    if status == "limit" then
      stop(kind, value)
    end
    error(value, 3)
  end

  -- No tail calls below: error levels count stack frames, and a tail call removes one.
  local function sandbox_search(query)
    local found = call_host("search", string_arg("search", 1, query))
    return found.files, found.info
  end

  local function sandbox_read_file(repo, path, start_line, end_line)
    local content = call_host("read_file", string_arg("read_file", 1, repo), string_arg("read_file", 2, path),
      line_arg("read_file", 3, start_line), line_arg("read_file", 4, end_line))
    return content
  end

  env.assert, env.error, env.ipairs, env.next, env.pairs, env.select = assert, error, ipairs, next, pairs, select
  env.rawequal, env.rawget, env.rawlen, env.rawset = rawequal, rawget, rawlen, rawset
  env.tonumber, env.tostring, env.type, env.getmetatable = tonumber, tostring, type, getmetatable
  env._VERSION = _VERSION
  env.pcall, env.xpcall, env.print, env.load = sandbox_pcall, sandbox_xpcall, sandbox_print, sandbox_load
  env.setmetatable, env.collectgarbage = sandbox_setmetatable, sandbox_collectgarbage
  env.coroutine = sandbox_coroutine
  env.string = copy(string, { dump = true })
  env.table = copy(table)
  env.math = copy(math)
  env.utf8 = copy(utf8)
  env.os = { time = os.time, clock = os.clock, date = os.date, difftime = os.difftime }
  env.search, env.read_file = sandbox_search, sandbox_read_file
  env._G = env

  -- Method calls on strings ("x"):upper() go through the one shared string metatable: point it at the
  -- script's copy (no dump) and hide it from getmetatable so the real string table stays out of reach.
  local string_mt = getmetatable("")
  string_mt.__index = env.string
  string_mt.__metatable = false

  -- JSON encoding of the result runs inside the hooked coroutine, so it is bound by the same limits.
  -- It reads tables with next/rawget only: no metamethod of the script runs outside the hook.
  local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
    ["\r"] = "\\r", ["\t"] = "\\t" }
  local function escape_char(c)
    return escapes[c] or string_format("\\u%04x", string_byte(c))
  end
  local function json_string(s)
    return '"' .. (string_gsub(clean_utf8(s), '[%c"\\]', escape_char)) .. '"'
  end

  local out, out_bytes, path, visiting = {}, 0, { "$" }, {}

  local function emit(piece)
    out_bytes = out_bytes + #piece
    if out_bytes > max_result then
      stop("result_limit")
    end
    out[#out + 1] = piece
  end

  local function fail_at(message)
    stop("result_error", message .. " (at " .. table_concat(path) .. ")")
  end

  local function key_segment(name)
    if string_find(name, "^[%a_][%w_]*$") then
      return "." .. name
    end
    if #name > 40 then
      name = string_sub(name, 1, 40) .. "..."
    end
    return "[" .. json_string(name) .. "]"
  end

  local encode

  local function encode_table(t, depth)
    if visiting[t] then
      fail_at("the result contains a reference cycle; a table cannot contain itself")
    end
    if depth >= max_depth then
      fail_at(string_format("the result is nested more than %d levels deep", max_depth))
    end
    visiting[t] = true
    local count, max_index, is_array = 0, 0, true
    for k in next, t do
      count = count + 1
      if math_type(k) == "integer" and k >= 1 then
        if k > max_index then
          max_index = k
        end
      else
        is_array = false
      end
    end
    if is_array and max_index == count then
      -- Also the empty table: `{}` becomes [] (a list with no items).
      emit("[")
      for i = 1, count do
        if i > 1 then
          emit(",")
        end
        path[#path + 1] = "[" .. i .. "]"
        encode(rawget(t, i), depth + 1)
        path[#path] = nil
      end
      emit("]")
    else
      local names, values = {}, {}
      for k, v in next, t do
        local kind, name = type(k), nil
        if kind == "string" then
          name = clean_utf8(k)
        elseif math_type(k) == "integer" then
          name = string_format("%d", k)
        elseif kind == "number" then
          name = tostring(k)
        else
          fail_at("a table key of type " .. kind .. " cannot be converted to JSON; use string or number keys")
        end
        if values[name] ~= nil then
          fail_at("the keys " .. name .. " (number) and \"" .. name .. "\" (string) collide in JSON")
        end
        names[#names + 1] = name
        values[name] = { v }
      end
      table_sort(names)
      emit("{")
      for i = 1, #names do
        local name = names[i]
        if i > 1 then
          emit(",")
        end
        emit(json_string(name))
        emit(":")
        path[#path + 1] = key_segment(name)
        encode(values[name][1], depth + 1)
        path[#path] = nil
      end
      emit("}")
    end
    visiting[t] = nil
  end

  encode = function(value, depth)
    local kind = type(value)
    if kind == "nil" then
      emit("null")
    elseif kind == "boolean" then
      emit(value and "true" or "false")
    elseif kind == "string" then
      emit(json_string(value))
    elseif kind == "number" then
      if math_type(value) == "integer" then
        emit(string_format("%d", value))
      elseif value ~= value or value == math_huge or value == -math_huge then
        fail_at("the number " .. tostring(value) .. " cannot be converted to JSON")
      else
        -- The shortest form that reads back as the same number.
        local text = string_format("%.14g", value)
        if tonumber(text) ~= value then
          text = string_format("%.17g", value)
        end
        emit(text)
      end
    elseif kind == "table" then
      encode_table(value, depth)
    else
      fail_at("a " .. kind .. " cannot be converted to JSON; return tables, strings, numbers and booleans")
    end
  end

  local function encode_results(r)
    if r.n == 0 then
      emit("null")
    elseif r.n == 1 then
      encode(r[1], 0)
    else
      -- Several return values become a list of them.
      emit("[")
      for i = 1, r.n do
        if i > 1 then
          emit(",")
        end
        path[#path + 1] = "[" .. i .. "]"
        encode(r[i], 1)
        path[#path] = nil
      end
      emit("]")
    end
    return table_concat(out)
  end

  -- Reporting -------------------------------------------------------------------------------------

  local function script_traceback(co)
    local frames = {}
    for line in string_gmatch(debug_traceback(co) or "", "[^\n]+") do
      local where = string_match(line, "^%s*(script:%d+:.*)$")
      if where and #frames < 10 then
        -- The script's main chunk is called through a local named fn: say what it is.
        frames[#frames + 1] = (string_gsub(where, "in upvalue 'fn'$", "in main chunk"))
      end
    end
    return frames
  end

  local function first_line(frames)
    for _, frame in ipairs(frames) do
      local n = string_match(frame, "^script:(%d+):")
      if n then
        return math.tointeger(n)
      end
    end
    return nil
  end

  local function truncate(message)
    message = clean_utf8(message)
    if #message > MAX_MESSAGE then
      message = string_sub(message, 1, MAX_MESSAGE) .. "... (truncated)"
    end
    return message
  end

  local function report(kind, message, line, frames, result)
    return {
      kind = kind,
      message = message and truncate(message) or nil,
      line = line,
      traceback = frames or {},
      result = result,
      output = clean_utf8(table_concat(output)),
      instructions = instructions,
    }
  end

  local fn, syntax_error = load(source, "=script", "t", env)
  if not fn then
    local line, message = string_match(syntax_error, "^script:(%d+): (.*)$")
    return report("syntax_error", message or syntax_error, line and math.tointeger(line), {})
  end

  local main = hooked(co_create(function()
    return encode_results(table_pack(fn()))
  end))
  local ok, value = co_resume(main)
  local frames = script_traceback(main)

  if failure_kind ~= nil then
    return report(failure_kind, failure_message, first_line(frames), frames)
  end
  if not ok then
    if value == MEMORY_ERROR then
      return report("memory_limit", messages.memory_limit, first_line(frames), frames)
    end
    local message
    if type(value) == "string" then
      message = value
    elseif math_type(value) then
      message = tostring(value)
    else
      -- Never call a script's __tostring here: this code runs outside the hook.
      message = "(error object is a " .. type(value) .. " value)"
    end
    -- A sandbox function called in a tail position (`return search(x)`) reports its error at the
    -- sandbox's own line, as the script's frame is gone: drop that position, it means nothing to users.
    message = string_gsub(message, "^sandbox:%d+: ", "")
    local line, rest = string_match(message, "^script:(%d+): (.*)$")
    local kind = string_find(message, "stack overflow", 1, true) and "stack_overflow" or "runtime_error"
    return report(kind, rest or message, line and math.tointeger(line) or first_line(frames), frames)
  end
  if co_status(main) ~= "dead" then
    return report("runtime_error", "coroutine.yield was called outside a coroutine", first_line(frames), frames)
  end
  return report("ok", nil, nil, nil, value)
end
