// Type declarations of fxwasm's JS API (wasm/index.mjs). Hand-written: Debian's emscripten
// 3.1.6 has no --emit-tsd. Checked by tests/js/types_check.ts (tsc --noEmit).

/**
 * fxwasm — torch.fx's graph IR (Graph, Node, GraphModule) compiled to WebAssembly.
 *
 * ```ts
 * import { init } from 'fxwasm';
 * const fx = await init();
 * const g = new fx.Graph();
 * const x = g.placeholder('x');
 * g.output(g.callFunction('torch.relu', [x]));
 * console.log(g.print());
 * g.delete();
 * ```
 *
 * Names mirror torch.fx / the C++ API one to one in camelCase (`erase_node` → `eraseNode`,
 * `print(graph)` → `graph.print()`, `graph.print_tabular()` → `graph.tabular()`).
 *
 * @packageDocumentation
 */

declare global {
  /**
   * `Symbol.dispose` (explicit resource management), declared here the way @types/node does so
   * that the `[Symbol.dispose]()` members below type-check without `lib: ["esnext.disposable"]`.
   */
  interface SymbolConstructor {
    /** The method `using` calls when a block ends. */
    readonly dispose: unique symbol;
  }
}

/**
 * A value that can appear in `Node.args`, `Node.kwargs`, a placeholder default or the output.
 *
 * JS → Python mapping:
 * - `null` → `None`; `boolean` → `bool`; `string` → `str`; `bigint` → `int`.
 * - `number`: an integer (`Number.isInteger`) → `int`, anything else (incl. `NaN`, `Infinity`)
 *   → `float`. JS cannot tell `1` from `1.0`: write {@link float | fx.float(1)} for the float.
 * - plain `Array` → `list`; {@link tuple | fx.tuple([...])} → `tuple`. (The top-level `args`
 *   of a node is the positional-argument tuple and is passed/returned as a plain array.)
 * - plain object (string keys) or `Map` → `dict`.
 * - {@link Node} handle → the node; {@link slice | fx.slice()}, {@link ellipsis | fx.ellipsis},
 *   {@link dtype | fx.dtype()}, {@link device | fx.device()}, {@link memoryFormat | fx.memoryFormat()},
 *   {@link layout | fx.layout()}, {@link complex | fx.complex()} → the torch/Python object.
 *
 * Reading values back gives the same representation: tuples are {@link FxTuple} instances
 * (Array subclass), lists plain arrays, integral floats {@link FxFloat} (other floats plain
 * numbers), ints numbers (or `bigint` beyond 2^53), dicts plain objects — or a `Map` when a key
 * is not a string or looks like an array index (JS objects would reorder it).
 */
export type FxValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Node
  | FxFloat
  | FxComplex
  | FxSlice
  | FxEllipsis
  | FxDtype
  | FxDevice
  | FxMemoryFormat
  | FxLayout
  | FxTuple
  | FxValue[]
  | Map<FxValue, FxValue>
  | { [key: string]: FxValue };

/**
 * One dimension as meta records it: a size; a named size or an expression over named sizes
 * (`'batch'`, `'4*batch'`, `'seq + 1'`), from the inputs' dynamic dims; or null when unknown.
 */
export type Dim = number | string | null;

/**
 * `meta.tensor_meta`, written by {@link GraphModule.shapeProp} / {@link GraphModule.inferShapes}
 * (torch.fx's TensorMetadata, as fxwasm records it). Meta dtypes use the {@link TensorDtype}
 * spelling tensors use, so `n.meta.tensor_meta.dtype === out.dtype`.
 */
export type TensorMeta = {
  /** The value's shape (a Python tuple at run time: an {@link FxTuple}). */
  shape: readonly Dim[];
  /** Its element type. */
  dtype: TensorDtype;
  [key: string]: FxValue | readonly Dim[];
};

/** An ONNX value type as the importer records it (`meta.onnx_type`, output `onnx_output_types`). */
export type OnnxValueType = {
  /** The element type; the raw TensorProto code when fxwasm has no such dtype. */
  dtype: TensorDtype | number;
  /** Dimensions: a number, a symbolic name, or null when unknown. */
  shape?: readonly Dim[];
  [key: string]: FxValue | readonly Dim[] | undefined;
};

/** What {@link GraphModule.inferShapes} could not type, and why. */
export type ShapeInferenceGap = {
  /** The node's name. */
  node: string;
  /** Its target (`onnx.Loop`, or the placeholder's name). */
  target: string;
  /** Why: an op without a shape rule, a rank known only at run time, an untyped input... */
  reason: string;
};

/** The result of {@link GraphModule.inferShapes}. */
export type ShapeInferenceReport = {
  /** Nodes other than the output. */
  total: number;
  /** Of them, those with `meta.tensor_meta` now (a multi-output node: on its getitem users). */
  typed: number;
  /** The others, in graph order. */
  gaps: ShapeInferenceGap[];
};

/** Options of {@link GraphModule.inferShapes}. */
export type InferShapesOptions = {
  /**
   * Shapes of inputs by name (the placeholder's, or the ONNX input's): sizes, names for dynamic
   * sizes, or null for unknown. Unlisted inputs keep their declared ONNX type's shape; a name
   * that is no input is a `ValueError`.
   */
  inputShapes?: Record<string, readonly Dim[]>;
};

/**
 * `node.meta`: any keys, with the ones fxwasm writes typed. ONNX keys are also listed in
 * {@link onnxMetaKeys} (`meta[fx.onnxMetaKeys.name]`).
 */
export type NodeMeta = {
  /** Set by shapeProp on every node it reached. */
  tensor_meta?: TensorMeta;
  /** The ONNX node's or value's original name. */
  onnx_name?: string;
  /** Placeholders and typed values: their ONNX type. */
  onnx_type?: OnnxValueType;
  /** Every ONNX output name of a multi-output node, in order. */
  onnx_outputs?: FxValue[];
  stack_trace?: string;
  [key: string]: FxValue | undefined;
};

/** Keyword arguments: a plain object (or Map) from argument name to value. */
export type FxKwargs = { [key: string]: FxValue } | Map<string, FxValue>;

/** The six torch.fx opcodes. */
export type Opcode = 'placeholder' | 'get_attr' | 'call_function' | 'call_module' | 'call_method' | 'output';

/** The `kind` of an {@link FxError}: the C++ `fx::error_kind_name` strings. */
export type FxErrorKind =
  | 'ValueError'
  | 'TypeError'
  | 'IndexError'
  | 'KeyError'
  | 'GraphError'
  | 'LintError'
  | 'AttributeError'
  | 'StaleHandleError'
  | 'TraceError'
  | 'ParseError'
  | 'UnsupportedError'
  | 'RuntimeError'
  | 'ResourceError'
  | 'SchemaError'
  | 'InternalError';

/**
 * Thrown by every fxwasm call that fails. The wasm module keeps working afterwards.
 */
export class FxError extends Error {
  /** Creates an error; fxwasm itself throws these, users rarely need to. */
  constructor(kind: FxErrorKind, message: string, node?: string);
  /** Always `"FxError"`. */
  readonly name: 'FxError';
  /** What went wrong, coarse enough to branch on (e.g. `"GraphError"`, `"StaleHandleError"`). */
  readonly kind: FxErrorKind;
  /** Name of the node involved, if any. */
  readonly node: string | undefined;
}

/** A Python `tuple`: an `Array` subclass, so it indexes and iterates like an array. */
export class FxTuple extends Array<FxValue> {}

/** A Python `float` whose value is integral (`1.0`); see {@link float}. */
export class FxFloat {
  /** Wraps `value` as a Python float. */
  constructor(value: number);
  /** The number. */
  readonly value: number;
  /** The number, so `+f` and arithmetic work. */
  valueOf(): number;
  /** Python-like text: `"1.0"`. */
  toString(): string;
}

/** A Python `complex`. */
export class FxComplex {
  /** `complex(re, im)`. */
  constructor(re: number, im: number);
  /** Real part. */
  readonly re: number;
  /** Imaginary part. */
  readonly im: number;
}

/** A Python `slice(start, stop, step)`; each part is any value (usually null, int or Node). */
export class FxSlice {
  /** `slice(start, stop, step)`; omitted parts are `None`. */
  constructor(start?: FxValue, stop?: FxValue, step?: FxValue);
  /** Start (null for None). */
  readonly start: FxValue;
  /** Stop (null for None). */
  readonly stop: FxValue;
  /** Step (null for None). */
  readonly step: FxValue;
}

/** The class of Python's `Ellipsis`; use the singleton {@link ellipsis}. */
export class FxEllipsis {
  /** `"Ellipsis"`. */
  toString(): string;
}

