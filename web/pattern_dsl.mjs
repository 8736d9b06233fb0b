// The playground's replace_pattern language: a pattern and its replacement typed as small
// programs, parsed here (pure, so the page checks a pattern as it is added) and built into FX
// Graphs for the package's replacePattern by the model worker (buildPatternPass gets the fx API).
//
//   Relu(x) -> Clip(x, 0.0, 6.0)                 one line: pattern -> replacement
//
//   pattern:                                     or two sections of statements
//     y = MatMul(a, b)
//     Add(y, c)                                  the last line (or `return v, w`) is the output
//   replacement:
//     Gemm(a, b, c, alpha=1.0)
//
// Ops: ONNX op types (Relu means onnx.Relu) or qualified targets (torch.relu). Arguments: names
// (a pattern name not assigned first is an input: it matches any value; the replacement uses the
// pattern's inputs and its own assignments), nested calls, and, in the replacement only, numbers
// and [lists] as constant tensors (with a '.' or an exponent float32, else int64; a scalar for a
// number, 1-D for a list). `name=value` is an attribute: in the pattern the matched node must
// have that value, attributes the pattern does not name are not compared; in the replacement it
// is set (1 an int, 1.0 a float, [1, 2] ints, 'text' a string). '#' starts a comment.

/** A typed pattern's error: `line` (1-based, in the text) and a message naming the problem. */
export class PatternError extends Error {
  constructor(message, line = null) {
    super(line ? `line ${line}: ${message}` : message);
    this.kind = 'PatternError';
    this.line = line;
  }
}

