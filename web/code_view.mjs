// The Code tab: the module's generated Python, one clickable line per statement (a line that
// assigns a node carries data-for="<node>"), highlighted by highlight.js. Lines are built and
// highlighted in time-boxed slices between tasks, inside blocks the browser skips while they are
// off screen (content-visibility), so a 15k-line module never blocks the page; a newer render
// cancels an unfinished one.
import hljs from 'highlight.js/lib/core';
import python from 'highlight.js/lib/languages/python';

hljs.registerLanguage('python', python);
const BLOCK_LINES = 100;
const SLICE_MS = 25;
let job = 0;

/** The code's line elements, in order. */
export const codeLineElements = (box) => box.querySelectorAll('.line');

/**
 * Renders `code` into `box`; returns a Map from node name to its line element, filled as the
 * slices run. `box.dataset.highlighted` is 'true' once every line is built and highlighted.
 */
export function renderCode(box, code) {
  const mine = ++job;
  box.replaceChildren();
  box.dataset.highlighted = 'false';
  const lines = code.split('\n');
  const lineOf = new Map();
  let i = 0;
  let block = null;
  const slice = () => {
    if (mine !== job) return;
    const t0 = performance.now();
    // The clock is read every 20 lines: a slice never runs far past SLICE_MS, even on a busy machine.
    while (i < lines.length && (i % 20 || performance.now() - t0 < SLICE_MS)) {
      if (!block || block.childElementCount === BLOCK_LINES) {
        block = document.createElement('div');
        block.className = 'code-block';
        block.style.containIntrinsicSize = `auto ${Math.ceil(Math.min(BLOCK_LINES, lines.length - i) * 16.2)}px`;
        box.append(block);
      }
      const line = lines[i];
      const div = document.createElement('div');
      div.className = 'line';
      div.dataset.line = String(i + 1);
      if (line.trim()) div.innerHTML = hljs.highlight(line, { language: 'python', ignoreIllegals: true }).value;
      else div.textContent = line || ' ';
      const m = /^\s+([A-Za-z_][A-Za-z0-9_]*)\s*=/.exec(line) ?? (/^\s+return\b/.test(line) ? [null, 'output'] : null);
      if (m && !lineOf.has(m[1])) {
        lineOf.set(m[1], div);
        div.dataset.for = m[1];
      }
      block.append(div);
      i++;
    }
    if (i < lines.length) setTimeout(slice, 0);
    else box.dataset.highlighted = 'true';
  };
  slice();
  return lineOf;
}