/** A torch dtype such as `torch.float32`. */
export class FxDtype {
  /** From a name: `"float32"`, `"torch.int64"`, or an alias (`"float"`, `"long"`). */
  constructor(name: string);
  /** The name without the `torch.` prefix, e.g. `"float32"`. */
  readonly name: string;
  /** `"torch.float32"`. */
  toString(): string;
}

/** A `torch.device`. */
export class FxDevice {
  /** `device("cuda", 0)` or `device("cuda:0")`; `index` null/omitted for no index. */
  constructor(type: string, index?: number | null);
  /** Device type, e.g. `"cpu"`, `"cuda"`. */
  readonly type: string;
  /** Device index, or null. */
  readonly index: number | null;
  /** `"cpu"` or `"cuda:0"`, as Python's `str(device)`. */
  toString(): string;
}

/** A `torch.memory_format`. */
export class FxMemoryFormat {
  /** From a name: `"contiguous_format"`, `"channels_last"`, `"channels_last_3d"`, `"preserve_format"`. */
  constructor(name: string);
  /** The name without the `torch.` prefix. */
  readonly name: string;
  /** `"torch.channels_last"`. */
  toString(): string;
}

/** A `torch.layout`. */
export class FxLayout {
  /** From a name: `"strided"`, `"sparse_coo"`, `"sparse_csr"`. */
  constructor(name: string);
  /** The name without the `torch.` prefix. */
  readonly name: string;
  /** `"torch.strided"`. */
  toString(): string;
}

/** Makes a Python tuple from `items` (plain arrays are lists). */
export function tuple(items?: Iterable<FxValue>): FxTuple;
/** A Python float, needed for integral values: `fx.float(1)` is `1.0`, plain `1` is the int. */
export function float(value: number): FxFloat;
/** A Python complex number `complex(re, im)`. */
export function complex(re: number, im: number): FxComplex;
/** A Python `slice(start, stop, step)`. */
export function slice(start?: FxValue, stop?: FxValue, step?: FxValue): FxSlice;
/** Python's `Ellipsis` (`...`). */
export const ellipsis: FxEllipsis;
/** A torch dtype: `fx.dtype("float16")`. */
export function dtype(name: string): FxDtype;
/** A torch device: `fx.device("cuda", 0)`, `fx.device("cpu")`. */
export function device(type: string, index?: number | null): FxDevice;
/** A torch memory format: `fx.memoryFormat("channels_last")`. */
export function memoryFormat(name: string): FxMemoryFormat;
/** A torch layout: `fx.layout("strided")`. */
export function layout(name: string): FxLayout;

/** Options of {@link Graph.placeholder}. */
export interface PlaceholderOptions {
  /** Type annotation in Python repr form (`"torch.Tensor"`, `"int"`). */
  type?: string | null;
  /** Default value (printed `(default=...)`); omit for none, `null` for a `None` default. */
  defaultValue?: FxValue;
}

/** Options of node-creating methods. */
export interface NodeOptions {
  /** Type annotation in Python repr form (`"torch.Tensor"`). */
  type?: string | null;
}

/** Options of {@link Graph.createNode}. */
export interface CreateNodeOptions extends NodeOptions {
  /** Name hint; uniquified like torch.fx (`add` → `add_1`). */
  name?: string | null;
}

/** Options of {@link Graph.print} and {@link Node.formatNode}. */
export interface PrintOptions {
  /** Use torch 2.x's `[num_users=1]` instead of torch 1.13's `[#users=1]`. */
  numUsers?: boolean;
}

/** Options of {@link Graph.pythonCode}. */
export interface PythonCodeOptions {
  /** Name of the root module in the generated code (default `"self"`). */
  rootModule?: string;
  /** Emit `# File: ...` stack-trace comments (print_readable's verbose mode). */
  verbose?: boolean;
  /** Reproduce torch 1.13's two codegen bugs (`-2 ** x`, `self.lambda`) instead of fixing them. */
  torch113Bugs?: boolean;
}

/** Result of `python_code()`: the source of `forward` and the globals it uses. */
export interface PythonCode {
  /** The generated source (starts with `"\n\n\ndef forward"`, ends with `"\n    "`). */
  src: string;
  /** Global name → the qualified Python name it refers to (`"inf"` → `"math.inf"`). */
  globals: Record<string, string>;
}

/**
 * torch.fx.Graph: an ordered list of nodes. Owns its C++ memory: call {@link Graph.delete}
 * (or use `using g = new fx.Graph()`); a FinalizationRegistry frees forgotten graphs eventually.
 * Once a {@link GraphModule} takes it over, the module owns it.
 */
export class Graph implements Iterable<Node> {
  /** An empty graph. Requires `await init()` first. */
  constructor();
  /** `for (const n of graph)`: the nodes in order (a snapshot: erasing while iterating is safe). */
  [Symbol.iterator](): Iterator<Node>;
  /** The nodes in order (handles). */
  readonly nodes: Node[];
  /** Number of nodes (`len(graph.nodes)`). */
  readonly size: number;
  /** The output node, or null. */
  readonly outputNode: Node | null;
  /** The GraphModule that owns this graph, or null. */
  readonly owningModule: GraphModule | null;

  /** Frees the graph; its node handles and insert points become stale. No-op if owned by a GraphModule or already deleted. */
  delete(): void;
  /** Same as {@link Graph.delete}, for `using`. */
  [Symbol.dispose](): void;

  /** A function input (`placeholder`). */
  placeholder(name: string, options?: PlaceholderOptions): Node;
  /** Fetches an attribute of the root module (`get_attr`), e.g. `"linear.weight"`. */
  getAttr(qualifiedName: string, options?: NodeOptions): Node;
  /**
   * Calls a function (`call_function`) named by its qualified Python name: `"operator.add"`,
   * `"torch.relu"`, `"torch.nn.functional.gelu"`, `"builtins.getattr"`. Throws `ValueError`
   * for a name without a module part.
   */
  callFunction(target: string, args?: FxValue[], kwargs?: FxKwargs | null, options?: NodeOptions): Node;
  /** Calls a method on `args[0]` (`call_method`), e.g. `"clamp"`. */
  callMethod(methodName: string, args?: FxValue[], kwargs?: FxKwargs | null, options?: NodeOptions): Node;
  /** Calls a submodule (`call_module`) by qualified name, e.g. `"layer1.0.conv1"`. */
  callModule(moduleName: string, args?: FxValue[], kwargs?: FxKwargs | null, options?: NodeOptions): Node;
  /** The graph's `return`; wrap several results in {@link tuple}. */
  output(result: FxValue, options?: NodeOptions): Node;
  /** Creates a node of any opcode at the insert point (`create_node`). */
  createNode(op: Opcode, target: string, args?: FxValue[], kwargs?: FxKwargs | null, options?: CreateNodeOptions): Node;
  /** Erases a node without users; throws `GraphError` naming its users otherwise. Its handle becomes stale. */
  eraseNode(node: Node): void;
  /** New nodes go right before `node` (omitted/null: at the beginning) until the returned point is restored. */
  insertingBefore(node?: Node | null): InsertPoint;
  /** New nodes go right after `node` (omitted/null: at the end) until the returned point is restored. */
  insertingAfter(node?: Node | null): InsertPoint;
  /**
   * Copies `node` (from this or another graph) to the insert point. `argTransform` maps each
   * input node to a value of this graph; it is required when `node` comes from another graph
   * and has inputs. It is called once per input node, before the copy is made.
   */
  nodeCopy(node: Node, argTransform?: ((input: Node) => FxValue) | null): Node;
  /**
   * Copies all nodes of `other` except its output into this graph and returns the value the
   * output returned (mapped), or null. Pre-seed `valMap` (other's node → value here) to bind
   * placeholders; it is filled with every copied node.
   */
  graphCopy(other: Graph, valMap?: Map<Node, FxValue> | null): FxValue;
  /** A deep copy with the same names (a new, independently owned graph). */
  clone(): Graph;
  /** `print(graph)`: byte-identical to torch.fx 1.13. */
  print(options?: PrintOptions): string;
  /** Same as {@link Graph.print}. */
  toString(): string;
  /** `graph.print_tabular()`. */
  tabular(): string;
  /** Generated Python (`graph.python_code(root_module)`). */
  pythonCode(options?: PythonCodeOptions): PythonCode;
  /** Checks the graph; throws `LintError` with torch.fx's message. */
  lint(): void;
  /** Erases unused pure nodes, last to first; returns whether anything was erased. Lints first. */
  eliminateDeadCode(): boolean;
  /** The live node with this name, or null. */
  findNode(name: string): Node | null;
  /**
   * torch.fx.Graph.find_nodes (torch 2.x): the nodes with opcode `op` and, when given, target
   * `target`, in graph order.
   */
  findNodes(query: { op: Opcode; target?: string; sort?: boolean }): Node[];
  /**
   * The graph as plain JSON data for visualisers (`JSON.stringify(graph)` uses it): a Node inside
   * args, kwargs or meta is `{ node: name }`, a tuple an array, a slice `{ slice: [start, stop,
   * step] }`, a bigint its decimal string, a dtype its Python spelling.
   */
  toJSON(): GraphJSON;
}

