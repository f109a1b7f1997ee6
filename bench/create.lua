-- wrk script: durable jobs.create with a unique jobId per request.
local counter = 0
local thread_id = 0
local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  token = os.getenv("MLE_TOKEN")
  prefix = os.getenv("MLE_PREFIX") or "bench"
  -- MLE_MACHINE=n1-standard-4: the job a Vertex AI customJobs.create of one
  -- pool on that machine is (bench/create_vertex.lua), as ml v1 says it.
  local machine = os.getenv("MLE_MACHINE")
  if machine == "" then machine = nil end
  tier = machine and ('"scaleTier":"CUSTOM","masterType":"' .. machine .. '",') or '"scaleTier":"BASIC",'
end

request = function()
  counter = counter + 1
  local body = string.format(
    '{"jobId":"%s_%d_%d","trainingInput":{%s"packageUris":["gs://b/t-0.0.0.tar.gz"],' ..
    '"pythonModule":"trainer.task","region":"us-central1","runtimeVersion":"2.11"}}', prefix, tid, counter, tier)
  return wrk.format("POST", "/v1/projects/bench/jobs",
    {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}, body)
end

done = function(summary, latency, requests)
  io.write(string.format("non-2xx: %d\n", summary.errors.status))
end
