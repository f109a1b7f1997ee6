// fetch() with the signed-in user's token. Every error becomes an ApiError
// carrying the API's own message and HTTP status; a 401 signs the user out.
import { createParser } from 'eventsource-parser';

const TOKEN_KEY = 'mlengine.token';

export class ApiError extends Error {
  constructor(message, status, code) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code || '';
  }
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

let unauthorizedHandler = () => {};

// Called with the API's message when any call answers 401.
export function onUnauthorized(fn) {
  unauthorizedHandler = fn;
}

// The path with its query: undefined, null and "" values are left out.
export function withQuery(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v != null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

export const enc = encodeURIComponent;

async function errorFrom(res) {
  let message = `${res.status} ${res.statusText || 'error'}`;
  let code = '';
  try {
    const body = await res.json();
    if (body && body.error) {
      if (body.error.message) message = body.error.message;
      code = body.error.status || '';
    }
  } catch {
    // Not JSON: keep the status line.
  }
  return new ApiError(message, res.status, code);
}

async function send(path, { method = 'GET', body, signal, token = getToken(), noSignout = false } = {}) {
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(`The server did not answer (${e.message}).`, 0);
  }
  if (!res.ok) {
    const err = await errorFrom(res);
    if (res.status === 401 && !noSignout) unauthorizedHandler(err.message);
    throw err;
  }
  return res;
}

// JSON of a call; `opts`: method, body (JSON), signal, token, noSignout
// (a 401 is only thrown, as when checking a token being signed in with).
export async function api(path, opts = {}) {
  const res = await send(path, opts);
  const t = await res.text();
  return t ? JSON.parse(t) : {};
}

// Follows a streamed response (alt=sse): each server-sent event's type
// ('' for a plain one) and JSON data to `onEvent`, until the server ends the
// body (resolves) or `opts.signal` aborts. An event named "error" carries
// Google's error body: it is thrown as an ApiError.
export async function apiStream(path, onEvent, opts = {}) {
  const res = await send(path, opts);
  let failure = null;
  const parser = createParser({
    onEvent(event) {
      if (failure) return;
      let data;
      try {
        data = JSON.parse(event.data);
      } catch {
        failure = new ApiError('The server sent an event that is not JSON.', res.status);
        return;
      }
      if (event.event === 'error') {
        const e = (data && data.error) || {};
        failure = new ApiError(e.message || 'The stream ended with an error.', e.code || 500, e.status || '');
        return;
      }
      onEvent(event.event || '', data);
    },
  });
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    parser.feed(value);
    if (failure) {
      reader.cancel().catch(() => {});
      throw failure;
    }
  }
}

// The bytes of a call as a Blob (downloads).
export async function apiBlob(path, opts = {}) {
  const res = await send(path, opts);
  return res.blob();
}

export function isAbort(e) {
  return e && e.name === 'AbortError';
}

// Saves a Blob under a file name through an <a download> and an object URL.
export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