/**
 * An insertion point made by {@link Graph.insertingBefore} / {@link Graph.insertingAfter}.
 * Call {@link InsertPoint.restore} (or use `using ip = g.insertingAfter(n)`); an InsertPoint
 * that is never restored stays in force — like leaving torch.fx's `with` block open forever.
 */
export class InsertPoint {
  /** Not constructible: InsertPoints come from {@link Graph.insertingBefore} / {@link Graph.insertingAfter}. */
  private constructor();
  /** The graph this insert point belongs to. */
  readonly graph: Graph;
  /** Restores the insert point that was current before this one. Idempotent. */
  restore(): void;
  /** Makes this insert point permanent (nothing is restored). Idempotent. */
  keep(): void;
  /** Same as {@link InsertPoint.restore}, for `using`. */
  [Symbol.dispose](): void;
}

/**
 * A lightweight handle `(graph, id)` to a node. Handles are cached per graph, so the same node
 * always gives the same object (`===` works). Every use is checked: a handle to an erased node
 * or a deleted graph throws `FxError` with kind `"StaleHandleError"`.
 */
export class Node {
  /** Not constructible: node handles come from Graph methods and Node properties. */
  private constructor();
  /** The graph the node belongs to. */
  readonly graph: Graph;
  /** The node's id (`fx::Node::id()`): unique in its graph, increasing in creation order. */
  readonly id: number;
  /** Unique name in the graph (`add`, `add_1`). */
  readonly name: string;
  /** Opcode. */
  readonly op: Opcode;
  /** Target: qualified function name for call_function (`"operator.add"`), else the string target. */
  readonly target: string;
  /** Type annotation in Python repr form, or null. */
  get type(): string | null;
  /** Sets the type annotation (null removes it). */
  set type(value: string | null | undefined);
  /**
   * Positional arguments, frozen like torch.fx's immutable tuple (`n.args[0] = x` throws): assign
   * a new array, or use {@link Node.setArgs}, {@link Node.updateArg} or {@link Node.replaceInputWith}.
   */
  get args(): readonly FxValue[];
  /** Replaces all positional arguments, like {@link Node.setArgs}. */
  set args(value: readonly FxValue[]);
  /** Keyword arguments, frozen (assign a new object, or use {@link Node.setKwargs} / {@link Node.updateKwarg}). */
  get kwargs(): { readonly [key: string]: FxValue };
  /** The node's name: `JSON.stringify` of a node, or of args holding nodes, gives names. */
  toJSON(): string;
  /** Replaces all keyword arguments, like {@link Node.setKwargs}. */
  set kwargs(value: FxKwargs);
  /** The nodes that use this node, in the order they started using it. */
  readonly users: Node[];
  /** Distinct input nodes, args before kwargs, in first-occurrence order. */
  readonly allInputNodes: Node[];
  /** The next node, or null after the last one. */
  readonly next: Node | null;
  /** The previous node, or null before the first one. */
  readonly prev: Node | null;
  /** True once erased (reading this never throws StaleHandleError for an erased node). */
  readonly erased: boolean;
  /** `meta["stack_trace"]` if it is a string, else null. */
  get stackTrace(): string | null;
  /** Sets `meta["stack_trace"]` (null sets it to None). */
  set stackTrace(value: string | null | undefined);
  /** A snapshot of all of `node.meta`, with the keys fxwasm writes typed ({@link NodeMeta}). */
  readonly meta: NodeMeta;

  /** Moves `x` (of the same graph) to just before this node. */
  prepend(x: Node): void;
  /** Moves `x` (of the same graph) to just after this node. */
  append(x: Node): void;
  /**
   * Makes every user use `replaceWith` instead, except users for which `deleteUserCb` returns
   * false (it is called once per user, before any change). Returns the users that changed.
   */
  replaceAllUsesWith(replaceWith: Node, deleteUserCb?: ((user: Node) => boolean) | null): Node[];
  /** Replaces every occurrence of `oldInput` among this node's inputs with `newInput`. */
  replaceInputWith(oldInput: Node, newInput: Node): void;
  /** Replaces positional argument `idx`; throws `IndexError` if out of range. */
  updateArg(idx: number, arg: FxValue): void;
  /** Sets keyword argument `key` (appended if new). */
  updateKwarg(key: string, arg: FxValue): void;
  /** Replaces all positional arguments. */
  setArgs(args: readonly FxValue[]): void;
  /** Replaces all keyword arguments. */
  setKwargs(kwargs: FxKwargs): void;
  /** `node.meta[key]`, or undefined if absent. */
  getMeta(key: string): FxValue | undefined;
  /** Sets `node.meta[key]`; the value must not contain Node handles. */
  setMeta(key: string, value: FxValue): void;
  /** Removes `node.meta[key]`; returns whether it was present. */
  deleteMeta(key: string): boolean;
  /** Whether dead-code elimination must keep the node (placeholder, output, impure call). */
  isImpure(): boolean;
  /** The line `print(graph)` shows for this node. */
  formatNode(options?: PrintOptions): string;
  /** The node's name (like Python's `repr(node)`). */
  toString(): string;
}

/** A tensor of the attribute tree: metadata plus optional raw little-endian bytes. */
export interface TensorSpec {
  /** dtype name (default `"float32"`). */
  dtype?: string;
  /** Shape, e.g. `[5, 4]`. */
  shape: number[];
  /** Raw bytes (exactly numel × element size), or omitted for a metadata-only tensor. */
  data?: ArrayBuffer | ArrayBufferView;
  /** `requires_grad` (default false). */
  requiresGrad?: boolean;
}

/** One module of the attribute tree (like an `nn.Module`). */
export interface ModuleSpec {
  /** Python class name shown when printing (default `"Module"`), e.g. `"Linear"`. */
  type?: string;
  /** `extra_repr()` text, e.g. `"in_features=4, out_features=5, bias=True"`. */
  extraRepr?: string;
  /** Side-effectful: call_module nodes on it survive dead-code elimination. */
  impure?: boolean;
  /** Child modules by name. */
  modules?: { [name: string]: ModuleSpec };
  /** Parameters by name. */
  parameters?: { [name: string]: TensorSpec };
  /** Buffers by name. */
  buffers?: { [name: string]: TensorSpec };
}

/** Options of the {@link GraphModule} constructor. */
export interface GraphModuleOptions {
  /**
   * The root module the graph's get_attr / call_module targets refer to: a spec, or another
   * GraphModule (its tensors are shared and its module meta, such as opsets, is copied).
   */
  root?: ModuleSpec | GraphModule | null;
  /** Class name used when printing (default `"GraphModule"`). */
  className?: string;
}

/** What {@link GraphModule.namedModules} reports per module. */
export interface ModuleInfo {
  /** Python class name. */
  type: string;
  /** `extra_repr()` text. */
  extraRepr: string;
  /** Whether the module is marked impure. */
  impure: boolean;
}

/** What {@link GraphModule.namedParameters} / {@link GraphModule.namedBuffers} report per tensor. */
export interface TensorInfo {
  /** dtype name, e.g. `"float32"`. */
  dtype: string;
  /** Shape. */
  shape: number[];
  /** `requires_grad`. */
  requiresGrad: boolean;
  /** Whether bytes are attached (see {@link GraphModule.getTensorData}). */
  hasData: boolean;
}

/**
 * torch.fx.GraphModule: owns a graph (taken over from the constructor's argument, which stays
 * usable as {@link GraphModule.graph}) plus the attributes its nodes reference, and the
 * generated code. Call {@link GraphModule.delete} to free both.
 */
