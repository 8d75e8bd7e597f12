-- jsonl-log.lua: one JSON line per upload outcome, appended to a file in the job's hook output folder (lua.output).
--
-- Each line: {"time", "job", "run_id", "event" ("success" or "failure"), "object", "file",
-- "size", "md5Hash" (success), "code" and "message" (failure)}.
--
-- setting file (string): the log, relative to the job's hook output folder (default: $HOIST_JSONL_LOG, else "<job>.jsonl").
-- reads env: HOIST_JSONL_LOG (default of setting file)
local settings = settings or {}
local path = settings.file or os.getenv("HOIST_JSONL_LOG") or (hoist.job.name .. ".jsonl")

local function write(fields)
  fields.time = os.date("!%Y-%m-%dT%H:%M:%SZ")
  fields.job = hoist.job.name
  fields.run_id = hoist.job.run_id
  hoist.append_file(path, json.encode(fields) .. "\n")
end

function on_success(s)
  write({ event = "success", object = s.reference.fullPath, file = s.file.path,
          size = s.metadata.size, md5Hash = s.metadata.md5Hash })
end

function on_failure(s)
  write({ event = "failure", object = s.reference.fullPath, file = s.file.path,
          code = s.error.code, message = s.error.message })
end
