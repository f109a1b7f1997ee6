// The one way pages build DOM: h(tag, attrs, ...children). Strings and
// numbers become text nodes, never markup; there is no innerHTML anywhere.

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
      if (v == null || v === false) continue;
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

// A state badge: the word, with a class for its colour.
export function stateBadge(state, attrs = {}) {
  const s = state || 'UNKNOWN';
  return h('span', { ...attrs, class: ['badge', `state-${s.toLowerCase()}`, attrs.class] }, s);
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
