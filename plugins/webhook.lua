-- webhook.lua: POSTs a JSON summary of the run to a webhook when the job ends.
--
-- Settings (environment): HOIST_WEBHOOK_URL (required; without it the plugin only logs a
-- warning). The body: {"job", "run_id", "uploaded", "failed", "skipped", "cancelled", "bytes",
-- "seconds", "interrupted", "failures": [{"object", "code", "message"}] (at most 20)}.
local url = os.getenv("HOIST_WEBHOOK_URL")
local failures = {}

function on_failure(s)
  if #failures < 20 then
    failures[#failures + 1] = { object = s.reference.fullPath, code = s.error.code, message = s.error.message }
  end
end

function on_job_end(summary)
  if not url or url == "" then
    log.warn("HOIST_WEBHOOK_URL is not set: no webhook sent")
    return
  end
  summary.failures = failures
  local response, err = http.post(url, json.encode(summary), { ["Content-Type"] = "application/json" })
  if not response then
    log.error("webhook failed: " .. err)
  elseif response.status >= 300 then
    log.error("webhook answered " .. response.status)
  else
    log.info("webhook sent: " .. response.status)
  end
end
