-- guard.lua: keeps a run inside limits.
--
--  * Skips files larger than HOIST_GUARD_MAX_FILE bytes before they start (before_upload).
--  * Cancels an upload in flight that grows past that size (a file growing while read).
--  * Pauses the whole job once HOIST_GUARD_BUDGET bytes have been uploaded in this run; a
--    person resumes it (SIGUSR1, or SIGCONT after Ctrl-Z) when more may go.
-- Settings (environment, in bytes): HOIST_GUARD_MAX_FILE (default: no limit),
-- HOIST_GUARD_BUDGET (default: no limit).
local max_file = tonumber(os.getenv("HOIST_GUARD_MAX_FILE") or "")
local budget = tonumber(os.getenv("HOIST_GUARD_BUDGET") or "")
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
