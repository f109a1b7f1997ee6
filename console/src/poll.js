// Live updates: one request in flight at a time, a pause between rounds,
// nothing while the tab is hidden, and a stop when the view's signal aborts.

const ERROR_PAUSE_MS = 3000;

function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

function whenVisible(signal) {
  return new Promise((resolve) => {
    if (document.visibilityState === 'visible' || signal.aborted) return resolve();
    function done() {
      if (document.visibilityState !== 'visible' && !signal.aborted) return;
      document.removeEventListener('visibilitychange', done);
      signal.removeEventListener('abort', done);
      resolve();
    }
    document.addEventListener('visibilitychange', done);
    signal.addEventListener('abort', done, { once: true });
  });
}

// Runs `round(signal)` now and then every `intervalMs` after the previous
// round ended, until it returns false or `signal` aborts. A round that
// throws is reported to `onError` and the polling goes on after a pause.
export async function poll(round, intervalMs, signal, onError = () => {}) {
  while (!signal.aborted) {
    await whenVisible(signal);
    if (signal.aborted) return;
    let more = true;
    let failed = false;
    try {
      more = (await round(signal)) !== false;
    } catch (e) {
      if (signal.aborted || e.name === 'AbortError') return;
      failed = true;
      onError(e);
    }
    if (!more || signal.aborted) return;
    // After a failure wait at least ERROR_PAUSE_MS, so a long poll never spins.
    await sleep(failed ? Math.max(intervalMs, ERROR_PAUSE_MS) : intervalMs, signal);
  }
}

// For a round that follows a job: true while it runs, and once more after it
// ended (for the last states and values), then false. One per view:
//   const more = whileRunning(); ... return more(isTerminal(job.state));
export function whileRunning() {
  let final = false;
  return (ended) => {
    if (!ended) return true;
    if (final) return false;
    final = true;
    return true;
  };
}
