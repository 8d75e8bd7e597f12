-- index-writer.lua: records each uploaded object with its download URL in a JSON index.
--
-- At the end of the run it writes one JSON document, {"job", "run_id", "objects": [{"path",
-- "size", "contentType", "md5Hash", "generation", "downloadURL"}]}, sorted by path, appended as
-- one line to the index file. Settings (environment): HOIST_INDEX_FILE, relative to the job's
-- folder (default "index/<job>.json").
local path = os.getenv("HOIST_INDEX_FILE") or ("index/" .. hoist.job.name .. ".json")
local objects = {}

function on_success(s)
  objects[#objects + 1] = {
    path = s.reference.fullPath, size = s.metadata.size, contentType = s.metadata.contentType,
    md5Hash = s.metadata.md5Hash, generation = s.metadata.generation, downloadURL = s.downloadURL,
  }
end

function on_job_end(summary)
  table.sort(objects, function(a, b) return a.path < b.path end)
  hoist.append_file(path, json.encode({ job = summary.name, run_id = summary.run_id, objects = objects }) .. "\n")
  log.info("index of " .. #objects .. " objects written to " .. path)
end