export class GraphModule {
  /**
   * Takes over `graph` and copies from `options.root` the attributes that get_attr and
   * call_module nodes reference. Throws `AttributeError` naming the node whose target the root
   * lacks (the graph then stays with the caller), `GraphError` if the graph already belongs to
   * a GraphModule.
   */
  constructor(graph: Graph, options?: GraphModuleOptions);
  /** The owned graph (the same object that was passed in). Call {@link GraphModule.recompile} after changing it. */
  readonly graph: Graph;
  /** Class name used when printing. */
  readonly className: string;
  /** Generated source of `forward`, as of the last recompile. */
  readonly code: string;
  /** Regenerates {@link GraphModule.code} from the graph. */
  recompile(): PythonCode;
  /** The code and globals of the last recompile. */
  pythonCode(): PythonCode;
  /** `print_readable()`. */
  printReadable(): string;
  /** `str(gm)`: module repr, code and the print_readable() reminder. */
  toString(): string;
  /** Reproduce torch 1.13's two codegen bugs on the next recompile (default off: fixed). */
  setTorch113Bugs(on: boolean): void;
  /** Installs a module at `target`, creating empty parents; false if a path element is not a module. */
  addSubmodule(target: string, module: ModuleSpec): boolean;
  /** Deletes the submodule at `target`; false if there is none. */
  deleteSubmodule(target: string): boolean;
  /** Deletes every submodule no node references. */
  deleteAllUnusedSubmodules(): void;
  /** `named_modules()`: `["", root]` first, then depth-first. */
  namedModules(): Array<[string, ModuleInfo]>;
  /** `named_parameters()` with qualified names. */
  namedParameters(): Array<[string, TensorInfo]>;
  /** `named_buffers()` with qualified names. */
  namedBuffers(): Array<[string, TensorInfo]>;
  /** A copy of the bytes of parameter/buffer `target`, or null if it has none; `AttributeError` if it does not exist. */
  getTensorData(target: string): Uint8Array | null;
  /**
   * A constant tensor: registered as a buffer under a fresh name (`options.name` + a number,
   * default `_tensor_constant0`...) and read by a new get_attr node at the insert point, which is
   * returned (toONNX writes it as an initializer).
   */
  constant(tensor: TensorInput, options?: { name?: string }): Node;
  /**
   * Runs the graph on fxwasm's kernels (`onnx.*` nodes; C++ `fx::exec::run`), one input per
   * placeholder. Throws an FxError naming the node, op and input shapes if a node fails.
   */
  run(inputs: TensorInput[]): Tensor[];
  /**
   * {@link GraphModule.run} of a model with sequence or optional inputs or outputs (ONNX's
   * Sequence*, Optional*, Loop...): a sequence is an array of tensors, an empty optional is
   * `null`, a present optional is its value (an input whose ONNX type is optional is wrapped).
   */
  run(inputs: RunInput[]): RunValue[];
  /**
   * {@link GraphModule.run} that also times every op it executes ({@link OpTime}, in the order
   * they ran), and returns the values of the `probe` nodes, if any, by name.
   */
  run(inputs: RunInput[], options: { probe?: string[]; profile: true }): { outputs: RunValue[]; probes: Record<string, RunValue>; profile: OpTime[] };
  /** {@link GraphModule.run} that also returns the values of the `probe` nodes, by name. */
  run(inputs: TensorInput[], options: { probe: string[] }): { outputs: Tensor[]; probes: Record<string, Tensor> };
  run(inputs: RunInput[], options: { probe: string[] }): { outputs: RunValue[]; probes: Record<string, RunValue> };
  /**
   * onnxruntime's form: `feeds` keyed by {@link GraphModule.inputNames} (tensors may be
   * `ort.Tensor`s or `{ data, dims, type }`); the outputs come back keyed by
   * {@link GraphModule.outputNames}. Unknown or missing names: FxError (ValueError) naming them.
   */
  run(feeds: Record<string, RunInput>): Record<string, RunValue>;
  /** {@link GraphModule.run} as a Promise: yields to the event loop once, then runs (on this thread). */
  runAsync(inputs: TensorInput[]): Promise<Tensor[]>;
  runAsync(inputs: RunInput[]): Promise<RunValue[]>;
  runAsync(feeds: Record<string, RunInput>): Promise<Record<string, RunValue>>;
  /** The names run(feeds) takes: the placeholders' targets (an imported model's ONNX input names). */
  readonly inputNames: string[];
  /** The names run(feeds) returns: an imported model's ONNX output names, else the returned nodes' names. */
  readonly outputNames: string[];
  /**
   * The kind of each graph input and output from its ONNX type (what {@link valueFromONNX}
   * needs to read its test data).
   */
  valueKinds(): { inputs: ValueKind[]; outputs: ValueKind[] };
  /** Every node that cannot run (C++ `fx::exec::coverage`), then the nodes that break their ONNX schema ({@link GraphModule.checkSchemas}). */
  coverage(): CoverageGap[];
  /**
   * Every onnx.* node checked against ONNX's own op schema (from onnx.defs) at the module's
   * opset, or `opset` for the default domain: inputs are tensors or omitted and as many as the
   * schema takes, declared outputs, attribute names, types and required ones. `[]` when
   * onnx.checker's schema checks would accept the graph; toONNX refuses otherwise.
   */
  checkSchemas(options?: { opset?: number }): SchemaProblem[];
  /** graph.lint(), then the schema checks: throws a LintError or a SchemaError naming the node. */
  lint(): void;
  /**
   * torch.fx's ShapeProp: runs once on `inputs` and records `meta.tensor_meta` = {shape, dtype}
   * on every node. Without inputs, it is {@link GraphModule.inferShapes} (no data, no run).
   */
  shapeProp(inputs: TensorInput[]): void;
  shapeProp(): ShapeInferenceReport;
  /**
   * Shape propagation without data (C++ `fx::exec::infer_shapes`): records `meta.tensor_meta`
   * on every node whose dtype and shape follow from the inputs' declared ONNX types (or
   * `options.inputShapes`) and the ONNX ops' shape rules. Dynamic dims stay symbolic
   * (`'batch'`, `'4*batch'`, `'batch*seq'`); a dim that depends on data is null. Constants and
   * small shape tensors computed from them are evaluated, so Shape → Gather → Concat → Reshape
   * chains stay exact; nothing large is computed. Untyped nodes lose any earlier tensor_meta and
   * are listed in the report's `gaps`.
   *
   * @example
   * const r = gm.inferShapes({ inputShapes: { input_ids: [1, 'seq'] } });
   * gm.graph.nodes.at(-2)?.meta.tensor_meta?.shape; // [1, 'seq', 768]
   */
  inferShapes(options?: InferShapesOptions): ShapeInferenceReport;
  /**
   * Serializes the module as an ONNX ModelProto (C++ `fx::onnx::export_model`). Names, opsets,
   * doc strings and metadata of an imported model are kept; a node with no ONNX form (call_module,
   * torch.* targets) throws an `UnsupportedError` naming it.
   */
  toONNX(options?: ToONNXOptions): Uint8Array;
  /** Metadata of the module as a whole (an imported model's `onnx_opset_import`, producer...). */
  readonly meta: Record<string, FxValue>;
  /**
   * A copy of the GraphModule at attribute path `target` (an If/Loop/Scan body of an imported
   * model), owned by the caller.
   */
  submodule(target: string): GraphModule;
  /**
   * A new module computing the nodes `outputs` from the nodes `inputs` (names or Nodes), like
   * onnx.utils.extract_model: the inputs become placeholders and everything between is copied.
   * Owned by the caller. Throws a ValueError naming an unknown name, and a GraphError naming a
   * node that needs a value from outside `inputs`.
   */
  extractSubgraph(inputs: Array<string | Node>, outputs: Array<string | Node>): GraphModule;
  /**
   * torch.fx.passes.split_module.split_module: `callback` gives each call_* node its partition
   * (an integer); each partition becomes a submodule `submod_<id>` that the result calls in
   * order. Owned by the caller.
   */
  splitModule(
    callback: (node: Node) => number,
    options?: {
      /** Call the partitions in first-seen order. */
      keepOriginalOrder?: boolean;
      /** Receives "submod_<id>.a_b" -> "a.b" for renamed call_module targets. */
      qualnameMap?: Map<string, string>;
    },
  ): GraphModule;
  /**
   * torch.fx.experimental.const_fold.split_const_subgraphs (the graph surgery): pure nodes whose
   * inputs are all constant move to `constSubgraphModule` (null when none are), and `module`
   * reads their values from the attribute `attrsName`. Both are owned by the caller.
   */
  splitConstSubgraphs(options?: { skipFoldingNode?: (node: Node) => boolean }): {
    module: GraphModule;
    constSubgraphModule: GraphModule | null;
    attrsName: string;
  };
  /** Frees the module and its graph; their handles become stale. Idempotent. */
  delete(): void;
  /** Same as {@link GraphModule.delete}, for `using`. */
  [Symbol.dispose](): void;
}

/** JSON data of one node in {@link Graph.toJSON}. */
export interface NodeJSON {
  name: string;
  op: Opcode;
  target: string;
  args: unknown[];
  kwargs: Record<string, unknown>;
  /** Names of the nodes that use this one. */
  users: string[];
  type: string | null;
  meta: Record<string, unknown>;
}

/** {@link Graph.toJSON}'s result. */
export interface GraphJSON {
  nodes: NodeJSON[];
}

/** torch.fx.node.map_arg: `fn(node)` replaces every Node inside an argument value. */
export function mapArg(a: FxValue, fn: (node: Node) => unknown): any;
/** torch.fx.node.map_aggregate: `fn` applied to every leaf (tuples, lists, objects, slices walked). */
export function mapAggregate(a: FxValue, fn: (leaf: unknown) => unknown): any;

