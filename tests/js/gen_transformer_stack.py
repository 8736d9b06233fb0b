# A ViT-like transformer stack as ONNX, for the playground's main-thread budget test: N encoder
# blocks (LayerNormalization, attention with MatMul/Softmax, an erf-GELU MLP, residual Adds), 33
# ONNX nodes each, small widths so the file stays small. Usage: gen_transformer_stack.py OUT.onnx N
# Prints "<onnx nodes> <initializers>".
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
blocks = int(sys.argv[2]); d = 16; heads = 2; rng = np.random.default_rng(0)
nodes, inits = [], []
def w(name, *shape):
    inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)); return name
def c(name, arr):
    inits.append(numpy_helper.from_array(np.array(arr), name)); return name
def op(t, ins, out, **kw):
    nodes.append(helper.make_node(t, ins, [out], name=out, **kw)); return out
c('shape_split', np.array([1, 8, heads, d // heads], dtype=np.int64)); c('shape_merge', np.array([1, 8, d], dtype=np.int64))
c('scale', np.array(np.sqrt(d // heads), dtype=np.float32)); c('half', np.array(0.5, dtype=np.float32)); c('one', np.array(1.0, dtype=np.float32)); c('rsqrt2', np.array(1 / np.sqrt(2), dtype=np.float32))
x = 'x'
for b in range(blocks):
    p = f'encoder.layers.{b}'
    ln = op('LayerNormalization', [x, w(f'{p}.ln_1.weight', d), w(f'{p}.ln_1.bias', d)], f'{p}.ln_1', axis=-1)
    qkv = []
    for n in 'qkv':
        m = op('MatMul', [ln, w(f'{p}.attn.{n}.weight', d, d)], f'{p}.attn.{n}.matmul')
        a = op('Add', [m, w(f'{p}.attn.{n}.bias', d)], f'{p}.attn.{n}.add')
        r = op('Reshape', [a, 'shape_split'], f'{p}.attn.{n}.reshape')
        qkv.append(op('Transpose', [r], f'{p}.attn.{n}.transpose', perm=[0, 2, 3, 1] if n == 'k' else [0, 2, 1, 3]))
    s = op('MatMul', [qkv[0], qkv[1]], f'{p}.attn.scores')
    s = op('Div', [s, 'scale'], f'{p}.attn.scaled')
    s = op('Softmax', [s], f'{p}.attn.softmax', axis=-1)
    o = op('MatMul', [s, qkv[2]], f'{p}.attn.context')
    o = op('Transpose', [o], f'{p}.attn.merge_t', perm=[0, 2, 1, 3])
    o = op('Reshape', [o, 'shape_merge'], f'{p}.attn.merge')
    o = op('MatMul', [o, w(f'{p}.attn.out.weight', d, d)], f'{p}.attn.out.matmul')
    o = op('Add', [o, w(f'{p}.attn.out.bias', d)], f'{p}.attn.out.add')
    x1 = op('Add', [x, o], f'{p}.residual_1')
    ln2 = op('LayerNormalization', [x1, w(f'{p}.ln_2.weight', d), w(f'{p}.ln_2.bias', d)], f'{p}.ln_2', axis=-1)
    h = op('MatMul', [ln2, w(f'{p}.mlp.0.weight', d, 2 * d)], f'{p}.mlp.0.matmul')
    h = op('Add', [h, w(f'{p}.mlp.0.bias', 2 * d)], f'{p}.mlp.0.add')
    e = op('Mul', [h, 'rsqrt2'], f'{p}.mlp.gelu.scale')
    e = op('Erf', [e], f'{p}.mlp.gelu.erf')
    e = op('Add', [e, 'one'], f'{p}.mlp.gelu.add')
    e = op('Mul', [h, e], f'{p}.mlp.gelu.mul')
    h = op('Mul', [e, 'half'], f'{p}.mlp.gelu.half')
    h = op('MatMul', [h, w(f'{p}.mlp.3.weight', 2 * d, d)], f'{p}.mlp.3.matmul')
    h = op('Add', [h, w(f'{p}.mlp.3.bias', d)], f'{p}.mlp.3.add')
    x = op('Add', [x1, h], f'{p}.residual_2')
g = helper.make_graph(nodes, 'vit_like', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 8, d])],
                      [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 8, d])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)], producer_name='playground-test')
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
print(len(nodes), len(inits))
