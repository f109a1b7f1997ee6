// The filter boxes of a list of jobs (views/jobs.js, views/vertex.js): a
// state picked applies at once; a label (key=value) and a search typed apply
// 300 ms after the last key. `typed()` adds the view's other typed fields to
// what typing applies; `onType` is for the view's own typed boxes.
import { h } from './dom.js';

export function filterInputs(s, { states, searchPlaceholder, changed, signal, typed = () => ({}) }) {
  const stateSelect = h(
    'select',
    { id: 'state-filter', onchange: () => changed({ state: stateSelect.value }) },
    h('option', { value: '' }, 'Any state'),
    states.map((st) => h('option', { value: st, selected: st === s.state }, st)),
  );
  const box = (id, type, placeholder, value) =>
    h('input', { id, type, placeholder, value, autocomplete: 'off', spellcheck: false });
  const labelInput = box('label-filter', 'text', 'key=value', s.label);
  const searchInput = box('search', 'search', searchPlaceholder, s.q);
  let typing = 0;
  const onType = () => {
    clearTimeout(typing);
    typing = setTimeout(
      () => changed({ label: labelInput.value.trim(), q: searchInput.value.trim(), ...typed() }),
      300,
    );
  };
  labelInput.addEventListener('input', onType);
  searchInput.addEventListener('input', onType);
  signal.addEventListener('abort', () => clearTimeout(typing));
  return { stateSelect, labelInput, searchInput, onType };
}