/**
 * What {@link Interpreter.getAttr} gives for a module attribute: a reference, so weights stay in
 * wasm memory when they only go into the next op.
 */
export class AttributeRef {
  private constructor();
  readonly module: GraphModule;
  readonly target: string;
  /** A copy of the parameter or buffer as a tensor. */
  tensor(): Tensor;
}

/** A value of the {@link Interpreter}: what `run` gives, a module attribute, or a literal. */
export type InterpreterValue = any;

/**
 * torch.fx.Interpreter: `run(...inputs)` walks the graph in order; `runNode(n)` fetches the
 * node's argument values from `env` and calls the method of its opcode with (target, args,
 * kwargs). Override any of them in a subclass. call_function nodes of `onnx.*` ops run on
 * fxwasm's kernels, one op per call (slower than `gm.run`, which plans and fuses). Values are
 * tensors, arrays of tensors (sequences), null (an empty optional), or an FxTuple for a node
 * with several outputs; get_attr gives an {@link AttributeRef}.
 */
export class Interpreter {
  constructor(module: GraphModule, options?: { garbageCollectValues?: boolean });
  readonly module: GraphModule;
  readonly graph: Graph;
  /** Node -> its value, during run(). */
  env: Map<Node, InterpreterValue>;
  /** The node runNode is running (null outside run()). */
  currentNode: Node | null;
  /** Runs the graph on one input per placeholder; returns what the output node returns. */
  run(...inputs: InterpreterValue[]): InterpreterValue;
  runNode(n: Node): InterpreterValue;
  placeholder(target: string, args: InterpreterValue[], kwargs: Record<string, InterpreterValue>): InterpreterValue;
  getAttr(target: string, args: InterpreterValue[], kwargs: Record<string, InterpreterValue>): InterpreterValue;
  /** operator.getitem picks an output; any other target runs as an op of the executor. */
  callFunction(target: string, args: InterpreterValue[], kwargs: Record<string, InterpreterValue>): InterpreterValue;
  /** Throws NotImplementedError: override to run call_method nodes. */
  callMethod(target: string, args: InterpreterValue[], kwargs: Record<string, InterpreterValue>): InterpreterValue;
  /** Throws NotImplementedError: override to run call_module nodes. */
  callModule(target: string, args: InterpreterValue[], kwargs: Record<string, InterpreterValue>): InterpreterValue;
  output(target: string, args: InterpreterValue[], kwargs: Record<string, InterpreterValue>): InterpreterValue;
  fetchAttr(target: string): AttributeRef;
  fetchArgsKwargsFromEnv(n: Node): [InterpreterValue[], Record<string, InterpreterValue>];
  mapNodesToValues(args: FxValue, n: Node): InterpreterValue;
}

/**
 * torch.fx.Transformer: an Interpreter whose methods return Nodes of a new graph (with the old
 * node's meta); `transform()` wraps it in a GraphModule over the same attributes, owned by the
 * caller. Override `callFunction` (etc.) and call `super` with a new target, args or kwargs.
 */
export class Transformer extends Interpreter {
  constructor(module: GraphModule);
  readonly newGraph: Graph;
  transform(): GraphModule;
}

/** One way a node breaks its ONNX op schema ({@link GraphModule.checkSchemas}). */
export interface SchemaProblem {
  node: string;
  target: string;
  /** What is wrong, e.g. "attribute 'min' is not in the schema of Clip-13 (opset 13), which has no attributes". */
  rule: string;
}

/** Element types of tensors crossing into `run`. */
export type TensorDtype =
  | 'float32'
  | 'float64'
  | 'float16'
  | 'bfloat16'
  | 'int64'
  | 'int32'
  | 'int16'
  | 'int8'
  | 'uint64'
  | 'uint32'
  | 'uint16'
  | 'uint8'
  | 'bool'
  | 'string';

/**
 * A tensor given to {@link GraphModule.run}; `dtype` defaults from the typed array's type. A
 * string tensor's data is an array of strings (dtype `'string'`), as in onnxruntime-web.
 */
export type TensorInput =
  | {
      data: Float32Array | Float64Array | BigInt64Array | Int32Array | Int16Array | Int8Array | Uint8Array | Uint16Array | Uint32Array | BigUint64Array | string[];
      shape: number[];
      dtype?: TensorDtype;
    }
  | OrtTensorLike;

/** onnxruntime's tensor fields (an `ort.Tensor` fits): `dims` and `type` for `shape` and `dtype`. */
export interface OrtTensorLike {
  data: Float32Array | Float64Array | BigInt64Array | Int32Array | Int16Array | Int8Array | Uint8Array | Uint16Array | Uint32Array | BigUint64Array | string[];
  dims: readonly number[];
  type: TensorDtype;
}

/** The data array of each dtype (16-bit floats as their bits, bool as bytes, strings as an array). */
export interface TensorDataMap {
  float32: Float32Array;
  float64: Float64Array;
  float16: Uint16Array;
  bfloat16: Uint16Array;
  int64: BigInt64Array;
  int32: Int32Array;
  int16: Int16Array;
  int8: Int8Array;
  uint64: BigUint64Array;
  uint32: Uint32Array;
  uint16: Uint16Array;
  uint8: Uint8Array;
  bool: Uint8Array;
  string: string[];
}

/**
 * A tensor returned by {@link GraphModule.run} (the data is a copy). A union over dtypes, so
 * checking `t.dtype` narrows `t.data` (`if (t.dtype === 'float32') t.data` is a Float32Array);
 * `Tensor<'int64'>` names one dtype.
 */
export type Tensor<D extends TensorDtype = TensorDtype> = {
  [K in D]: {
    data: TensorDataMap[K];
    shape: number[];
    dtype: K;
    /** `shape` under onnxruntime's name (a getter): `new ort.Tensor(t.type, t.data, t.dims)`. */
    readonly dims: number[];
    /** `dtype` under onnxruntime's name (a getter). */
    readonly type: K;
  };
}[D];

/** What an ONNX value is: a tensor, a sequence of tensors, or an optional (empty or holding one). */
export type ValueKind = 'tensor' | 'sequence' | 'optional';

/**
 * An input of {@link GraphModule.run}: a tensor; a sequence as an array of tensors (or
 * `{ sequence, dtype }`, which names the element type of an empty one); `null` for an empty
 * optional.
 */
export type RunInput = TensorInput | TensorInput[] | { sequence: TensorInput[]; dtype?: TensorDtype } | null;

/** An output of {@link GraphModule.run}: a tensor, a sequence (array of tensors), or `null` (an empty optional). */
export type RunValue = Tensor | Tensor[] | null;

/** A node {@link GraphModule.run} cannot execute. */
export interface CoverageGap {
  node: string;
  target: string;
  reason: string;
}

/**
 * Names accepted by {@link runPasses}: the C++ pass registry's names (tests/js/registry.test.mjs
 * fails if this union and {@link passNames} differ).
 */
export type PassName =
  | 'dce'
  | 'cse'
  | 'remove-dropout'
  | 'fold'
  | 'fuse-conv-bn'
  | 'fuse-matmul-add'
  | 'fuse-gelu'
  | 'fuse-layernorm';

/** What one pass did (C++ `fx::PassReport`). */
export interface PassReport {
  pass: string;
  iteration: number;
  modified: boolean;
  nodesBefore: number;
  nodesAfter: number;
}

/** Options of {@link runPasses}. */
export interface RunPassesOptions {
  /** Inputs to run before and after every modifying pass; the first pass that changes outputs throws. */
  checkEquivalence?: TensorInput[];
  /** Relative tolerance of the check (default 1e-4). */
  rtol?: number;
  /** Absolute tolerance of the check (default 1e-5). */
  atol?: number;
  /** Repeat the pipeline until nothing changes, at most this often (default 1). */
  maxIterations?: number;
}

/** One replaced match of {@link replacePattern}. */
export interface PatternMatch {
  /** Name of the pattern's anchor node. */
  anchor: string;
  /** [pattern node name, graph node name or the literal a placeholder bound] (those nodes are erased now). */
  nodesMap: Array<[string, unknown]>;
  /** The nodes the replacement added for this match, in the replacement's order (torch 2.x `ReplacedPatterns.replacements`). */
  replacements: Node[];
}

/**
 * The pass names {@link runPasses} accepts, from the C++ pass registry in its order. Filled by
 * {@link init} (empty before) and frozen then.
 */
export declare const passNames: readonly PassName[];
/** A registered pass: its name and a one-line description. */
export interface PassInfo {
  name: PassName;
  description: string;
}
/** Every registered pass, in registry order (a fresh array each call). Needs {@link init}. */
export declare function passInfo(): PassInfo[];
/** Runs passes in order with lint after each (C++ `fx::PassManager`); see {@link RunPassesOptions}. */
/** A pass written in JS: changes `gm` in place and returns whether it modified the graph. */
export type JsPass = ((gm: GraphModule) => boolean) | { name: string; fn: (gm: GraphModule) => boolean };
/**
 * Runs the passes in order: registered ones by name, JS ones as functions (named by `fn.name` in
 * the reports) or `{ name, fn }`; lint after each, recompile and check equivalence after one that
 * modified the graph.
 */
