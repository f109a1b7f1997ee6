// The application shell: header, the page region, the error banner, and the
// router that mounts one view at a time (aborting the previous one's work).
import './console.css';
import { api, clearToken, getToken, isAbort, onUnauthorized } from './api.js';
import { fill, h, text } from './dom.js';
import { navigate, start } from './router.js';
import { poll } from './poll.js';
import * as signin from './views/signin.js';
import * as jobs from './views/jobs.js';
import * as job from './views/job.js';
import * as vertex from './views/vertex.js';
import * as vertexjob from './views/vertexjob.js';
import * as cluster from './views/cluster.js';
import * as buckets from './views/buckets.js';

const VIEWS = {
  signin: signin.mount,
  jobs: jobs.mount,
  job: job.mount,
  vertex: vertex.mount,
  vertexjob: vertexjob.mount,
  cluster: cluster.mount,
  buckets: buckets.listMount,
  bucket: buckets.objectsMount,
};

const NAV = [
  ['nav-jobs', '#/jobs', 'Jobs', ['jobs', 'job']],
  ['nav-vertex', '#/vertex', 'Vertex AI', ['vertex', 'vertexjob']],
  ['nav-cluster', '#/cluster', 'Cluster', ['cluster']],
  ['nav-buckets', '#/buckets', 'Buckets', ['buckets', 'bucket']],
];

const state = {
  whoami: null, // {principal, operator} of the signed-in token
  signinMessage: '', // shown on the sign-in page after a 401
  controller: null,
};

const whoamiEl = h('span', { id: 'whoami', class: 'whoami' });
const navLinks = NAV.map(([id, href, label]) => h('a', { id, href }, label));
const header = h(
  'header',
  { class: 'app-header' },
  h('a', { class: 'brand', href: '#/jobs' }, 'mlengine'),
  h('nav', { class: 'main-nav', 'aria-label': 'Main' }, navLinks),
  h(
    'div',
    { class: 'session' },
    whoamiEl,
    h('button', { id: 'signout', type: 'button', class: 'btn btn-quiet', onclick: () => signOut('') }, 'Sign out'),
  ),
);
const pageError = h('div', { id: 'page-error', role: 'alert', class: 'page-error', hidden: true });
// What everyone should know of the service (GET /mlengine/v1/status): a full
// disk, say. Looked at every 15 s while signed in, whatever the page.
const serviceStatus = h('div', { id: 'service-status', role: 'status', class: 'service-status', hidden: true });
const page = h('main', { id: 'page', class: 'page', tabindex: '-1' });
const skip = h('a', { class: 'skip-link', href: '#page', onclick: skipToMain }, 'Skip to content');

function skipToMain(ev) {
  ev.preventDefault();
  page.focus();
}

document.body.replaceChildren(skip, header, serviceStatus, pageError, page);

const STATUS_EVERY_MS = 15000;
let statusWatch = null; // the AbortController of the status poll, while signed in

function watchStatus(signedIn) {
  if (!signedIn) {
    if (statusWatch) statusWatch.abort();
    statusWatch = null;
    serviceStatus.hidden = true;
    return;
  }
  if (statusWatch) return;
  statusWatch = new AbortController();
  poll(
    async (signal) => {
      const s = await api('/mlengine/v1/status', { signal });
      const disk = (s && s.dataDisk) || {};
      text(serviceStatus, disk.full ? disk.message || 'mlengine\'s disk is full.' : '');
      serviceStatus.hidden = !disk.full;
      return true;
    },
    STATUS_EVERY_MS,
    statusWatch.signal,
  );
}

function setError(e) {
  if (isAbort(e)) return;
  const msg = e == null ? '' : typeof e === 'string' ? e : e.message || String(e);
  text(pageError, msg);
  pageError.hidden = !msg;
}

function signOut(message) {
  clearToken();
  state.whoami = null;
  state.signinMessage = message;
  navigate('#/signin');
}

onUnauthorized((message) => signOut(message || 'Your token was not accepted; sign in again.'));

async function loadWhoami(signal) {
  if (state.whoami) return;
  try {
    state.whoami = await api('/mlengine/v1/whoami', { signal });
    text(whoamiEl, state.whoami.principal + (state.whoami.operator ? ' (operator)' : ''));
  } catch (e) {
    if (!isAbort(e)) text(whoamiEl, '');
  }
}

function route(r) {
  if (state.controller) state.controller.abort();
  const controller = new AbortController();
  state.controller = controller;
  setError('');
  const signedIn = Boolean(getToken());
  if (r.name !== 'signin' && !signedIn) {
    navigate('#/signin');
    return;
  }
  if (r.name === 'signin' && signedIn && !state.signinMessage) {
    navigate('#/jobs');
    return;
  }
  header.hidden = r.name === 'signin';
  watchStatus(r.name !== 'signin' && signedIn);
  NAV.forEach(([, , , names], i) => {
    if (names.includes(r.name)) navLinks[i].setAttribute('aria-current', 'page');
    else navLinks[i].removeAttribute('aria-current');
  });
  if (r.name !== 'signin') loadWhoami(controller.signal);
  const view = VIEWS[r.name];
  fill(page);
  if (!view) {
    fill(page, h('h1', null, 'Not found'), h('p', null, h('a', { href: '#/jobs' }, 'Back to the jobs')));
    return;
  }
  const ctx = {
    ...r,
    signal: controller.signal,
    setError,
    clearError: () => setError(''),
    takeSigninMessage: () => {
      const m = state.signinMessage;
      state.signinMessage = '';
      return m;
    },
    onSignedIn: (who) => {
      state.whoami = who;
      text(whoamiEl, who.principal + (who.operator ? ' (operator)' : ''));
      navigate('#/jobs');
    },
  };
  try {
    view(page, ctx);
  } catch (e) {
    setError(e);
  }
}

start(route);
