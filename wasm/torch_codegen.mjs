// wasm/torch_codegen.mjs — ONNX to runnable PyTorch (fx::torch_codegen): lowerToTorch,
// loweringCoverage, toFolder and torchPackage.
import { typeError } from './errors.mjs';
import { M, PRIVATE, ck, requireModule } from './runtime.mjs';
import { GraphModule } from './graph_module.mjs';
import { encodeTensors } from './tensors.mjs';

function checkModule(gm, what) {
  if (!(gm instanceof GraphModule)) throw typeError(`${what}: expected a GraphModule`);
  return gm._id;
}

/**
 * The nodes of an imported ONNX module that lowerToTorch cannot convert at the model's opset, in
 * graph order: `[{ node, op, opset, reason }]`. Empty when the whole graph converts.
 */
export function loweringCoverage(gm) {
  requireModule();
  return Array.from(ck(M.gmLoweringCoverage(checkModule(gm, 'loweringCoverage'))), (g) => ({
    node: g.node,
    op: g.op,
    opset: g.opset,
    reason: g.reason,
  }));
}

/**
 * A new GraphModule computing what the imported ONNX module `gm` computes, with PyTorch targets:
 * Conv/Gemm/BatchNormalization/LayerNormalization/LSTM as torch.nn layers owning the weights
 * (named after the ONNX names), elementwise ops as torch/operator calls, and shape arithmetic as
 * Python ints that follow the input sizes (`x.size(0)`) on dims the model declares dynamic.
 * The model runs twice while lowering, with every dynamic dim at `probeSizes` (default [2, 3]),
 * on zero/one-filled inputs, or on `exampleInputs` (one tensor per input) when no input dim is
 * dynamic: for models that only run on meaningful values (indices, a valid Range).
 * Throws FxError (UnsupportedError) naming the node for what cannot be lowered.
 */
export function lowerToTorch(gm, options = {}) {
  requireModule();
  const id = checkModule(gm, 'lowerToTorch');
  const className = options?.className ?? '';
  if (typeof className !== 'string') throw typeError('lowerToTorch: className must be a string');
  const sizes = options?.probeSizes ?? [2, 3];
  if (!Array.isArray(sizes) || sizes.length !== 2 || !sizes.every((s) => Number.isInteger(s) && s > 0))
    throw typeError('lowerToTorch: probeSizes must be two positive integers');
  const examples = options?.exampleInputs;
  if (examples !== undefined && !Array.isArray(examples))
    throw typeError('lowerToTorch: exampleInputs must be an array of tensors, one per input');
  const encoded = examples === undefined ? null : encodeTensors(examples, 'lowerToTorch');
  return new GraphModule(PRIVATE, ck(M.gmLowerToTorch(id, className, sizes[0], sizes[1], encoded)));
}

/**
 * torch.fx's GraphModule.to_folder: the files of a Python package for a module with PyTorch
 * targets (lower an imported ONNX module first), as `{ 'module.py': Uint8Array, '__init__.py':
 * ..., 'state_dict.pt': ... }`. `import <folder>; net = <folder>.<moduleName>()` builds the
 * layers and loads the weights (torch.load of PyTorch's own format); `net(x)` runs the fx code.
 */
export function toFolder(gm, moduleName = 'FxModule') {
  return files('toFolder', gm, moduleName, (id) => M.gmToFolder(id, moduleName));
}

/**
 * The PyTorch package of any GraphModule: toFolder, after lowerToTorch when it has onnx.*
 * targets. What cannot be lowered is named, node by node, in one FxError (UnsupportedError).
 */
export function torchPackage(gm, moduleName = 'FxModule') {
  return files('torchPackage', gm, moduleName, (id) => M.gmTorchPackage(id, moduleName));
}

function files(what, gm, moduleName, call) {
  requireModule();
  const id = checkModule(gm, what);
  if (typeof moduleName !== 'string') throw typeError(`${what}: moduleName must be a string`);
  const out = {};
  for (const [name, bytes] of ck(call(id))) out[name] = bytes;
  return out;
}
