// Exercises the typed API of wasm/index.d.ts; compiled with `tsc -p tests/js/tsconfig.json`
// (never run). Lines marked @ts-expect-error must stay errors: they pin what the types forbid.
import init, {
  init as namedInit,
  FxError,
  FxTuple,
  FxFloat,
  Graph,
  GraphModule,
  Node,
  tuple,
  float,
  slice,
  ellipsis,
  dtype,
  device,
  memoryFormat,
  layout,
  complex,
  passNames,
  passInfo,
  onnxMetaKeys,
  AttributeRef,
  createWorker,
} from 'fxwasm';
import type { Fx, FxValue, FxKwargs, ModuleSpec, PythonCode, TensorInfo, ModuleInfo, Opcode, Tensor, CoverageGap, PassInfo, PassName, OnnxMetaKeys, RunValue, TensorDtype, Dim, ShapeInferenceReport, ThreadInfo, OpTime } from 'fxwasm';

export async function main(): Promise<string> {
  const fx: Fx = await init({ locateFile: (p, dir) => dir + p });
  const fx2: Fx = await namedInit({ wasmBinary: new Uint8Array(0) });
  const v: string = fx.version + fx2.version;

  const g: Graph = new fx.Graph();
  const x: Node = g.placeholder('x', { type: 'torch.Tensor', defaultValue: null });
  const p = g.getAttr('param');
  const add = g.callFunction('operator.add', [x, p]);
  const lin = g.callModule('linear', [add]);
  const kw: FxKwargs = { min: fx.float(0), max: float(1) };
  const clamp = g.callMethod('clamp', [lin], kw, { type: 'torch.Tensor' });
  g.output(tuple([clamp, { w: p }]));
  const made = g.createNode('call_function', 'torch.cat', [[clamp, clamp]], new Map([['dim', -1]]), { name: 'cat' });

  const values: FxValue[] = [
    null, true, 1, 1.5, 2n, 's', x, float(1), complex(1, 2), slice(null, 2), ellipsis,
    dtype('float16'), device('cuda', 0), device('cpu'), memoryFormat('channels_last'),
    layout('strided'), tuple([1, 2]), [1, [2, 3]], { a: 1 }, new Map<FxValue, FxValue>([[1, 'one']]),
  ];
  add.setArgs(values.slice(0, 2));
  add.args = [x, p];
  add.kwargs = { alpha: 2 };
  add.updateArg(1, 5);
  add.updateKwarg('alpha', 1);
  add.type = null;
  add.stackTrace = 'File "m.py", line 1';
  const st: string | null = add.stackTrace;
  add.setMeta('tag', { a: [1, 2] });
  const meta: FxValue | undefined = add.getMeta('tag');
  const removed: boolean = add.deleteMeta('tag');
  const op: Opcode = add.op;
  const first = add.args[0];
  if (first instanceof FxTuple) first.forEach((e) => e);
  if (first instanceof FxFloat) first.value.toFixed(1);

  const users: Node[] = add.users;
  const inputs: Node[] = add.allInputNodes;
  const next: Node | null = add.next;
  const changed: Node[] = add.replaceAllUsesWith(made, (u) => u !== made);
  add.replaceInputWith(x, p);
  add.prepend(made);
  add.append(made);
  const impure: boolean = add.isImpure();
  const line: string = add.formatNode({ numUsers: true }) + add.name + add.target + String(add.id) + add.erased;

  const ip = g.insertingAfter(add);
  g.callFunction('torch.sigmoid', [add]);
  ip.restore();
  g.insertingBefore().keep();
  ip[Symbol.dispose]();

  const copy: Node = g.nodeCopy(add, (n) => n);
  const g2 = new Graph();
  const valMap = new Map<Node, FxValue>();
  const out: FxValue = g2.graphCopy(g, valMap);
  const c: Graph = g.clone();
  const text: string = g.print() + g.print({ numUsers: true }) + g.tabular() + String(g);
  const code: PythonCode = g.pythonCode({ rootModule: 'self', verbose: false, torch113Bugs: true });
  const dce: boolean = g.eliminateDeadCode();
  const found: Node | null = g.findNode('add');
  const outNode: Node | null = g.outputNode;
  const n: number = g.size + g.nodes.length;
  g.lint();

  const root: ModuleSpec = {
    parameters: { param: { shape: [3, 4], data: new Float32Array(12), requiresGrad: true } },
    modules: { linear: { type: 'Linear', extraRepr: 'in_features=4', buffers: { b: { dtype: 'int64', shape: [] } } } },
  };
  const gm = new GraphModule(c, { root, className: 'MyModule' });
  const gmCode: string = gm.code + gm.printReadable() + gm.toString() + gm.className;
  const pc: PythonCode = gm.recompile();
  const ok: boolean = gm.addSubmodule('foo.bar', { type: 'ReLU' }) && gm.deleteSubmodule('foo.bar');
  gm.deleteAllUnusedSubmodules();
  const mods: Array<[string, ModuleInfo]> = gm.namedModules();
  const params: Array<[string, TensorInfo]> = gm.namedParameters();
  const bufs: Array<[string, TensorInfo]> = gm.namedBuffers();
  const bytes: Uint8Array | null = gm.getTensorData('param');
  const sameGraph: Graph = gm.graph;
  gm.setTorch113Bugs(false);
  gm[Symbol.dispose]();
  g2.delete();
  g[Symbol.dispose]();

  try {
    g.lint();
  } catch (e) {
    if (e instanceof FxError && e.kind === 'StaleHandleError') return e.node ?? e.message;
  }
  const heap: number = fx.heapUsed() + fx.heapSize() + fx.liveHandles();
  const info: ThreadInfo = fx.threads();
  const build: 'threads' | 'single' = info.build;
  const why: string | null = info.reason;
  const got: number = fx.setThreads(info.requested);
  const threaded: Promise<Fx> = init({ threads: 2, relaxedSimd: false });
  const simd: 'relaxed' | 'simd128' = info.simd;
  const timed: OpTime[] = gm.run([{ data: new Float32Array(4), shape: [4] }], { profile: true }).profile;
  const simdWhy: string | null = info.simdReason;

  // @ts-expect-error: args must be an array
  g.callFunction('torch.relu', x);
  // @ts-expect-error: not an opcode
  g.createNode('call', 'x');
  // @ts-expect-error: undefined is not an FxValue (use null)
  g.output(undefined);
  // @ts-expect-error: Node handles come from Graph methods
  new Node();
  // @ts-expect-error: the FxError kind is a closed set
  const badKind: FxError['kind'] = 'NopeError';

  return [v, op, text, code.src, line, gmCode, pc.src, st, meta, removed, users, inputs, next, changed, impure, copy, out, dce, found, outNode, n, ok, mods, params, bufs, bytes, sameGraph, heap, badKind, build, why, got, threaded, simd, simdWhy, timed.length].join();
}

