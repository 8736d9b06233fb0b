// wasm/index.mjs — the ESM façade of fxwasm: torch.fx's Graph, Node and GraphModule in JS.
//
//   import { init } from 'fxwasm';
//   const fx = await init();
//   const g = new fx.Graph();
//   const x = g.placeholder('x');
//   const add = g.callFunction('operator.add', [x, 1]);
//   g.output(add);
//   console.log(g.print());
//   g.delete();
//
// Layers: dist/fx.mjs + dist/fx.wasm are the Embind module built from wasm/bindings.cpp (and the
// glue files it binds); the façade turns its flat, id-based functions into classes, checks the
// pending-error slot after every call and throws FxError, and converts argument values both
// ways. Names mirror the C++/Python ones in camelCase, one to one (erase_node -> eraseNode).
// This file only re-exports; one module per concept:
//   errors.mjs        FxError
//   runtime.mjs       the loaded module and the state every module shares (not exported)
//   codec.mjs         Python-like values (FxTuple, FxFloat, ...) and the value text format
//   node.mjs          Node
//   graph.mjs         Graph, InsertPoint
//   graph_module.mjs  GraphModule
//   interpreter.mjs   Interpreter, Transformer (torch.fx's, on fxwasm's kernels)
//   tensors.mjs       tensors as { data, shape, dtype }
//   passes.mjs        runPasses, replacePattern, passNames and passInfo (the C++ pass registry)
//   onnx.mjs          loadONNX, tensorFromONNX, tensorToONNX, valueFromONNX, onnxMetaKeys
//   torch_codegen.mjs lowerToTorch, loweringCoverage, toFolder, torchPackage (ONNX to PyTorch)
//   inputs.mjs        seeded random inputs and output names of a model (the CLI, the playground)
//   worker_client.mjs createWorker() (worker.mjs is the worker's side)
//   init.mjs          init()
export { FxError } from './errors.mjs';
export {
  FxTuple,
  FxFloat,
  FxComplex,
  FxSlice,
  FxEllipsis,
  FxDtype,
  FxDevice,
  FxMemoryFormat,
  FxLayout,
  tuple,
  float,
  complex,
  slice,
  ellipsis,
  dtype,
  device,
  memoryFormat,
  layout,
} from './codec.mjs';
export { Node, mapArg, mapAggregate } from './node.mjs';
export { Graph, InsertPoint } from './graph.mjs';
export { GraphModule } from './graph_module.mjs';
export { Interpreter, Transformer, AttributeRef } from './interpreter.mjs';
export { passNames, passInfo, runPasses, replacePattern, matchPattern } from './passes.mjs';
export { onnxMetaKeys, loadONNX, tensorFromONNX, tensorToONNX, valueFromONNX } from './onnx.mjs';
export { lowerToTorch, loweringCoverage, toFolder, torchPackage } from './torch_codegen.mjs';
export { createWorker, FxWorker, WorkerModel } from './worker_client.mjs';
export { init, default } from './init.mjs';
