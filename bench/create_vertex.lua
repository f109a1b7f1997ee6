-- wrk script: durable Vertex AI customJobs.create (the server names each job).
function init(args)
  token = os.getenv("MLE_TOKEN")
end

local body = '{"displayName":"bench","jobSpec":{"workerPoolSpecs":[{"machineSpec":{"machineType":"n1-standard-4"},' ..
  '"replicaCount":"1","pythonPackageSpec":{"executorImageUri":"us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-11:latest",' ..
  '"packageUris":["gs://b/t-0.0.0.tar.gz"],"pythonModule":"trainer.task"}}]}}'

request = function()
  return wrk.format("POST", "/v1/projects/bench/locations/us-central1/customJobs",
    {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}, body)
end

done = function(summary, latency, requests)
  io.write(string.format("non-2xx: %d\n", summary.errors.status))
end
