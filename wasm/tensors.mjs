// wasm/tensors.mjs — tensors as JS objects `{ data: TypedArray, shape, dtype }` and their
// conversion to and from what the exec glue (wasm/exec.cpp) takes and returns.
import { typeError } from './errors.mjs';

const typedArrayDtypes = [
  [Float32Array, 'float32'],
  [Float64Array, 'float64'],
  [BigInt64Array, 'int64'],
  [Int32Array, 'int32'],
  [Int16Array, 'int16'],
  [Int8Array, 'int8'],
  [Uint8Array, 'uint8'],
  [Uint16Array, 'uint16'],
  [Uint32Array, 'uint32'],
  [BigUint64Array, 'uint64'],
  ...(typeof Float16Array === 'function' ? [[Float16Array, 'float16']] : []),
];
const dtypeArrays = {
  float32: Float32Array,
  float64: Float64Array,
  int64: BigInt64Array,
  int32: Int32Array,
  int16: Int16Array,
  int8: Int8Array,
  uint8: Uint8Array,
  bool: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  uint64: BigUint64Array,
  // 16-bit floats as their bits, as onnxruntime-web gives them (a Float16Array where the runtime
  // has one is taken as input too).
  float16: Uint16Array,
  bfloat16: Uint16Array,
};

function encodeTensor(t, what, i) {
  // onnxruntime's tensors ({ data, dims, type }, e.g. an ort.Tensor) are taken as they are.
  if (t != null && t.shape === undefined && Array.isArray(t.dims)) t = { data: t.data, shape: t.dims, dtype: t.type };
  // A string tensor: data is an array of strings (as in onnxruntime-web), dtype 'string'.
  if (t != null && Array.isArray(t.data) && Array.isArray(t.shape) && (t.dtype ?? 'string') === 'string') {
    if (!t.data.every((s) => typeof s === 'string')) throw typeError(`${what}: input ${i}: a string tensor's data must be an array of strings`);
    return { dtype: 'string', shape: Array.from(t.shape), data: Array.from(t.data) };
  }
  if (t == null || !ArrayBuffer.isView(t.data) || !Array.isArray(t.shape))
    throw typeError(`${what}: input ${i} must be { data: TypedArray, shape: number[], dtype? }`);
  const inferred = typedArrayDtypes.find(([C]) => t.data instanceof C)?.[1];
  const dt = t.dtype ?? inferred;
  if (typeof dt !== 'string') throw typeError(`${what}: input ${i} needs a dtype`);
  // Plain copies: C++ reads only objects the façade made (no user getters run from C++).
  return { dtype: dt, shape: Array.from(t.shape), data: new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength) };
}

export function encodeTensors(inputs, what) {
  if (!Array.isArray(inputs)) throw typeError(`${what}: inputs must be an array of tensors`);
  return inputs.map((t, i) => encodeTensor(t, what, i));
}

/**
 * {@link encodeTensors} for run(): an input may also be a sequence (an array of tensors, or
 * `{ sequence: [...], dtype }` for an empty one) or `null` (an empty optional).
 */
export function encodeValues(inputs, what) {
  if (!Array.isArray(inputs)) throw typeError(`${what}: inputs must be an array of tensors`);
  return inputs.map((v, i) => {
    if (v === null) return null;
    if (Array.isArray(v)) return encodeTensors(v, `${what}: input ${i}`);
    if (v != null && Array.isArray(v.sequence)) {
      if (v.dtype !== undefined && typeof v.dtype !== 'string') throw typeError(`${what}: input ${i}: dtype must be a string`);
      return { sequence: encodeTensors(v.sequence, `${what}: input ${i}`), dtype: v.dtype };
    }
    return encodeTensor(v, what, i);
  });
}

/** What run() returns for a value: a tensor, an array of tensors (a sequence), or null (an empty optional). */
export function valueFromWasm(v) {
  if (v.sequence !== undefined) return Array.from(v.sequence, tensorFromWasm);
  if (v.optional !== undefined) return v.optional === null ? null : valueFromWasm(v.optional);
  return tensorFromWasm(v);
}

export function tensorFromWasm(t) {
  if (t.dtype === 'string') return new OutputTensor('string', Array.from(t.shape), Array.from(t.strings));
  const C = dtypeArrays[t.dtype];
  const bytes = t.bytes;
  const data = C ? new C(bytes.buffer, bytes.byteOffset, bytes.byteLength / C.BYTES_PER_ELEMENT) : bytes;
  return new OutputTensor(t.dtype, Array.isArray(t.shape) ? t.shape : Array.from(t.shape), data);
}

/**
 * A tensor run() returns: `{ dtype, shape, data }`, plus onnxruntime's names for the same fields,
 * `dims` and `type`, as getters on the prototype (so the tensor still prints and compares as
 * { dtype, shape, data }): `new ort.Tensor(t.type, t.data, t.dims)`.
 */
export class OutputTensor {
  constructor(dtype, shape, data) {
    this.dtype = dtype;
    this.shape = shape;
    this.data = data;
  }
  get dims() {
    return this.shape;
  }
  get type() {
    return this.dtype;
  }
}

/**
 * A value that crossed a worker boundary (structured clone keeps `{ dtype, shape, data }` but not
 * the class): the same OutputTensor form run() returns; sequences and null as they are.
 */
export function reviveValue(v) {
  if (v === null || v === undefined) return v;
  if (Array.isArray(v)) return v.map(reviveValue);
  if (typeof v === 'object' && 'dtype' in v && 'shape' in v && 'data' in v) return new OutputTensor(v.dtype, v.shape, v.data);
  return v;
}
