// wasm/onnx.mjs — ONNX models and tensors in and out (fx::onnx).
import { FxError, typeError } from './errors.mjs';
import { M, PRIVATE, ck, requireModule, nodeFs } from './runtime.mjs';
import { GraphModule } from './graph_module.mjs';
import { encodeTensors, tensorFromWasm, valueFromWasm } from './tensors.mjs';

/**
 * The meta keys of fx::onnx::meta (include/fx/onnx.h) by their C++ names without the k, in
 * camelCase: `onnxMetaKeys.outputs` is "onnx_outputs". Filled by init() and frozen then.
 */
export const onnxMetaKeys = {};

/** Called once by init(). */
export function loadOnnxMetaKeys() {
  Object.assign(onnxMetaKeys, ck(M.onnxMetaKeys()));
  Object.freeze(onnxMetaKeys);
}

function asBytes(data, what) {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw typeError(`${what}: expected a Uint8Array or ArrayBuffer`);
}

function blobRange(blob, offset, length, location) {
  if (typeof FileReaderSync === 'undefined')
    throw new FxError(
      'ValueError',
      `external data '${location}' is a Blob, which can only be read synchronously in a Web Worker; ` +
        'read it into a Uint8Array first (await blob.arrayBuffer()) or load the model in a worker',
    );
  const part = length >= 0 ? blob.slice(offset, offset + length) : blob.slice(offset);
  return new Uint8Array(new FileReaderSync().readAsArrayBuffer(part));
}

// A reader (location, offset, length) -> Uint8Array | null over what the caller gave.
function externalReader(externalData) {
  if (externalData == null) return null;
  let read;
  if (typeof externalData === 'function') {
    read = externalData;
  } else if (typeof externalData === 'string') {
    if (!nodeFs) throw typeError('loadONNX: externalData as a folder path works in Node only');
    const dir = externalData;
    // The sandbox of fx::onnx::folder_reader: the real path (symlinks resolved) of the file must
    // lie inside the real folder, be a regular file (not a directory or a device), and hold the
    // range; errors name the file and the range.
    read = (location, offset, length) => {
      const what = `external data '${location}'`;
      if (location === '' || location.startsWith('/') || location.split(/[\\/]/).includes('..'))
        throw new FxError('ValueError', `external data location '${location}' must stay inside the model's folder (a relative path without '..')`);
      const root = nodeFs.realpathSync(dir === '' ? '.' : dir);
      let target;
      try {
        target = nodeFs.realpathSync(`${dir}/${location}`);
      } catch (e) {
        throw new FxError('ValueError', `${what}: cannot open '${dir}/${location}' (${e.code ?? e.message})`);
      }
      const inside = root.endsWith('/') ? root : `${root}/`;
      if (!target.startsWith(inside))
        throw new FxError('ValueError', `${what} resolves to '${target}', outside the model's folder '${root}' (a symlink may not leave the folder)`);
      const fd = nodeFs.openSync(target, nodeFs.constants.O_RDONLY | (nodeFs.constants.O_NOFOLLOW ?? 0));
      try {
        const st = nodeFs.fstatSync(fd);
        if (!st.isFile())
          throw new FxError('ValueError', `${what}: '${target}' is ${st.isDirectory() ? 'a directory' : 'not a regular file'}, not a file of tensor data`);
        const size = st.size;
        if (!(offset >= 0 && offset <= size && (length < 0 || length <= size - offset)))
          throw new FxError('ParseError', `${what}: bytes [${offset}, ${length >= 0 ? `${offset} + ${length}` : 'end'}) are outside the file's ${size} bytes ('${target}')`);
        const n = length >= 0 ? length : size - offset;
        const out = new Uint8Array(n);
        for (let done = 0; done < n; ) {
          const r = nodeFs.readSync(fd, out, done, n - done, offset + done);
          if (r <= 0) throw new FxError('ValueError', `${what}: reading '${target}' failed at byte ${offset + done}`);
          done += r;
        }
        return out;
      } finally {
        nodeFs.closeSync(fd);
      }
    };
  } else if (typeof externalData === 'object') {
    const get = externalData instanceof Map ? (k) => externalData.get(k) : (k) => externalData[k];
    read = (location, offset, length) => {
      const src = get(location);
      if (src == null) return null;
      if (typeof Blob !== 'undefined' && src instanceof Blob) return blobRange(src, offset, length, location);
      const b = asBytes(src, `externalData['${location}']`);
      const end = length >= 0 ? offset + length : b.byteLength;
      if (end > b.byteLength)
        throw new FxError('ParseError', `external data '${location}' is ${b.byteLength} bytes, shorter than offset ${offset} + length ${length}`);
      return b.subarray(offset, end);
    };
  } else {
    throw typeError('loadONNX: externalData must be a function, an object/Map of location -> bytes, or (Node) a folder path');
  }
  return read;
}

/**
 * Imports an ONNX model (the bytes of a .onnx file) as a GraphModule: graph inputs become
 * placeholders, initializers get_attr nodes over the module's parameters, every node a
 * call_function of `onnx.<OpType>` with its attributes as kwargs. `options.externalData` resolves
 * tensors stored outside the model: a function `(location, offset, length) => Uint8Array`, an
 * object or Map from location to bytes (or a Blob, inside a Web Worker), or under Node the folder
 * the files live in. Each range the model references is read once, before loadONNX returns; one
 * that cannot be read (missing, or the reader throws) fails when its tensor is first needed,
 * with an FxError naming the location and the reason.
 */