const TOKEN = /\s*(?:(->)|([A-Za-z_][A-Za-z0-9_.]*)|(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|('[^']*'|"[^"]*")|([(),=[\]]))/y;

function tokenize(text, line) {
  const out = [];
  let i = 0;
  const src = text.replace(/#.*$/, '');
  while (i < src.length) {
    if (!src.slice(i).trim()) break;
    TOKEN.lastIndex = i;
    const m = TOKEN.exec(src);
    if (!m) throw new PatternError(`cannot read '${src.slice(i).trim().slice(0, 20)}'`, line);
    i = TOKEN.lastIndex;
    if (m[1]) out.push({ t: 'arrow' });
    else if (m[2]) out.push({ t: 'name', v: m[2] });
    else if (m[3]) out.push({ t: 'num', v: Number(m[3]), float: /[.eE]/.test(m[3]) });
    else if (m[4]) out.push({ t: 'str', v: m[4].slice(1, -1) });
    else out.push({ t: m[5] });
  }
  return out;
}

/** Parses one line's tokens from `k`: an expression. Returns [expr, next k]. */
function parseExpr(toks, k, line) {
  const tok = toks[k];
  const want = (t) => {
    if (toks[k]?.t !== t) throw new PatternError(`expected '${t}'${toks[k] ? ` before '${toks[k].v ?? toks[k].t}'` : ' at the end of the line'}`, line);
    k++;
  };
  if (!tok) throw new PatternError('expected a value at the end of the line', line);
  if (tok.t === 'num') return [{ type: 'num', value: tok.v, float: tok.float }, k + 1];
  if (tok.t === 'str') return [{ type: 'str', value: tok.v }, k + 1];
  if (tok.t === '[') {
    k++;
    const items = [];
    while (toks[k]?.t !== ']') {
      if (toks[k]?.t !== 'num') throw new PatternError('a list holds numbers only', line);
      items.push(toks[k]);
      k++;
      if (toks[k]?.t === ',') k++;
      else if (toks[k]?.t !== ']') want(']');
    }
    return [{ type: 'list', values: items.map((x) => x.v), float: items.some((x) => x.float) }, k + 1];
  }
  if (tok.t !== 'name') throw new PatternError(`unexpected '${tok.t === 'arrow' ? '->' : tok.t}'`, line);
  k++;
  if (toks[k]?.t !== '(') return [{ type: 'name', name: tok.v }, k];
  k++;
  const call = { type: 'call', op: tok.v, args: [], kwargs: [], line };
  while (toks[k]?.t !== ')') {
    if (toks[k]?.t === 'name' && toks[k + 1]?.t === '=') {
      const key = toks[k].v;
      const [value, next] = parseExpr(toks, k + 2, line);
      if (value.type === 'call' || value.type === 'name') throw new PatternError(`attribute ${key} must be a number, a [list] or a 'string'`, line);
      call.kwargs.push([key, value]);
      k = next;
    } else {
      if (call.kwargs.length) throw new PatternError(`an input of ${tok.v} after its attributes`, line);
      const [arg, next] = parseExpr(toks, k, line);
      call.args.push(arg);
      k = next;
    }
    if (toks[k]?.t === ',') k++;
    else if (toks[k]?.t !== ')') want(')');
  }
  return [call, k + 1];
}

/** One statement: `[name =] expr` or `return expr, ...`. */
function parseStatement(toks, line) {
  if (toks[0]?.t === 'name' && toks[0].v === 'return') {
    const outs = [];
    let k = 1;
    while (k < toks.length) {
      const [e, next] = parseExpr(toks, k, line);
      outs.push(e);
      k = next;
      if (toks[k]?.t === ',') k++;
      else if (k < toks.length) throw new PatternError(`unexpected '${toks[k].v ?? toks[k].t}' after the returned value`, line);
    }
    if (!outs.length) throw new PatternError('return what?', line);
    return { returns: outs, line };
  }
  let target = null;
  let k = 0;
  if (toks[0]?.t === 'name' && toks[1]?.t === '=') {
    target = toks[0].v;
    k = 2;
  }
  const [expr, next] = parseExpr(toks, k, line);
  if (next < toks.length) throw new PatternError(`unexpected '${toks[next].v ?? toks[next].t}' after the expression`, line);
  return { target, expr, line };
}

/**
 * Checks a section's names: returns {statements, outputs, inputs (first-use order)}; `known`
 * (the pattern's inputs) restricts a replacement's free names.
 */
function resolve(statements, where, known = null) {
  const defined = new Set();
  const inputs = [];
  let outputs = null;
  const visit = (e, line, top) => {
    if (e.type === 'name') {
      if (defined.has(e.name)) return;
      if (known && !known.includes(e.name)) throw new PatternError(`the ${where} uses '${e.name}', which is neither an input of the pattern (${known.join(', ') || 'none'}) nor assigned before`, line);
      if (!inputs.includes(e.name)) inputs.push(e.name);
    } else if (e.type === 'call') {
      for (const a of e.args) visit(a, line, false);
    } else if (!known) {
      throw new PatternError(`the pattern cannot match a constant (${e.type === 'str' ? `'${e.value}'` : e.type === 'list' ? `[${e.values}]` : e.value}): write a name, which matches any value, or an attribute such as alpha=0.5`, line);
    } else if (top) {
      throw new PatternError('the replacement cannot return a constant', line);
    }
  };
  for (const s of statements) {
    if (outputs) throw new PatternError(`nothing may follow the ${where}'s return`, s.line);
    if (s.returns) {
      s.returns.forEach((e) => visit(e, s.line, true));
      outputs = s.returns;
      continue;
    }
    visit(s.expr, s.line, true);
    if (s.target) {
      if (!known && inputs.includes(s.target)) throw new PatternError(`'${s.target}' is used before it is assigned`, s.line);
      defined.add(s.target);
    }
  }
  if (!statements.length) throw new PatternError(`the ${where} is empty`);
  const last = statements[statements.length - 1];
  outputs ??= [last.target ? { type: 'name', name: last.target } : last.expr];
  if (!known && !statements.some((s) => s.expr?.type === 'call' || s.returns?.some((e) => e.type === 'call'))) throw new PatternError('the pattern must call at least one op');
  return { statements, outputs, inputs };
}

/**
 * Parses a typed replace_pattern: {pattern, replacement, inputs, label}, or throws a
 * PatternError naming the line.
 */
export function parsePattern(text) {
  const lines = String(text).split('\n');
  const sections = { pattern: [], replacement: [] };
  let section = null;
  let arrow = null;
  lines.forEach((raw, i) => {
    const line = i + 1;
    const s = raw.replace(/#.*$/, '').trim();
    if (!s) return;
    const head = /^(pattern|replacement)\s*:\s*$/.exec(s);
    if (head) {
      if (arrow) throw new PatternError(`'${head[1]}:' after a one-line pattern`, line);
      section = head[1];
      return;
    }
    const toks = tokenize(s, line);
    const at = toks.findIndex((t) => t.t === 'arrow');
    if (at >= 0) {
      if (section || arrow) throw new PatternError("'->' belongs to a one-line pattern: 'Relu(x) -> Clip(x, 0.0, 6.0)'", line);
      arrow = line;
      sections.pattern.push(parseStatement(toks.slice(0, at), line));
      sections.replacement.push(parseStatement(toks.slice(at + 1), line));
      return;
    }
    if (!section) throw new PatternError("start with 'pattern:' (then 'replacement:'), or write one line 'pattern -> replacement'", line);
    sections[section].push(parseStatement(toks, line));
  });
  if (!sections.pattern.length && !sections.replacement.length) throw new PatternError('type a pattern, e.g. Relu(x) -> Clip(x, 0.0, 6.0)');
  if (!arrow && !sections.replacement.length) throw new PatternError("the 'replacement:' section is missing or empty");
  const pattern = resolve(sections.pattern, 'pattern');
  const replacement = resolve(sections.replacement, 'replacement', pattern.inputs);
  if (pattern.outputs.length !== replacement.outputs.length) throw new PatternError(`the pattern returns ${pattern.outputs.length} value(s), the replacement ${replacement.outputs.length}`);
  const ops = (sec) => [...new Set(sec.statements.flatMap((s) => collectOps(s.returns ?? [s.expr])))].join('+');
  return { pattern, replacement, inputs: pattern.inputs, label: `${ops(pattern)} → ${ops(replacement)}` };
}

function collectOps(exprs) {
  const out = [];
  const walk = (e) => {
    if (e.type !== 'call') return;
    e.args.forEach(walk);
    out.push(e.op.replace(/^onnx\./, ''));
  };
  exprs.forEach(walk);
  return out;
}

const targetOf = (op) => (op.includes('.') ? op : `onnx.${op}`);

/**
 * A JS pass for fx.runPasses that replaces every match of a parsed pattern (`prog` from
 * parsePattern) in the module it gets: {name, fn, matches()} (matches: how many the last run
 * replaced). Matching ignores the attributes the pattern does not name; those it names must be
 * equal. Constants of the replacement become buffers of the module (gm.constant).
 */
export function buildPatternPass(fx, prog, name) {
  let replaced = 0;
  const attr = (v) => (v.type === 'num' ? (v.float ? fx.float(v.value) : v.value) : v.type === 'list' ? v.values.map((x) => (v.float ? fx.float(x) : x)) : v.value);
  const same = (a, b) => JSON.stringify(norm(a)) === JSON.stringify(norm(b));
  const norm = (v) => (Array.isArray(v) ? v.map(norm) : typeof v === 'bigint' ? Number(v) : v instanceof fx.FxFloat ? Number(v.value) : v);

  /** Builds a section into `g` (placeholders bound first); `constant(expr)` gives a get_attr target. */
  const build = (g, sec, inputs, constant) => {
    const env = new Map(inputs.map((n) => [n, g.placeholder(n)]));
    const checks = [];
    const done = new Map(); // expression -> its node (an output is also the last statement)
    const value = (e) => {
      if (e.type === 'name') return env.get(e.name);
      if (done.has(e)) return done.get(e);
      let node;
      if (e.type === 'call') {
        const kwargs = Object.fromEntries(e.kwargs.map(([k, v]) => [k, attr(v)]));
        node = g.callFunction(targetOf(e.op), e.args.map(value), kwargs);
        if (e.kwargs.length) checks.push([node.name, e.kwargs.map(([k, v]) => [k, attr(v)])]);
      } else node = g.getAttr(constant(e));
      done.set(e, node);
      return node;
    };
    for (const s of sec.statements) {
      if (s.returns) continue;
      const v = value(s.expr);
      if (s.target) env.set(s.target, v);
    }
    const outs = sec.outputs.map(value);
    g.output(outs.length === 1 ? outs[0] : fx.tuple(outs));
    return checks;
  };

  const fn = (gm) => {
    replaced = 0;
    const pattern = new fx.Graph();
    const replacement = new fx.Graph();
    try {
      const checks = build(pattern, prog.pattern, prog.inputs, null);
      // The attributes the pattern names must be equal on the matched nodes.
      const filter = (m) => checks.every(([pnode, kv]) => {
        const hit = m.nodesMap.find(([p]) => p === pnode)?.[1];
        const node = typeof hit === 'string' ? gm.graph.findNode(hit) : null;
        return node && kv.every(([k, v]) => same(node.kwargs[k], v));
      });
      const found = fx.matchPattern(gm, pattern, { ignoreLiterals: true }).filter((m) =>
        filter({ nodesMap: [...m.nodesMap].map(([p, g]) => [p.name, g instanceof fx.Node ? g.name : g]) }),
      );
      if (!found.length) return false;
      const first = gm.graph.nodes[0];
      const made = new Map();
      build(replacement, prog.replacement, prog.inputs, (e) => {
        const key = JSON.stringify(e);
        if (made.has(key)) return made.get(key);
        const values = e.type === 'list' ? e.values : [e.value];
        const data = e.float ? Float32Array.from(values) : BigInt64Array.from(values.map((x) => BigInt(Math.trunc(x))));
        const ip = gm.graph.insertingBefore(first);
        const node = gm.constant({ data, shape: e.type === 'list' ? [values.length] : [], dtype: e.float ? 'float32' : 'int64' }, { name: 'pattern_const' });
        ip.restore();
        const target = String(node.target);
        gm.graph.eraseNode(node); // the buffer stays; the replacement reads it
        made.set(key, target);
        return target;
      });
      replaced = fx.replacePattern(gm, pattern, replacement, { ignoreLiterals: true, filters: [filter] }).length;
      return replaced > 0;
    } finally {
      pattern.delete();
      replacement.delete();
    }
  };
  return { pass: { name, fn }, matches: () => replaced };
}
