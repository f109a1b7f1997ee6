// The one way pages build DOM: h(tag, attrs, ...children). Strings and
// numbers become text nodes, never markup; there is no innerHTML anywhere.
import { stateClass } from './format.js';

const URL_OK = /^(#|\/|\.{0,2}\/|https?:|blob:|mailto:)/i;

// A link target from data: fragments, same-origin paths, http(s) and blob:
// only (no javascript: or data:).
export function safeHref(href) {
  const s = String(href);
  return URL_OK.test(s) || !/^[a-z][a-z0-9+.-]*:/i.test(s) ? s : '#';
}

// attrs: class, id, dataset via data-*, aria-*, on<Event>: function, any
// other key as a property when the element has one (value, checked,
// disabled, type...) else as an attribute. `style` is refused: the CSP
// forbids style attributes; set element.style.x from code instead.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      // false leaves an attribute out, but sets a boolean property (spellcheck, hidden...).
      if (v == null || (v === false && !(k in el))) continue;
      if (k === 'style') throw new Error('h(): no style attribute (CSP); use a class');
      if (k === 'class') el.className = Array.isArray(v) ? v.filter(Boolean).join(' ') : v;
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2).toLowerCase(), v);
      else if (k === 'href') el.setAttribute('href', safeHref(v));
      else if (k.startsWith('data-') || k.startsWith('aria-') || k === 'role' || k === 'for' || k === 'tabindex')
        el.setAttribute(k, v === true ? '' : String(v));
      else if (k in el) el[k] = v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.append(c);
    else el.append(document.createTextNode(String(c)));
  }
}

// Replaces an element's children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function text(el, value) {
  const s = value == null ? '' : String(value);
  if (el.textContent !== s) el.textContent = s;
  return el;
}

// A spot in the page where `el` is present only while shown (absent, not
// hidden, otherwise): place(spot.node), then spot.show(bool).
export function presence(el) {
  const node = h('div', { class: 'presence' });
  return {
    node,
    el,
    show(on) {
      if (on && el.parentNode !== node) node.append(el);
      else if (!on && el.parentNode === node) el.remove();
    },
  };
}

// A state badge: the word, with a class for its colour (that of `colour`,
// a state word of the same meaning, when given: JOB_STATE_RUNNING's is RUNNING's).
export function stateBadge(state, attrs = {}, colour = state) {
  return h('span', { ...attrs, class: ['badge', stateClass(colour), attrs.class] }, state || 'UNKNOWN');
}

// A table with a header row; returns {table, tbody}.
export function table(attrs, headers) {
  const tbody = h('tbody');
  const t = h(
    'table',
    attrs,
    h('thead', null, h('tr', null, headers.map((x) => h('th', { scope: 'col' }, x)))),
    tbody,
  );
  return { table: t, tbody };
}

// Tables scroll sideways inside this on narrow screens.
export function scroller(...children) {
  return h('div', { class: 'table-scroll' }, ...children);
}