export declare function runPasses(gm: GraphModule, names: Array<PassName | JsPass>, options?: RunPassesOptions): PassReport[];
/** A match as {@link ReplacePatternOptions.filters} see it (torch.fx `InternalMatch`). */
export interface InternalMatch {
  /** Names of the pattern's anchors (the pattern nodes its output returns), as in torch.fx. */
  anchors: string[];
  /** [pattern node name, graph node name or the literal a placeholder bound]. */
  nodesMap: Array<[string, unknown]>;
  /** What each pattern placeholder matched, in pattern order (node name or literal). */
  placeholderNodes: unknown[];
  /** Names of the graph nodes matched by the nodes the pattern returns. */
  returningNodes: string[];
}

/** Options of {@link replacePattern}. */
export interface ReplacePatternOptions {
  /**
   * torch.fx `replace_pattern_with_filters`: a match is replaced only if every filter returns
   * `true`. A filter that throws stops the call with its error before anything is replaced.
   */
  filters?: Array<(match: InternalMatch, originalGraph: Graph, patternGraph: Graph) => boolean>;
  /**
   * Literals in the pattern match any literal, and kwargs the pattern does not name are not
   * compared (torch 2.x `ignore_literals`, extended to kwargs): `onnx.Conv(x, w, b)` then matches
   * every Conv of an ONNX graph whatever its attributes.
   */
  ignoreLiterals?: boolean;
}

/** A match of {@link matchPattern}, with Node handles on the graph side. */
export interface SubgraphMatch {
  /** The pattern's anchors (pattern nodes). */
  anchors: Node[];
  /** Pattern node -> the graph node it matched, or the literal a placeholder bound. */
  nodesMap: Map<Node, Node | FxValue>;
  /** What each pattern placeholder matched, in pattern order. */
  placeholderNodes: Array<Node | FxValue>;
  /** The graph nodes matched by the nodes the pattern returns. */
  returningNodes: Node[];
}

/**
 * torch.fx `SubgraphMatcher(pattern, match_output, match_placeholder, remove_overlapping_matches,
 * ignore_literals).match(graph)`: the matches of `pattern` in `gm`'s graph, nothing replaced.
 */
export declare function matchPattern(gm: GraphModule, pattern: Graph, options?: MatchPatternOptions): SubgraphMatch[];

/** torch.fx SubgraphMatcher's options, for {@link matchPattern}. */
export interface MatchPatternOptions {
  /** Literals in the pattern match any literal; kwargs the pattern does not name are not compared. */
  ignoreLiterals?: boolean;
  /** The pattern's output must match the graph's output node (default false). */
  matchOutput?: boolean;
  /** The pattern's placeholders must match the graph's placeholders (default false). */
  matchPlaceholder?: boolean;
  /** Drop matches that share nodes with an earlier one (default true). */
  removeOverlappingMatches?: boolean;
}

/**
 * torch.fx `replace_pattern` (with `options.filters`: `replace_pattern_with_filters`) with Graphs
 * as pattern and replacement (C++ `fx::replace_pattern_with_filters`).
 */
export declare function replacePattern(
  gm: GraphModule,
  pattern: Graph,
  replacement: Graph,
  options?: ReplacePatternOptions,
): PatternMatch[];

/** Options of {@link GraphModule.toONNX}. */
export interface ToONNXOptions {
  /** Write tensors that live in external files into the model (default: keep the references). */
  embedExternalData?: boolean;
  /** Opset of the default domain when the module records none (default 17). */
  defaultOpset?: number;
  /**
   * The default domain's opset to write. Default: the module's own, raised to what fused ops
   * need (a LayerNormalization fused into an opset-13 model makes it opset 17). Given, it is
   * pinned: a newer op is written in older ops (LayerNormalization decomposed) or the export
   * throws naming the node; below the module's own opset it throws (ops are not converted down).
   */
  opset?: number;
  /**
   * How a fused Gelu (ONNX has it from opset 20 only) is written: `'decomposed'` (Div/Erf/Add/Mul,
   * any consumer; the default), `'com.microsoft'` (onnxruntime's contrib Gelu/FastGelu) or
   * `'opset20'` (ONNX's Gelu, raising the opset to 20).
   */
  gelu?: 'decomposed' | 'com.microsoft' | 'opset20';
}

/** A `Blob`/`File` (structurally, so the declarations need no DOM types). */
export interface BlobLike {
  readonly size: number;
  slice(start?: number, end?: number): BlobLike;
  arrayBuffer(): Promise<ArrayBuffer>;
}

/**
 * Where tensors stored as ONNX external data come from: a reader called with the file name, byte
 * offset and length; an object or Map from file name to its bytes (or a Blob, inside a Web
 * Worker); or, under Node, the folder the files are in. Each range the model references is read
 * once, while loadONNX runs, and kept with the module; a range that cannot be read (missing, or
 * the reader throws) fails only when its tensor's bytes are needed, naming the reason.
 */
export type ExternalDataSource =
  | ((location: string, offset: number, length: number) => Uint8Array | null | undefined)
  | Record<string, Uint8Array | ArrayBuffer | BlobLike>
  | Map<string, Uint8Array | ArrayBuffer | BlobLike>
  | string;

/**
 * The meta keys an imported GraphModule carries (C++ `fx::onnx::meta`, include/fx/onnx.h), by the
 * C++ names without the `k`, in camelCase: `onnxMetaKeys.outputs` is `"onnx_outputs"`. Read meta
 * through them rather than spelling the strings. Filled by {@link init} and frozen then.
 */
export interface OnnxMetaKeys {
  /** Node: original node or value name. */
  readonly name: string;
  /** Node: every output name, in order. */
  readonly outputs: string;
  /** Placeholder: `{dtype, shape}`. */
  readonly type: string;
  /** Node: its domain if not the default one. */
  readonly domain: string;
  /** Node, graph or model doc_string. */
  readonly doc: string;
  /** Constant node: its name. */
  readonly nodeName: string;
  /** Constant node: its tensor's name. */
  readonly tensorName: string;
  /** Node: real inputs before captured values. */
  readonly numInputs: string;
  /** Node: captured names, in argument order. */
  readonly captures: string;
  /** Body placeholder: the captured outer name. */
  readonly outerScope: string;
  /** get_attr: was a Constant node. */
  readonly constant: string;
  /** Scalars that were one-element tensors. */
  readonly tensorAttrs: string;
  /** Attribute types of empty lists. */
  readonly attrTypes: string;
  /** Output node: value types. */
  readonly outputTypes: string;
  /** Output node: the node each output returned at import (a type whose output moved is not written). */
  readonly outputSources: string;
  /** GraphModule: `{domain: version}`. */
  readonly opsetImport: string;
  /** GraphModule: ir_version. */
  readonly irVersion: string;
  /** GraphModule: producer_name. */
  readonly producerName: string;
  /** GraphModule: producer_version. */
  readonly producerVersion: string;
  /** GraphModule: model_version. */
  readonly modelVersion: string;
  /** GraphModule: metadata_props `{key: value}`. */
  readonly metadataProps: string;
  /** GraphModule: serialized FunctionProtos. */
  readonly functions: string;
  /** GraphModule: the graph's name. */
  readonly graphName: string;
  /** GraphModule: the graph's doc_string. */
  readonly graphDoc: string;
  /** GraphModule: graph inputs that are weights. */
  readonly initializerInputs: string;
}
/** See {@link OnnxMetaKeys}. */
export declare const onnxMetaKeys: OnnxMetaKeys;

/** Options of {@link loadONNX}. */
export interface LoadONNXOptions {
  /** Resolves external data (read once, before loadONNX returns). */
  externalData?: ExternalDataSource;
  /**
   * An opset newer than fxwasm knows: `'warn'` (default; loads, and calls `onWarning`) or
   * `'error'` (throws `UnsupportedError`). A model without opset_import is always a `ParseError`.
   */
  opsetCheck?: 'warn' | 'error';
  /** Receives the import's warnings (default `console.warn`). */
  onWarning?: (message: string) => void;
}

/**
 * Imports an ONNX model (C++ `fx::onnx::import_model`): graph inputs become placeholders (meta
 * `onnx_type`), initializers get_attr nodes over parameters, each node a call_function of
 * `onnx.<OpType>` with its attributes as kwargs, extra outputs `getitem` nodes, If/Loop bodies
 * sub-GraphModules. Malformed bytes throw a `ParseError` naming what is wrong.
 */
