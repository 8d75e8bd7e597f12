-- guard.lua: keeps a run inside limits.
--
--  * Skips files larger than HOIST_GUARD_MAX_FILE bytes before they start (before_upload).
--  * Cancels an upload in flight that grows past that size (a file growing while read).
--  * Pauses the whole job once HOIST_GUARD_BUDGET bytes have been uploaded in this run; a
--    person resumes it (SIGUSR1, or SIGCONT after Ctrl-Z) when more may go.
--
-- setting maxFile (number): the largest file, in bytes (default: $HOIST_GUARD_MAX_FILE, else no limit).
-- setting budget (number): bytes a run may send before it pauses (default: $HOIST_GUARD_BUDGET, else no limit).
-- reads env: HOIST_GUARD_MAX_FILE (default of setting maxFile)
-- reads env: HOIST_GUARD_BUDGET (default of setting budget)
local settings = settings or {}
local max_file = settings.maxFile or tonumber(os.getenv("HOIST_GUARD_MAX_FILE") or "")
local budget = settings.budget or tonumber(os.getenv("HOIST_GUARD_BUDGET") or "")
local sent = 0
local paused = false

function before_upload(file)
  if max_file and file.size > max_file then
    log.warn(file.relpath .. " is " .. file.size .. " bytes, over " .. max_file .. ": skipped")
    return false
  end
end

function on_progress(s)
  if max_file and s.progress.total > max_file then
    log.warn(s.reference.fullPath .. " grew past " .. max_file .. " bytes: cancelled")
    s.task:cancel()
  end
end

function on_success(s)
  sent = sent + s.metadata.size
  if budget and sent >= budget and not paused then
    paused = true
    log.warn("byte budget of " .. budget .. " reached (" .. sent .. " sent): job paused")
    hoist.pause_job()
  end
end
