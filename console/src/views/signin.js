// Sign-in: a token typed once, checked with whoami, kept in sessionStorage.
import { api, setToken } from '../api.js';
import { h, text } from '../dom.js';

export function mount(root, ctx) {
  const input = h('input', {
    id: 'token',
    type: 'password',
    name: 'token',
    autocomplete: 'off',
    spellcheck: false,
    required: true,
    'aria-describedby': 'signin-help',
  });
  const error = h('p', { id: 'signin-error', class: 'form-error', role: 'alert' });
  const submit = h('button', { id: 'signin-submit', type: 'submit', class: 'btn btn-primary' }, 'Sign in');
  const message = ctx.takeSigninMessage();
  if (message) text(error, message);
  error.hidden = !message;

  async function onSubmit(ev) {
    ev.preventDefault();
    const token = input.value.trim();
    if (!token) {
      text(error, 'Enter a token.');
      error.hidden = false;
      return;
    }
    submit.disabled = true;
    try {
      // Checked with the typed token; it is kept only once it is accepted.
      const who = await api('/mlengine/v1/whoami', { token, signal: ctx.signal, noSignout: true });
      setToken(token);
      ctx.onSignedIn(who);
    } catch (e) {
      if (e.name === 'AbortError') return;
      text(error, e.message);
      error.hidden = false;
      submit.disabled = false;
      input.select();
    }
  }

  root.append(
    h(
      'section',
      { class: 'signin card' },
      h('h1', null, 'Sign in to mlengine'),
      h(
        'form',
        { onsubmit: onSubmit, novalidate: true },
        h('label', { for: 'token' }, 'Access token'),
        input,
        h(
          'p',
          { id: 'signin-help', class: 'help' },
          'Operators: the token in DATA_DIR/admin.token. Users: a token from ',
          h('code', null, 'mlengine admin users create-token EMAIL'),
          ' or ',
          h('code', null, 'mlengine auth print-access-token'),
          '. It is kept in this tab only.',
        ),
        error,
        submit,
      ),
    ),
  );
  input.focus();
}