export declare function loadONNX(bytes: Uint8Array | ArrayBuffer, options?: LoadONNXOptions): GraphModule;
/**
 * {@link loadONNX} of a file path (Node; its folder then supplies the external data unless
 * `options.externalData` is given), a URL (`file:` in Node, else fetched), a Blob/File or a fetch
 * Response: resolves to the GraphModule. An unreadable source rejects with an FxError
 * (ValueError) naming it.
 */
export declare function loadONNX(source: string | ModelSource, options?: LoadONNXOptions): Promise<GraphModule>;
/**
 * What {@link loadONNX} reads asynchronously besides a path: a URL, or anything with
 * `arrayBuffer()` (a Blob, File or fetch Response; a Response must be `ok`). Structural, so the
 * declarations need no DOM types.
 */
export type ModelSource = { readonly href: string; readonly protocol: string } | { arrayBuffer(): Promise<ArrayBuffer>; readonly ok?: boolean; readonly status?: number };

/** Decodes an ONNX TensorProto (ONNX test data such as `input_0.pb`). */
export declare function tensorFromONNX(bytes: Uint8Array | ArrayBuffer): Tensor & { name: string };

/**
 * Decodes ONNX test data of `kind`: a TensorProto ('tensor', the default), a SequenceProto
 * ('sequence': an array of tensors) or an OptionalProto ('optional': its value, or null). The
 * bytes do not say which; {@link GraphModule.valueKinds} does for a model's inputs and outputs.
 */
export declare function valueFromONNX(bytes: Uint8Array | ArrayBuffer, kind?: ValueKind): RunValue;

/** Encodes a tensor as an ONNX TensorProto named `name`. */
export declare function tensorToONNX(tensor: TensorInput, name?: string): Uint8Array;

/** A node {@link lowerToTorch} cannot convert, found before converting. */
export interface LoweringGap {
  /** The FX node's name. */
  node: string;
  /** The ONNX op type ("Loop"). */
  op: string;
  /** The model's opset. */
  opset: number;
  /** Why, e.g. "no handler for Loop at opset 13". */
  reason: string;
}

/**
 * The nodes of an imported ONNX module that {@link lowerToTorch} cannot convert at the model's
 * opset (handlers are keyed by each op's since_version), in graph order; empty when all convert.
 */
export declare function loweringCoverage(gm: GraphModule): LoweringGap[];

/** Options of {@link lowerToTorch}. */
export interface LowerToTorchOptions {
  /** The class name of the result (default: the imported module's, "OnnxModule"). */
  className?: string;
  /**
   * Sizes every dynamic input dim takes in the two runs that tell the dims that follow the
   * input apart from static ones (default `[2, 3]`); they must be sizes the model accepts.
   */
  probeSizes?: [number, number];
  /**
   * Inputs to run the model on while lowering (one per input), used when no input dim is
   * dynamic: for a model that only runs on meaningful values (indices, a valid Range), where the
   * default zero/one-filled inputs would fail.
   */
  exampleInputs?: TensorInput[];
}

/**
 * ONNX to PyTorch (C++ `fx::torch_codegen::lower`): a new GraphModule computing what the imported
 * module computes, with PyTorch targets. Conv, Gemm/MatMul(+Add), BatchNormalization,
 * LayerNormalization and LSTM become `torch.nn` layers that own the weights, at paths taken from
 * the ONNX names (`layer1.0.conv1`); elementwise ops become `torch.*`/`operator.*` calls; shape
 * arithmetic becomes Python ints, `x.size(0)` on dims the model declares dynamic. Its `code` runs
 * in PyTorch and re-traces to the same graph. Throws `UnsupportedError` naming the node for what
 * cannot be lowered ({@link loweringCoverage} lists those up front).
 */
export declare function lowerToTorch(gm: GraphModule, options?: LowerToTorchOptions): GraphModule;

/** The files of a package written by {@link toFolder}, by name. */
export interface TorchPackage {
  /** The `torch.nn.Module` subclass: `__init__` builds the layers and loads the weights. */
  'module.py': Uint8Array;
  /** `from .module import *`. */
  '__init__.py': Uint8Array;
  /** Every parameter and buffer, in PyTorch's own file format (`torch.load` reads it). */
  'state_dict.pt': Uint8Array;
}

/**
 * torch.fx's `GraphModule.to_folder`: a Python package for a module with PyTorch targets (lower an
 * imported ONNX module with {@link lowerToTorch} first). Write the files into a folder `pkg`, then
 * in Python: `from pkg import FxModule; net = FxModule().eval(); y = net(x)`.
 */
export declare function toFolder(gm: GraphModule, moduleName?: string): TorchPackage;

/**
 * The PyTorch package of any GraphModule: {@link toFolder}, after {@link lowerToTorch} when it has
 * `onnx.*` targets. What cannot be lowered is named, node by node, in one `UnsupportedError`.
 */
export declare function torchPackage(gm: GraphModule, moduleName?: string): TorchPackage;

/**
 * One op of a profiled run ({@link GraphModule.run} with `profile: true`). A node the executor
 * fused into the op before it (a Relu after a Conv, a bias Add after a MatMul, a residual Add)
 * has no entry: its time is in that op's. Nor have, after the first run with given input shapes,
 * the nodes those shapes fix (Shape and the arithmetic on it, Identity of a weight: computed
 * once, then held), nor the layout ops a later op reads as a view (a MatMul reads a Slice ->
 * Reshape -> Transpose chain of its operand in place; other chains are copied once, at their
 * last node).
 */
export interface OpTime {
  /** The node whose op ran. */
  readonly node: string;
  /** Its target as printed, e.g. `onnx.Conv`. */
  readonly op: string;
  /** Wall time of the op, in milliseconds (the clock's resolution: a browser may round it). */
  readonly ms: number;
}

/** Options of {@link init}. */
export interface InitOptions {
  /** Where to find `fx.wasm`: called with `("fx.wasm", directory of fx.mjs)`, returns a URL or path. */
  locateFile?: (path: string, scriptDirectory: string) => string;
  /** The bytes of `fx.wasm`, if the caller already has them. */
  wasmBinary?: ArrayBuffer | Uint8Array;
  /** Resource limits to set at once (see {@link Limits}). */
  limits?: Partial<Limits>;
  /**
   * Threads for the kernels (integer, 1 to 256; default 1). With 2 or more, init() loads the
   * threaded module `dist/fx-threads.mjs` + `.wasm` + `.worker.js` (pthreads over a
   * SharedArrayBuffer; `threads - 1` Workers, started before init() resolves) when the environment
   * allows it: Node >= 18, or a page or worker that is `crossOriginIsolated` (served with
   * `Cross-Origin-Opener-Policy: same-origin` and `Cross-Origin-Embedder-Policy: require-corp`).
   * Otherwise, or if those files cannot be loaded, it loads the single-thread module as without
   * the option: {@link ThreadInfo.reason} says why. `locateFile` is asked for the threaded files
   * by those names too. Results are the same at any thread count.
   *
   * Where the engine also has Relaxed SIMD (Chromium >= 114, Firefox >= 120; Node only under
   * `--experimental-wasm-relaxed-simd`), the threaded module is `dist/fx-threads-relaxed.*`
   * instead: the kernels' multiply-adds fused where the CPU has FMA, faster, and results that may
   * differ from the other modules in the last bits (within 1e-5 of the largest output magnitude
   * on the zoo). If it cannot load, the plain threaded module is loaded. {@link ThreadInfo.simd}
   * says which.
   */
  threads?: number;
  /**
   * Whether the threaded module may be the Relaxed SIMD one (default true). `false` keeps
   * `dist/fx-threads.*`, whose results are bit-identical to the single-thread module's.
   */
  relaxedSimd?: boolean;
}

/** What {@link Fx.threads} reports: which module init() loaded and the kernels' thread count. */
export interface ThreadInfo {
  /** `'threads'`: dist/fx-threads.* (pthreads); `'single'`: dist/fx.* (one thread). */
  readonly build: 'threads' | 'single';
  /** Threads the kernels use now (the calling thread included). */
  readonly threads: number;
  /** What init({threads}) asked for (1 when absent). */
  readonly requested: number;
  /**
   * Why the single-thread module was loaded although threads were asked for (e.g. the page is
   * not cross-origin isolated, or the threaded files could not be fetched); null otherwise.
   */
  readonly reason: string | null;
  /** `'relaxed'`: dist/fx-threads-relaxed.* (fused multiply-adds); `'simd128'`: the others. */
  readonly simd: 'relaxed' | 'simd128';
  /**
   * Why not the Relaxed SIMD module (one thread asked for, no threaded module here, an engine
   * without Relaxed SIMD, `relaxedSimd: false`, or it failed to load); null when it runs.
   */
  readonly simdReason: string | null;
}

