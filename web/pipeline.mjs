// The Passes tab's pipeline: one row per step (the pass registry's passes, then typed
// replace_pattern steps), run top to bottom when ticked. Reordered by dragging a row (HTML5 drag
// and drop), by its ▲/▼ buttons, or with Alt+↑/↓ on a focused row. The pattern editor parses a
// typed pattern (web/pattern_dsl.mjs) before adding it, so a mistake is named at once, and the
// worker builds and runs it as a step like any other.
import { parsePattern } from './pattern_dsl.mjs';

const $ = (id) => document.getElementById(id);
let patterns = 0;
const typed = new Map(); // step value 'pattern:N' -> {name, pattern}
let dragged = null;

function stepRow({ value, label, title, checked, removable }) {
  const row = document.createElement('div');
  row.className = 'step';
  row.draggable = true;
  row.tabIndex = 0;
  row.dataset.step = value;
  row.title = `${title}\n(drag to reorder, or Alt+↑/↓)`;
  const grip = Object.assign(document.createElement('span'), { className: 'grip', textContent: '⠿' });
  grip.setAttribute('aria-hidden', 'true');
  const lab = document.createElement('label');
  lab.title = title;
  const box = document.createElement('input');
  Object.assign(box, { type: 'checkbox', name: 'pass', value, checked });
  lab.append(box, ` ${label}`);
  const button = (text, cls, aria, onClick) => {
    const b = Object.assign(document.createElement('button'), { type: 'button', className: cls, textContent: text });
    b.setAttribute('aria-label', aria);
    b.addEventListener('click', onClick);
    return b;
  };
  row.append(grip, lab,
    button('▲', 'up', `move ${label} up`, () => move(row, -1)),
    button('▼', 'down', `move ${label} down`, () => move(row, 1)));
  if (removable) row.append(button('✕', 'remove', `remove ${label}`, () => {
    typed.delete(value);
    row.remove();
    announce(`removed ${label}`);
  }));
  return row;
}

/** Moves a row one place up (-1) or down (+1). */
function move(row, dir) {
  const other = dir < 0 ? row.previousElementSibling : row.nextElementSibling;
  if (!other?.classList.contains('step')) return;
  if (dir < 0) row.parentNode.insertBefore(row, other);
  else row.parentNode.insertBefore(other, row);
  row.focus();
  announce();
}

function announce(text = null) {
  const order = [...$('pass-list').querySelectorAll('.step')].filter((r) => r.querySelector('input').checked).map((r) => r.querySelector('label').textContent.trim());
  $('pipeline-order').textContent = text ? `${text}. Runs: ${order.join(' → ') || 'nothing'}` : `Runs: ${order.join(' → ') || 'nothing'}`;
}

/** Fills the list from the registry ({name, description}), ticking `defaults`. */
export function initPipeline(passes, defaults) {
  const list = $('pass-list');
  for (const { name, description } of passes) list.append(stepRow({ value: name, label: name, title: description, checked: defaults.has(name) }));
  list.addEventListener('change', () => announce());
  list.addEventListener('dragstart', (e) => {
    dragged = e.target.closest?.('.step');
    if (!dragged) return;
    e.dataTransfer.setData('text/x-fxwasm-step', dragged.dataset.step);
    e.dataTransfer.effectAllowed = 'move';
    dragged.classList.add('dragging');
  });
  // Rows move while dragging (above or below the row under the pointer's middle).
  list.addEventListener('dragover', (e) => {
    if (!dragged) return;
    e.preventDefault();
    e.stopPropagation(); // not a file dropped on the page
    const over = e.target.closest?.('.step');
    if (!over || over === dragged) return;
    const r = over.getBoundingClientRect();
    list.insertBefore(dragged, e.clientY > r.top + r.height / 2 ? over.nextSibling : over);
  });
  list.addEventListener('drop', (e) => {
    if (!dragged) return;
    e.preventDefault();
    e.stopPropagation();
  });
  list.addEventListener('dragend', () => {
    dragged?.classList.remove('dragging');
    dragged = null;
    announce();
  });
  list.addEventListener('keydown', (e) => {
    const row = e.target.closest?.('.step');
    if (!row || !e.altKey || (e.key !== 'ArrowUp' && e.key !== 'ArrowDown')) return;
    e.preventDefault();
    move(row, e.key === 'ArrowUp' ? -1 : 1);
  });
  $('pattern-add').addEventListener('click', addPattern);
  $('pattern-text').addEventListener('input', () => {
    $('pattern-error').textContent = '';
    $('pattern-text').removeAttribute('aria-invalid');
  });
  announce();
}

/** Parses the editor's pattern; adds it as a ticked step at the end, or names the mistake. */
function addPattern() {
  const text = $('pattern-text').value;
  let prog;
  try {
    prog = parsePattern(text);
  } catch (e) {
    $('pattern-error').textContent = `${e.kind ?? 'Error'}: ${e.message}`;
    $('pattern-text').setAttribute('aria-invalid', 'true');
    return;
  }
  const value = `pattern:${++patterns}`;
  const name = `pattern ${patterns}: ${prog.label}`;
  typed.set(value, { name, pattern: text });
  $('pass-list').append(stepRow({ value, label: name, title: text, checked: true, removable: true }));
  $('pattern-error').textContent = '';
  announce(`added ${name}`);
}

/** The ticked steps in order: registered pass names and {name, pattern} for typed patterns. */
export function pipelineSteps() {
  return [...$('pass-list').querySelectorAll('input[name=pass]:checked')].map((i) => typed.get(i.value) ?? i.value);
}