// Execution, passes and rewriting (checked by tsc, not run).
export function execTypes(fx: Fx, gm: GraphModule): unknown[] {
  const outs: Tensor[] = gm.run([{ data: new Float32Array(4), shape: [2, 2] }]);
  const probed = gm.run([{ data: new Float32Array(4), shape: [2, 2], dtype: 'float32' }], { probe: ['relu'] });
  // onnxruntime's conventions: feeds by name, { data, dims, type }, dims/type on outputs.
  const byName: Record<string, RunValue> = gm.run({ [gm.inputNames[0]]: { data: new Float32Array(4), dims: [2, 2], type: 'float32' } });
  const outName: string = gm.outputNames[0];
  const dims: number[] = outs[0].dims;
  const later: Promise<Tensor[]> = gm.runAsync([{ data: new Float32Array(4), shape: [2, 2] }]);
  const words: Tensor[] = gm.run([{ data: ['a', 'b'], shape: [2], dtype: 'string' }]);
  fx.releaseCachedMemory();
  for (const n of gm.graph) void n.name;
  const frozenArgs: readonly FxValue[] = gm.graph.nodes[0].args;
  void [byName, outName, dims, later, words, frozenArgs];
  const gaps: CoverageGap[] = gm.coverage();
  const reports = fx.runPasses(gm, ['fold', 'dce'], { checkEquivalence: [{ data: new Float32Array(4), shape: [4] }] });
  const matches = fx.replacePattern(gm, new fx.Graph(), new fx.Graph());
  const filtered = fx.replacePattern(gm, new fx.Graph(), new fx.Graph(), {
    filters: [(m, original, pattern) => m.anchors.length > 0 && original.nodes.length > pattern.nodes.length && m.returningNodes[0] !== m.placeholderNodes[0]],
  });
  const imported: GraphModule = fx.loadONNX(new Uint8Array(0), { externalData: (loc, off, len) => new Uint8Array(len + off + loc.length) });
  const fromDir = fx.loadONNX(new ArrayBuffer(0), { externalData: '/models' });
  const bytes: Uint8Array = imported.toONNX({ embedExternalData: true, defaultOpset: 13 });
  const opsets = imported.meta.onnx_opset_import;
  const body: GraphModule = imported.submodule('if_then_branch');
  const t = fx.tensorFromONNX(fx.tensorToONNX({ data: new Float32Array(1), shape: [1] }, 'x'));
  // @ts-expect-error externalData is not a number
  fx.loadONNX(bytes, { externalData: 1 });
  const infos: PassInfo[] = fx.passInfo();
  const firstPass: PassName = infos[0].name;
  const keys: OnnxMetaKeys = onnxMetaKeys;
  const outputsKey: string = fx.onnxMetaKeys.outputs + keys.type;
  const outputNames = imported.graph.outputNode?.meta[onnxMetaKeys.outputs];
  // @ts-expect-error the meta keys are read-only
  fx.onnxMetaKeys.outputs = 'x';
  // @ts-expect-error no such meta key
  fx.onnxMetaKeys.nope;
  class Recorder extends fx.Interpreter {
    seen: string[] = [];
    runNode(n: Node) {
      this.seen.push(n.name);
      return super.runNode(n);
    }
  }
  const interpreted = new Recorder(imported).run({ data: new Float32Array(1), shape: [1] });
  class Swap extends fx.Transformer {
    callFunction(target: string, args: unknown[], kwargs: Record<string, unknown>) {
      return super.callFunction(target === 'onnx.Relu' ? 'onnx.Sigmoid' : target, args, kwargs);
    }
  }
  const swapped: GraphModule = new Swap(imported).transform();
  const convs: Node[] = swapped.graph.findNodes({ op: 'call_function', target: 'onnx.Conv' });
  // @ts-expect-error op must be an opcode
  swapped.graph.findNodes({ op: 'call' });
  const json = swapped.graph.toJSON();
  const users: string[] = json.nodes[0].users;
  const head: GraphModule = imported.extractSubgraph(['x'], [convs[0]]);
  const parts: GraphModule = imported.splitModule((n) => (n.op === 'call_function' ? 0 : 1), { qualnameMap: new Map() });
  const folded = imported.splitConstSubgraphs({ skipFoldingNode: (n) => n.name === 'w' });
  const constant: GraphModule | null = folded.constSubgraphModule;
  const names = fx.mapArg(convs[0].args, (n) => n.name);
  const ref: AttributeRef = new fx.Interpreter(imported).fetchAttr('w');
  const jsReports = fx.runPasses(imported, ['dce', (m) => m.graph.eliminateDeadCode(), { name: 'noop', fn: () => false }]);
  // @ts-expect-error a JS pass returns whether it modified the graph
  fx.runPasses(imported, [(m: GraphModule) => m.graph.size]);
  const overlapping = fx.matchPattern(imported, new fx.Graph(), { matchOutput: true, removeOverlappingMatches: false });
  const remoteOut = createWorker({ limits: { maxTensorBytes: 1 << 30 } }).then(async (worker) => {
    const remote = await worker.loadONNX(new Uint8Array(0));
    const out: Record<string, RunValue> = await remote.run({ x: { data: new Float32Array(1), dims: [1], type: 'float32' } });
    await worker.terminate();
    return out;
  });
  // @ts-expect-error locateFile (a function) cannot cross into a worker
  void createWorker({ locateFile: () => '' });
  // Tensor<D>: checking dtype narrows data; meta keys fxwasm writes are typed.
  const t0 = imported.run([{ data: new Float32Array(1), shape: [1] }])[0] as Tensor;
  if (t0.dtype === 'float32') {
    const f: Float32Array = t0.data;
    void f;
  }
  if (t0.dtype === 'int64') {
    const big: BigInt64Array = t0.data;
    // @ts-expect-error an int64 tensor's data is a BigInt64Array
    const wrong: Float32Array = t0.data;
    void [big, wrong];
  }
  const ints: Tensor<'int32'> = { data: new Int32Array(1), shape: [1], dtype: 'int32', dims: [1], type: 'int32' };
  // @ts-expect-error the data must match the dtype
  const mismatched: Tensor<'int32'> = { data: new Float32Array(1), shape: [1], dtype: 'int32', dims: [1], type: 'int32' };
  const tm = imported.graph.nodes[0].meta.tensor_meta;
  const rank: number | undefined = tm?.shape.length;
  const dtypeName: TensorDtype | undefined = tm?.dtype;
  const firstDim: Dim | undefined = tm?.shape[0];
  const report: ShapeInferenceReport = imported.inferShapes({ inputShapes: { x: [1, 'seq'] } });
  const gapReason: string | undefined = report.gaps[0]?.reason;
  // @ts-expect-error a dim is a size, a name or null
  imported.inferShapes({ inputShapes: { x: [true] } });
  const onnxName: string | undefined = imported.graph.nodes[0].meta.onnx_name;
  void [interpreted, users, head, parts, constant, names, ref.tensor().shape, jsReports[0].pass, overlapping.length, remoteOut, ints, mismatched, rank, dtypeName, firstDim, gapReason, onnxName];
  return [outs.length, probed.probes.relu.shape, gaps.length, reports[0].modified, matches.length, filtered.length, fromDir, opsets, body, t.name, firstPass, outputsKey, outputNames, passInfo().length, passNames.length];
}
