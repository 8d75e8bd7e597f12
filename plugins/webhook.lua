-- webhook.lua: POSTs a JSON summary of the run to a webhook when the job ends.
--
-- setting url (string): where to POST (default: $HOIST_WEBHOOK_URL; without either, only a warning).
-- setting events (list): which runs to report: "success" (nothing failed), "failure" (default: both).
-- reads env: HOIST_WEBHOOK_URL (default of setting url)
--
-- The body: {"job", "run_id", "uploaded", "failed", "skipped", "cancelled", "bytes", "seconds",
-- "interrupted", "failures": [{"object", "code", "message"}] (at most 20; [] when none)}.
local settings = settings or {}
local url = settings.url or os.getenv("HOIST_WEBHOOK_URL")
local events = {}
for _, event in ipairs(settings.events or { "success", "failure" }) do events[event] = true end
local failures = {}

function on_failure(s)
  if #failures < 20 then
    failures[#failures + 1] = { object = s.reference.fullPath, code = s.error.code, message = s.error.message }
  end
end

function on_job_end(summary)
  local outcome = (summary.failed > 0 or summary.interrupted) and "failure" or "success"
  if not events[outcome] then return end
  if not url or url == "" then
    log.warn("no url: set the plugin's url setting (or HOIST_WEBHOOK_URL); no webhook sent")
    return
  end
  local body = {
    job = summary.name, run_id = summary.run_id, uploaded = summary.uploaded, failed = summary.failed,
    skipped = summary.skipped, cancelled = summary.cancelled, bytes = summary.bytes,
    seconds = summary.seconds, interrupted = summary.interrupted, failures = json.array(failures),
  }
  local response, err = http.post(url, json.encode(body), { ["Content-Type"] = "application/json" })
  if not response then
    log.error("webhook failed: " .. err)
  elseif response.status >= 300 then
    log.error("webhook answered " .. response.status)
  else
    log.info("webhook sent: " .. response.status)
  end
end