export function loadONNX(bytes, options = {}) {
  requireModule();
  if (typeof bytes === 'string' || isUrl(bytes) || isBlob(bytes) || isResponse(bytes)) return loadONNXFrom(bytes, options);
  const data = asBytes(bytes, 'loadONNX');
  const read = externalReader(options?.externalData);
  const opsetCheck = options?.opsetCheck ?? 'warn';
  if (opsetCheck !== 'warn' && opsetCheck !== 'error') throw typeError("loadONNX: opsetCheck must be 'warn' or 'error'");
  const gm = new GraphModule(PRIVATE, ck(M.loadOnnx(data, read !== null, opsetCheck)));
  // An opset newer than fxwasm knows (opsetCheck 'warn'): said once, at load.
  const warnings = gm.meta?.onnx_import_warnings;
  if (Array.isArray(warnings)) for (const w of warnings) (options?.onWarning ?? console.warn)(`fxwasm: ${w}`);
  if (read !== null) {
    // C++ lists the ranges the model's tensors reference; each is read here once and handed in.
    // What cannot be read imports fine and fails when it is needed, naming the reason.
    const supplied = [];
    try {
      for (const [location, offset, length] of ck(M.gmExternalData(gm._id))) {
        let bytes = null;
        let reason = null;
        try {
          const r = read(location, offset, length);
          if (r != null) bytes = asBytes(r, `externalData('${location}')`);
        } catch (e) {
          reason = e?.message ?? String(e);
        }
        supplied.push([location, offset, length, bytes, reason]);
      }
      M.gmSupplyExternalData(gm._id, supplied);
      ck();
    } catch (e) {
      M.gmSupplyExternalData(gm._id, []); // ends the import's table if the first call failed
      gm.delete();
      throw e;
    }
  }
  return gm;
}

// Duck-typed (a Blob, File or Response of any realm; a URL): what index.d.ts promises.
const isBlob = (x) => x !== null && typeof x === 'object' && !ArrayBuffer.isView(x) && typeof x.arrayBuffer === 'function' && !('ok' in x);
const isResponse = (x) => x !== null && typeof x === 'object' && typeof x.arrayBuffer === 'function' && 'ok' in x;
const isUrl = (x) => x !== null && typeof x === 'object' && typeof x.href === 'string' && typeof x.protocol === 'string';

/**
 * loadONNX of a path (Node: a file, whose folder then also holds its external data unless
 * options.externalData says otherwise), a URL (file: in Node, else fetched), a Blob/File or a
 * fetch Response: resolves to the GraphModule.
 */
async function loadONNXFrom(source, options) {
  let bytes;
  let folder = null;
  const what = isUrl(source) ? source.href : typeof source === 'string' ? source : isBlob(source) ? 'the Blob' : 'the Response';
  try {
    if (isBlob(source) || isResponse(source)) {
      if (isResponse(source) && !source.ok) throw new Error(`HTTP ${source.status}`);
      bytes = new Uint8Array(await source.arrayBuffer());
    } else {
      const url = isUrl(source) ? new URL(source.href) : /^[a-z][a-z0-9+.-]*:\/\//i.test(source) ? new URL(source) : null;
      if (url && url.protocol !== 'file:') {
        const r = await fetch(url);
        if (!r.ok) throw new Error(`HTTP ${r.status}`);
        bytes = new Uint8Array(await r.arrayBuffer());
      } else {
        if (!nodeFs) throw new Error('reading a file path needs Node; in a browser pass bytes, a URL, a Blob or a Response');
        const file = url ? decodeURIComponent(url.pathname) : source;
        bytes = await nodeFs.promises.readFile(file);
        folder = file.includes('/') ? file.slice(0, file.lastIndexOf('/')) || '/' : '.';
      }
    }
  } catch (e) {
    throw new FxError('ValueError', `loadONNX: cannot read ${what}: ${e?.message ?? e}`);
  }
  const opts = { ...options };
  if (folder !== null && opts.externalData === undefined) opts.externalData = folder;
  return loadONNX(bytes, opts);
}

/** Decodes an ONNX TensorProto (e.g. ONNX test data `input_0.pb`) into `{ name, dtype, shape, data }`. */
export function tensorFromONNX(bytes) {
  requireModule();
  const t = ck(M.tensorFromOnnx(asBytes(bytes, 'tensorFromONNX')));
  return { name: t.name, ...tensorFromWasm(t) };
}

/**
 * Decodes ONNX test data of `kind` 'tensor' (a TensorProto), 'sequence' (a SequenceProto: an array
 * of tensors) or 'optional' (an OptionalProto: its value, or null when empty). The bytes do not
 * say which: GraphModule.valueKinds() does for a model's inputs and outputs.
 */
export function valueFromONNX(bytes, kind = 'tensor') {
  requireModule();
  if (typeof kind !== 'string') throw typeError("valueFromONNX: kind must be 'tensor', 'sequence' or 'optional'");
  return valueFromWasm(ck(M.valueFromOnnx(asBytes(bytes, 'valueFromONNX'), kind)));
}

/** Encodes a tensor `{ data, shape, dtype? }` as an ONNX TensorProto named `name`. */
export function tensorToONNX(tensor, name = '') {
  requireModule();
  const [t] = encodeTensors([tensor], 'tensorToONNX');
  return ck(M.tensorToOnnx(t, String(name)));
}
