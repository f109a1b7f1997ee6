-- wrk script: GET with the bearer token from MLE_TOKEN.
init = function(args)
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("MLE_TOKEN")
end
done = function(summary, latency, requests)
  io.write(string.format("non-2xx: %d\n", summary.errors.status))
end
