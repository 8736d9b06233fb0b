// wasm/passes.mjs — passes by name (fx::PassManager) and the subgraph rewriter.
import { FxError, typeError } from './errors.mjs';
import { M, ck, requireModule } from './runtime.mjs';
import { decode } from './codec.mjs';
import { Graph } from './graph.mjs';
import { GraphModule } from './graph_module.mjs';
import { encodeTensors } from './tensors.mjs';

/**
 * The pass names runPasses accepts, in the C++ pass registry's order (fx::registered_passes):
 * this array is filled by init() and frozen then; it is empty before.
 */
export const passNames = [];
let infos = [];

/** Called once by init(): the registry's passes into passNames and passInfo(). */
export function loadPassRegistry() {
  infos = Array.from(ck(M.passInfo()), (p) => Object.freeze({ name: p.name, description: p.description }));
  passNames.push(...infos.map((p) => p.name));
  Object.freeze(passNames);
}

/** Every registered pass as `{ name, description }` (a fresh array), in registry order. */
export function passInfo() {
  requireModule();
  return infos.map((p) => ({ ...p }));
}

/**
 * Runs passes on `gm` in order (fx::PassManager): lint after each, recompile when modified. An
 * unknown name throws the registry's ValueError, which lists the registered names. A pass may
 * also be a JS function `(gm) => boolean` (whether it modified the graph) or `{ name, fn }`,
 * run between the registered ones under the same rules.
 * `options.checkEquivalence`: inputs to run before and after every modifying pass; the first
 * pass that changes the outputs beyond `rtol`/`atol` throws an FxError naming it and the first
 * diverging node. `options.maxIterations` repeats the pipeline until nothing changes.
 */
export function runPasses(gm, names, options = {}) {
  requireModule();
  if (!(gm instanceof GraphModule)) throw typeError('runPasses: expected a GraphModule');
  const isJsPass = (p) => typeof p === 'function' || (p !== null && typeof p === 'object' && typeof p.fn === 'function' && typeof p.name === 'string');
  if (!Array.isArray(names) || names.some((n) => typeof n !== 'string' && !isJsPass(n)))
    throw typeError('runPasses: names must be an array of pass names, functions (gm) => modified, or { name, fn }');
  const check = options?.checkEquivalence != null ? encodeTensors(options.checkEquivalence, 'runPasses') : null;
  const rtol = options?.rtol ?? 1e-4;
  const atol = options?.atol ?? 1e-5;
  const maxIterations = options?.maxIterations ?? 1;
  if (names.every((n) => typeof n === 'string')) {
    const r = ck(M.gmRunPasses(gm._id, Array.from(names), check, rtol, atol, maxIterations));
    return Array.from(r, (x) => ({ ...x }));
  }
  // A pipeline with JS passes runs here, one pass at a time, with the C++ pipeline's rules: lint
  // after each pass, recompile and check equivalence when it modified the graph, repeat until
  // nothing changes (up to maxIterations).
  const reports = [];
  for (let it = 0; it < maxIterations; it++) {
    let any = false;
    for (const p of names) {
      let report;
      if (typeof p === 'string') {
        [report] = Array.from(ck(M.gmRunPasses(gm._id, [p], check, rtol, atol, 1)), (x) => ({ ...x }));
      } else {
        const name = typeof p === 'function' ? p.name || 'js-pass' : p.name;
        const fn = typeof p === 'function' ? p : p.fn;
        const nodesBefore = gm.graph.size;
        const before = check && gm.run(options.checkEquivalence);
        const modified = fn(gm);
        if (typeof modified !== 'boolean')
          throw typeError(`runPasses: pass '${name}' must return whether it modified the graph (a boolean), got ${String(modified)}`);
        try {
          gm.graph.lint();
        } catch (e) {
          throw new FxError('LintError', `pass '${name}' left an ill-formed graph: ${e.message}`, e.node);
        }
        if (modified) {
          gm.recompile();
          if (check) {
            const problem = compareOutputs(before, gm.run(options.checkEquivalence), rtol, atol);
            if (problem) throw new FxError('RuntimeError', `pass '${name}' changed what the graph computes: ${problem}`);
          }
        }
        report = { pass: name, iteration: it, modified, nodesBefore, nodesAfter: gm.graph.size };
      }
      report.iteration = it;
      any = any || report.modified;
      reports.push(report);
    }
    if (!any) break;
  }
  return reports;
}

/** Why two runs' outputs differ beyond |a - b| <= atol + rtol * |b|, or null. */
function compareOutputs(a, b, rtol, atol) {
  if (a.length !== b.length) return `${a.length} outputs before, ${b.length} after`;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (!x || !y || !x.data || !y.data) continue; // sequences and optionals: compared by the C++ passes only
    if (x.dtype !== y.dtype || x.shape.join(',') !== y.shape.join(','))
      return `output ${i} differs (${x.dtype}[${x.shape}] vs ${y.dtype}[${y.shape}])`;
    for (let k = 0; k < x.data.length; k++) {
      const u = Number(x.data[k]);
      const v = Number(y.data[k]);
      if (!(Math.abs(u - v) <= atol + rtol * Math.abs(v)) && !(Number.isNaN(u) && Number.isNaN(v)))
        return `output ${i} differs at element ${k}: ${u} vs ${v}`;
    }
  }
  return null;
}

