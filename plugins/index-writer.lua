-- index-writer.lua: records each uploaded object with its download URL in a JSON Lines index.
--
-- setting file (string): the index, relative to the job's hook output folder, lua.output (default: $HOIST_INDEX_FILE, else "<job>.index.jsonl").
-- reads env: HOIST_INDEX_FILE (default of setting file)
--
-- At the end of each run it appends one line, a JSON document: {"job", "run_id", "objects":
-- [{"path", "size", "contentType", "md5Hash", "generation", "downloadURL"}]} (sorted by path;
-- [] when nothing was uploaded). The file is JSON Lines: one document per line, one line per run.
local settings = settings or {}
local path = settings.file or os.getenv("HOIST_INDEX_FILE") or (hoist.job.name .. ".index.jsonl")
local objects = {}

function on_success(s)
  objects[#objects + 1] = {
    path = s.reference.fullPath, size = s.metadata.size, contentType = s.metadata.contentType,
    md5Hash = s.metadata.md5Hash, generation = s.metadata.generation, downloadURL = s.downloadURL,
  }
end

function on_job_end(summary)
  table.sort(objects, function(a, b) return a.path < b.path end)
  local line = json.encode({ job = summary.name, run_id = summary.run_id, objects = json.array(objects) })
  hoist.append_file(path, line .. "\n")
  log.info("index of " .. #objects .. " objects written to " .. path)
end
