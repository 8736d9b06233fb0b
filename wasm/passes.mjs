// wasm/passes.mjs — passes by name (fx::PassManager) and the subgraph rewriter.
import { typeError } from './errors.mjs';
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
 * unknown name throws the registry's ValueError, which lists the registered names.
 * `options.checkEquivalence`: inputs to run before and after every modifying pass; the first
 * pass that changes the outputs beyond `rtol`/`atol` throws an FxError naming it and the first
 * diverging node. `options.maxIterations` repeats the pipeline until nothing changes.
 */
export function runPasses(gm, names, options = {}) {
  requireModule();
  if (!(gm instanceof GraphModule)) throw typeError('runPasses: expected a GraphModule');
  if (!Array.isArray(names) || names.some((n) => typeof n !== 'string'))
    throw typeError('runPasses: names must be an array of pass names');
  const check = options?.checkEquivalence != null ? encodeTensors(options.checkEquivalence, 'runPasses') : null;
  const r = ck(
    M.gmRunPasses(gm._id, Array.from(names), check, options?.rtol ?? 1e-4, options?.atol ?? 1e-5, options?.maxIterations ?? 1),
  );
  return Array.from(r, (x) => ({ ...x }));
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
    for (const m of ck(M.gmMatchPattern(gm._id, pattern._gid, ignoreLiterals))) {
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
 * torch.fx's SubgraphMatcher without replacing anything: every non-overlapping match of `pattern`
 * in `gm`'s graph, as `{ anchors, nodesMap, placeholderNodes, returningNodes }` where the graph
 * side holds Node handles (a literal a placeholder bound is given as its value) and the pattern
 * side the pattern's nodes. `options.ignoreLiterals`: literals in the pattern match any literal,
 * and kwargs the pattern does not name are not compared (so `onnx.Conv(x, w, b)` matches every
 * Conv of an ONNX graph whatever its attributes).
 */
export function matchPattern(gm, pattern, options = {}) {
  requireModule();
  if (!(gm instanceof GraphModule) || !(pattern instanceof Graph)) throw typeError('matchPattern: expected (GraphModule, Graph)');
  const ignoreLiterals = options?.ignoreLiterals ?? false;
  if (typeof ignoreLiterals !== 'boolean') throw typeError('matchPattern: options.ignoreLiterals must be a boolean');
  const graphNodes = new Map(gm.graph.nodes.map((n) => [n.name, n]));
  const patternNodes = new Map(pattern.nodes.map((n) => [n.name, n]));
  const value = ([v, isNode]) => (isNode ? graphNodes.get(v) : decode(v, null));
  return Array.from(ck(M.gmMatchPattern(gm._id, pattern._gid, ignoreLiterals)), (m) => ({
    anchors: Array.from(m.anchors, (a) => patternNodes.get(a)),
    nodesMap: new Map(Array.from(m.nodesMap, ([p, v, isNode]) => [patternNodes.get(p), value([v, isNode])])),
    placeholderNodes: Array.from(m.placeholderNodes, value),
    returningNodes: Array.from(m.returningNodes, (r) => graphNodes.get(r)),
  }));
}