/**
 * torch.fx.subgraph_rewriter.replace_pattern with Graphs as pattern and replacement. Returns one
 * `{ anchor, nodesMap }` per replaced match (`nodesMap`: [patternNodeName, graphNodeName or
 * literal value]). `options.filters` (replace_pattern_with_filters): functions
 * `(match, originalGraph, patternGraph) => boolean`; a match is replaced when every filter
 * returns true. `match` is `{ anchors, nodesMap, placeholderNodes, returningNodes }` (anchors:
 * pattern node names; the rest graph node names;
 * a literal a placeholder bound is given as its value). A filter that throws stops the call with
 * its error before anything is replaced.
 */
export function replacePattern(gm, pattern, replacement, options = {}) {
  requireModule();
  if (!(gm instanceof GraphModule) || !(pattern instanceof Graph) || !(replacement instanceof Graph))
    throw typeError('replacePattern: expected (GraphModule, Graph, Graph)');
  const ignoreLiterals = options?.ignoreLiterals ?? false;
  if (typeof ignoreLiterals !== 'boolean') throw typeError('replacePattern: options.ignoreLiterals must be a boolean');
  const filters = options?.filters ?? [];
  if (!Array.isArray(filters) || filters.some((f) => typeof f !== 'function'))
    throw typeError('replacePattern: options.filters must be an array of functions');
  // The filters run here, in JS, between two C++ calls (C++ never calls back into JS): match,
  // filter, then replace the accepted matches, named by the keys C++ gave them.
  let accepted = null;
  if (filters.length > 0) {
    const value = ([v, isNode]) => (isNode ? v : decode(v, null));
    accepted = [];
    for (const m of ck(M.gmMatchPattern(gm._id, pattern._gid, ignoreLiterals, false, false, true))) {
      const match = {
        anchors: Array.from(m.anchors),
        nodesMap: Array.from(m.nodesMap, ([p, v, isNode]) => [p, value([v, isNode])]),
        placeholderNodes: Array.from(m.placeholderNodes, value),
        returningNodes: Array.from(m.returningNodes),
      };
      if (filters.every((f) => f(match, gm.graph, pattern) === true)) accepted.push(m.key);
    }
  }
  const r = ck(M.gmReplacePattern(gm._id, pattern._gid, replacement._gid, accepted, ignoreLiterals));
  const byName = new Map(gm.graph.nodes.map((n) => [n.name, n]));
  return Array.from(r, (m) => ({
    anchor: m.anchor,
    nodesMap: Array.from(m.nodesMap, ([p, g, isNode]) => [p, isNode ? g : decode(g, null)]),
    replacements: Array.from(m.replacements, (name) => byName.get(name)),
  }));
}

/**
 * torch.fx's SubgraphMatcher without replacing anything: every match of `pattern` in `gm`'s
 * graph (non-overlapping unless `options.removeOverlappingMatches` is false; `matchOutput`: the
 * pattern's output must match the graph's output; `matchPlaceholder`: its placeholders must match
 * the graph's placeholders), as `{ anchors, nodesMap, placeholderNodes, returningNodes }` where the graph
 * side holds Node handles (a literal a placeholder bound is given as its value) and the pattern
 * side the pattern's nodes. `options.ignoreLiterals`: literals in the pattern match any literal,
 * and kwargs the pattern does not name are not compared (so `onnx.Conv(x, w, b)` matches every
 * Conv of an ONNX graph whatever its attributes).
 */
export function matchPattern(gm, pattern, options = {}) {
  requireModule();
  if (!(gm instanceof GraphModule) || !(pattern instanceof Graph)) throw typeError('matchPattern: expected (GraphModule, Graph)');
  const flag = (name, fallback) => {
    const v = options?.[name] ?? fallback;
    if (typeof v !== 'boolean') throw typeError(`matchPattern: options.${name} must be a boolean`);
    return v;
  };
  const ignoreLiterals = flag('ignoreLiterals', false);
  const matchOutput = flag('matchOutput', false);
  const matchPlaceholder = flag('matchPlaceholder', false);
  const removeOverlappingMatches = flag('removeOverlappingMatches', true);
  const graphNodes = new Map(gm.graph.nodes.map((n) => [n.name, n]));
  const patternNodes = new Map(pattern.nodes.map((n) => [n.name, n]));
  const value = ([v, isNode]) => (isNode ? graphNodes.get(v) : decode(v, null));
  return Array.from(ck(M.gmMatchPattern(gm._id, pattern._gid, ignoreLiterals, matchOutput, matchPlaceholder, removeOverlappingMatches)), (m) => ({
    anchors: Array.from(m.anchors, (a) => patternNodes.get(a)),
    nodesMap: new Map(Array.from(m.nodesMap, ([p, v, isNode]) => [patternNodes.get(p), value([v, isNode])])),
    placeholderNodes: Array.from(m.placeholderNodes, value),
    returningNodes: Array.from(m.returningNodes, (r) => graphNodes.get(r)),
  }));
}