/**
 * Resource limits (C++ `fx::Limits`), checked before anything is allocated: a breach throws
 * `ResourceError` naming the node and the size. 0 or absent: the default (a quarter of wasm32's
 * 4 GB per tensor, half of it per run, 2^30 elements per shape, 2^20 iterations per Loop).
 */
export interface Limits {
  /** Bytes of any one tensor (weights, inputs, computed values). */
  maxTensorBytes: number;
  /** Bytes of the large computed values (32 KB and more) alive at once in a run. */
  maxRunBytes: number;
  /** Elements of any one shape. */
  maxElements: number;
  /** Iterations of one ONNX Loop node (default 2^20): a data-driven trip count cannot hang. */
  maxLoopIterations: number;
}

/** The API object {@link init} resolves to. */
export interface Fx {
  /** Version of the fxwasm build. */
  readonly version: string;
  /** See {@link Graph}. */
  readonly Graph: typeof Graph;
  /** See {@link GraphModule}. */
  readonly GraphModule: typeof GraphModule;
  /** See {@link Node}. */
  readonly Node: typeof Node;
  /** See {@link InsertPoint}. */
  readonly InsertPoint: typeof InsertPoint;
  /** See {@link FxError}. */
  readonly FxError: typeof FxError;
  /** See {@link FxTuple}. */
  readonly FxTuple: typeof FxTuple;
  /** See {@link FxFloat}. */
  readonly FxFloat: typeof FxFloat;
  /** See {@link FxComplex}. */
  readonly FxComplex: typeof FxComplex;
  /** See {@link FxSlice}. */
  readonly FxSlice: typeof FxSlice;
  /** See {@link FxEllipsis}. */
  readonly FxEllipsis: typeof FxEllipsis;
  /** See {@link FxDtype}. */
  readonly FxDtype: typeof FxDtype;
  /** See {@link FxDevice}. */
  readonly FxDevice: typeof FxDevice;
  /** See {@link FxMemoryFormat}. */
  readonly FxMemoryFormat: typeof FxMemoryFormat;
  /** See {@link FxLayout}. */
  readonly FxLayout: typeof FxLayout;
  /** See {@link tuple}. */
  readonly tuple: typeof tuple;
  /** See {@link float}. */
  readonly float: typeof float;
  /** See {@link complex}. */
  readonly complex: typeof complex;
  /** See {@link slice}. */
  readonly slice: typeof slice;
  /** See {@link ellipsis}. */
  readonly ellipsis: FxEllipsis;
  /** See {@link dtype}. */
  readonly dtype: typeof dtype;
  /** See {@link device}. */
  readonly device: typeof device;
  /** See {@link memoryFormat}. */
  readonly memoryFormat: typeof memoryFormat;
  /** See {@link layout}. */
  readonly layout: typeof layout;
  /** See {@link runPasses}. */
  readonly runPasses: typeof runPasses;
  /** See {@link replacePattern}. */
  readonly replacePattern: typeof replacePattern;
  /** See {@link matchPattern}. */
  readonly matchPattern: typeof matchPattern;
  /** See {@link passNames}. */
  readonly passNames: typeof passNames;
  /** See {@link passInfo}. */
  readonly passInfo: typeof passInfo;
  /** See {@link onnxMetaKeys}. */
  readonly onnxMetaKeys: OnnxMetaKeys;
  /** See {@link loadONNX}. */
  readonly loadONNX: typeof loadONNX;
  /** See {@link tensorFromONNX}. */
  readonly tensorFromONNX: typeof tensorFromONNX;
  /** See {@link tensorToONNX}. */
  readonly tensorToONNX: typeof tensorToONNX;
  /** See {@link valueFromONNX}. */
  readonly valueFromONNX: typeof valueFromONNX;
  /** See {@link lowerToTorch}. */
  readonly lowerToTorch: typeof lowerToTorch;
  /** See {@link loweringCoverage}. */
  readonly loweringCoverage: typeof loweringCoverage;
  /** See {@link toFolder}. */
  readonly toFolder: typeof toFolder;
  /** See {@link torchPackage}. */
  readonly torchPackage: typeof torchPackage;
  /** See {@link Interpreter}. */
  readonly Interpreter: typeof Interpreter;
  /** See {@link Transformer}. */
  readonly Transformer: typeof Transformer;
  /** See {@link AttributeRef}. */
  readonly AttributeRef: typeof AttributeRef;
  /** See {@link mapArg}. */
  readonly mapArg: typeof mapArg;
  /** See {@link mapAggregate}. */
  readonly mapAggregate: typeof mapAggregate;
  /**
   * Bytes currently allocated on the wasm heap by malloc (for leak checks). The threaded modules'
   * threads each keep up to 64 KB of freed small blocks for reuse, which count here until
   * {@link releaseCachedMemory} frees them.
   */
  heapUsed(): number;
  /** Sets the resource limits (fields left out take their default). */
  setLimits(limits: Partial<Limits>): void;
  /** The resource limits in force. */
  limits(): Limits;
  /** Current size of the wasm memory in bytes (`HEAP8.length`). */
  heapSize(): number;
  /** Number of live graphs and graph modules held by the wasm module (for leak checks). */
  liveHandles(): number;
  /**
   * Gives the executor's caches back to the allocator: its arena, buffer pool, packed weights,
   * plans and kernel scratch, and the threads' freed small blocks (they are kept between runs for
   * speed). After deleting every model,
   * this returns the heap to within about 1 MB of what it was before loading.
   */
  releaseCachedMemory(): void;
  /** Which module init() loaded, and how many threads the kernels use (see {@link InitOptions.threads}). */
  threads(): ThreadInfo;
  /**
   * Sets the kernels' thread count, from 1 up to init({threads})'s count (the threaded module's
   * Workers are fixed when it loads; always 1 in the single-thread module); returns the count set.
   */
  setThreads(n: number): number;
}

/** A model loaded in a worker ({@link FxWorker.loadONNX}): a GraphModule's asynchronous mirror. */
export class WorkerModel {
  private constructor();
  readonly id: number;
  readonly inputNames: string[];
  readonly outputNames: string[];
  /** GraphModule.run in the worker; inputs are copied, the outputs' buffers transferred back. */
  run(inputs: RunInput[]): Promise<RunValue[]>;
  run(feeds: Record<string, RunInput>): Promise<Record<string, RunValue>>;
  run(inputs: RunInput[], options: { probe?: string[]; profile: true }): Promise<{ outputs: RunValue[]; probes: Record<string, RunValue>; profile: OpTime[] }>;
  run(inputs: RunInput[], options: { probe: string[] }): Promise<{ outputs: RunValue[]; probes: Record<string, RunValue> }>;
  /** runPasses by registered name (JS passes cannot cross into a worker: a TypeError). */
  runPasses(names: PassName[], options?: RunPassesOptions): Promise<PassReport[]>;
  code(): Promise<string>;
  print(): Promise<string>;
  coverage(): Promise<CoverageGap[]>;
  checkSchemas(options?: { opset?: number }): Promise<SchemaProblem[]>;
  toONNX(options?: ToONNXOptions): Promise<Uint8Array>;
  toJSON(): Promise<GraphJSON>;
  /** The zip of the PyTorch package of lowerToTorch(model). */
  torchPackage(name?: string): Promise<Uint8Array>;
  /** Frees the model in the worker; later calls reject with StaleHandleError. */
  delete(): Promise<boolean>;
}

/** fxwasm running in a worker ({@link createWorker}). */
export class FxWorker {
  private constructor();
  /** The wasm module's version, as `fx.version`. */
  readonly version: string;
  /** loadONNX in the worker: bytes (copied), a path (Node), a URL, or a Blob/File. */
  loadONNX(source: Uint8Array | ArrayBuffer | string | ModelSource, options?: LoadONNXOptions): Promise<WorkerModel>;
  /** Stops the worker and its wasm instance; pending and later calls reject. */
  terminate(): Promise<void>;
}

/**
 * Starts fxwasm in a worker (a Web Worker in browsers, a worker thread under Node) with its own
 * wasm instance, so a page stays responsive while models import, run and go through passes.
 * Options are init()'s without functions (`wasmBinary`, `limits`, `threads`). Bundlers (Vite, webpack) ship
 * the worker as a chunk of its own.
 */
export function createWorker(options?: Omit<InitOptions, 'locateFile'>): Promise<FxWorker>;

/**
 * Loads the wasm module (once; later calls return the same promise) and resolves to the API
 * object. Options apply on the first call only: a later call with different options rejects with
 * an FxError (ValueError) rather than ignoring them; use `setLimits` to change limits later. Under Node the `.wasm` is read from the package's `dist/`;
 * in browsers it is fetched next to `dist/fx.mjs` unless `locateFile` / `wasmBinary` say otherwise.
 */
export function init(options?: InitOptions): Promise<Fx>;

export default init;
