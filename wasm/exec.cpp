// wasm/exec.cpp — running a GraphModule on fxwasm's kernels (fx::exec) from JS; tensors cross as
// {dtype, shape, data} objects whose bytes are copied into (and out of) the wasm heap.
#include <emscripten/val.h>

#include <malloc.h>
#include <cstdint>
#include <string>
#include <vector>

#include "alloc_cache.h"
#include "codec.h"
#include "fx/exec.h"
#include "fx/exec/passes.h"
#include "fx/limits.h"
#include "fx/onnx.h"
#include "glue.h"
#include "handles.h"

namespace fxwasm {

namespace {

// The JS property names and functions a run's inputs and outputs cross by, made once (on the
// thread that calls into the module). val["name"], call<T>("name") and isArray() turn a C string
// into a JS string on every use, a byte at a time through the heap view, which in the threaded
// modules checks for memory growth on each byte: 30 % of a run of the zoo's MLP (42 us) in the
// threaded module went there.
struct JsKeys {
  val dtype = val("dtype"), shape = val("shape"), data = val("data"),
      byte_length = val("byteLength"), length = val("length"), sequence = val("sequence"),
      object = val("object"), outputs = val("outputs"), probes = val("probes"), node = val("node"),
      array = val::global("Array");
  // (view, source) => view.set(source): a typed array's bytes, or an array's numbers, copied
  // into a view of the heap; (dtype, shape, bytes) => a run's output, copied out (runtime.mjs).
  val copy_into = val::module_property("fxCopyInto"),
      raw_tensor = val::module_property("fxRawTensor");
};
const JsKeys& js() {
  static const JsKeys keys;
  return keys;
}

bool is_js_array(const val& v) { return v.instanceof (js().array); }

// A dtype's name as a JS string, made once per dtype.
const val& dtype_js(fx::Dtype dtype) {
  static std::vector<std::pair<fx::Dtype, val>> names;
  for (const auto& [d, name] : names)
    if (d == dtype) return name;
  names.emplace_back(dtype, val(std::string(fx::dtype_name(dtype))));
  return names.back().second;
}

// {dtype, shape, data} -> a tensor Value (value_from_js). `for_run`: the value is a run's input,
// dropped when the run ends, so its bytes can be the executor's (fx::exec::new_value: an arena
// range or a pooled buffer, not a new zero-filled vector each run).
fx::exec::Value tensor_from_js(const val& v, const std::string& where, bool for_run) {
  const JsKeys& k = js();
  if (!v.typeOf().strictlyEquals(k.object) || v.isNull() || is_js_array(v))
    throw Error(ErrorKind::Type, where + ": expected {dtype, shape, data}");
  const fx::Dtype dtype = fx::dtype_from_name(v[k.dtype].as<std::string>());
  std::vector<int64_t> shape;
  // One call for the whole shape (each val access is a trip into JS).
  const val js_dims = v[k.shape];
  std::vector<double> js_shape(js_dims[k.length].as<size_t>());
  k.copy_into(val(emscripten::typed_memory_view(js_shape.size(), js_shape.data())), js_dims);
  for (size_t i = 0; i < js_shape.size(); ++i) {
    const double d = js_shape[i];
    // (A double outside int64 would be undefined behaviour to convert.)
    if (!(d >= 0 && d <= 9007199254740992.0) || d != static_cast<double>(static_cast<int64_t>(d)))
      throw Error(ErrorKind::Value, where + ": shape[" + std::to_string(i) + "] is " +
                                        std::to_string(d) + ", not a non-negative integer");
    shape.push_back(static_cast<int64_t>(d));
  }
  if (dtype == fx::Dtype::String) {  // data: an array of JS strings, one per element
    const int64_t n = fx::checked_numel(shape, where);
    const val data = v[k.data];
    if (!is_js_array(data) || data[k.length].as<double>() != static_cast<double>(n))
      throw Error(ErrorKind::Value, where + ": a string tensor of " + std::to_string(n) +
                                        " elements needs an array of as many strings as data");
    auto strings = std::make_shared<std::vector<std::string>>();
    strings->reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const val s = data[static_cast<unsigned>(i)];
      if (!s.isString())
        throw Error(ErrorKind::Type, where + ": element " + std::to_string(i) +
                                         " of a string tensor is not a string");
      strings->push_back(s.as<std::string>());
    }
    return fx::exec::Value::from_strings(std::move(shape), std::move(strings));
  }
  // Sizes in checked 64-bit arithmetic, compared before allocating: a size_t product would
  // wrap in wasm32 ([2^30 + 1] float32 would need "4" bytes).
  const int64_t need = fx::checked_nbytes(dtype, shape, where);
  const val data = v[k.data];
  const double have = data[k.byte_length].as<double>();
  if (have != static_cast<double>(need))
    throw Error(ErrorKind::Value, where + ": " + fx::dtype_name(dtype) + " of shape " +
                                      std::to_string(shape.size()) + "-d needs " +
                                      std::to_string(need) + " bytes of data, got " +
                                      std::to_string(static_cast<int64_t>(have)));
  const auto nbytes = static_cast<size_t>(need);
  // (Every byte is written from `data` below. A run's input of 600 KB was malloc'd and zeroed
  // first: 0.1 ms of a 13 ms MobileNetV2 run in wasm at 2 threads.)
  fx::exec::Value out =
      for_run ? fx::exec::new_value(dtype, shape) : fx::exec::Value::zeros(dtype, shape);
  // `data` is the Uint8Array over exactly these bytes that the façade made (encodeTensor).
  k.copy_into(val(emscripten::typed_memory_view(nbytes, out.mutable_data<uint8_t>())), data);
  return out;
}

val tensor_to_js(const fx::exec::Value& v) {
  if (v.dtype() != fx::Dtype::String) {
    // One call into JS (runtime.mjs's fxRawTensor copies the views): a run's outputs cross
    // without a trip per field and dimension.
    static std::vector<double> dims;
    dims.assign(v.shape().begin(), v.shape().end());
    return js().raw_tensor(dtype_js(v.dtype()),
                           val(emscripten::typed_memory_view(dims.size(), dims.data())),
                           val(emscripten::typed_memory_view(v.nbytes(), v.data<uint8_t>())));
  }
  val o = val::object();
  o.set("dtype", std::string(fx::dtype_name(v.dtype())));
  val shape = val::array();
  for (int64_t d : v.shape()) shape.call<void>("push", static_cast<double>(d));
  o.set("shape", shape);
  if (v.dtype() == fx::Dtype::String) {  // an array of JS strings (UTF-8 decoded)
    val strings = val::array();
    for (const std::string& s : v.strings()) strings.call<void>("push", val(s));
    o.set("strings", strings);
    return o;
  }
  o.set("bytes",
        val(emscripten::typed_memory_view(v.nbytes(), v.data<uint8_t>())).call<val>("slice"));
  return o;
}

}  // namespace

// A tensor {dtype, shape, data (a typed array)}, a sequence [tensor, ...] (an empty one may say
// its element type as {sequence: [], dtype}) or null (an empty optional) -> Value; the bytes
// are copied into the wasm heap.
fx::exec::Value value_from_js(const val& v, size_t index, bool for_run) {
  const std::string where = "input " + std::to_string(index);
  if (v.isNull()) return fx::exec::Value::none(fx::Dtype::Float32);
  const JsKeys& k = js();
  if (is_js_array(v) || (v.typeOf().strictlyEquals(k.object) && is_js_array(v[k.sequence]))) {
    const val items = is_js_array(v) ? v : v[k.sequence];
    std::vector<fx::exec::Value> elements;
    const unsigned n = items[k.length].as<unsigned>();
    for (unsigned i = 0; i < n; ++i)
      elements.push_back(
          tensor_from_js(items[i], where + " element " + std::to_string(i), for_run));
    const val dt = v[k.dtype];
    const fx::Dtype dtype = dt.isString() ? fx::dtype_from_name(dt.as<std::string>())
                            : n > 0       ? elements[0].dtype()
                                          : fx::Dtype::Float32;
    return fx::exec::Value::sequence(dtype, std::move(elements));
  }
  return tensor_from_js(v, where, for_run);
}

std::vector<fx::exec::Value> values_from_js(const val& inputs, bool for_run) {
  std::vector<fx::exec::Value> out;
  const unsigned n = inputs[js().length].as<unsigned>();
  for (unsigned i = 0; i < n; ++i) out.push_back(value_from_js(inputs[i], i, for_run));
  return out;
}

// Value -> {dtype, shape, bytes (a Uint8Array copy)} (the facade makes the typed array); a
// sequence -> {sequence: [tensor...], dtype}; an optional -> {optional: value or null, dtype}.
val value_to_js(const fx::exec::Value& v) {
  switch (v.kind()) {
    case fx::exec::ValueKind::Tensor:
      return tensor_to_js(v);
    case fx::exec::ValueKind::Sequence: {
      val o = val::object();
      val items = val::array();
      for (const fx::exec::Value& e : v.elements()) items.call<void>("push", tensor_to_js(e));
      o.set("sequence", items);
      o.set("dtype", std::string(fx::dtype_name(v.dtype())));
      return o;
    }
    case fx::exec::ValueKind::Optional: {
      val o = val::object();
      o.set("optional", v.has_element() ? value_to_js(v.elements()[0]) : val::null());
      o.set("dtype", std::string(fx::dtype_name(v.dtype())));
      return o;
    }
  }
  return val::null();
}

// The run's inputs, each an optional where the graph input's ONNX type says so (JS passes the
// value itself, or null).
std::vector<fx::exec::Value> run_inputs(const fx::GraphModule& gm, const val& inputs) {
  std::vector<fx::exec::Value> values = values_from_js(inputs, /*for_run=*/true);
  size_t i = 0;
  for (const fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::Opcode::Placeholder) continue;
    if (i >= values.size()) break;
    fx::exec::Value& v = values[i++];
    if (v.kind() != fx::exec::ValueKind::Optional &&
        fx::onnx::value_kind(n->meta().find(fx::onnx::kType)) ==
            fx::onnx::DataValue::Kind::Optional)
      v = fx::exec::Value::some(std::move(v));
  }
  return values;
}

val gm_run(double id, val inputs, val probe, bool profile) {
  return guarded([&] {
    fx::exec::RunOptions opts;
    opts.profile = profile;
    const JsKeys& k = js();
    const unsigned np = probe[k.length].as<unsigned>();
    for (unsigned i = 0; i < np; ++i) opts.probe.push_back(probe[i].as<std::string>());
    GmEntry& e = gm_entry(id);
    // The GEMM weights are held once, packed, from the first run of each graph version on (not
    // at import: a model only inspected or converted never pays for packing).
    if (e.prepacked_version != e.gm->graph().version()) {
      fx::exec::prepack_weights(*e.gm);
      e.prepacked_version = e.gm->graph().version();
    }
    const fx::exec::RunResult r = fx::exec::run(*e.gm, run_inputs(*e.gm, inputs), opts);
    val out = val::object();
    val outputs = val::array();
    for (size_t i = 0; i < r.outputs.size(); ++i)
      outputs.set(static_cast<unsigned>(i), value_to_js(r.outputs[i]));
    val probes = val::array();
    unsigned at = 0;
    for (const auto& [name, v] : r.probes) {
      val p = value_to_js(v);
      p.set(k.node, name);
      probes.set(at++, p);
    }
    out.set(k.outputs, outputs);
    out.set(k.probes, probes);
    if (profile) {
      // Three fields in all, not an object per op built through emval one property at a time:
      // a profiled MobileNetV2 run's time outside its ops 0.78 -> 0.62 ms (threaded module, 2
      // threads, medians of 40). The façade splits the names at newlines; a name holding one
      // (node names are identifiers, but a target is any string) gets the objects.
      bool plain = true;
      for (const fx::exec::OpTime& t : r.profile)
        plain =
            plain && t.node.find('\n') == std::string::npos && t.op.find('\n') == std::string::npos;
      if (plain) {
        std::string nodes, ops;
        std::vector<double> ms;
        for (const fx::exec::OpTime& t : r.profile) {
          (nodes += t.node) += '\n';
          (ops += t.op) += '\n';
          ms.push_back(t.microseconds / 1000.0);
        }
        out.set("profileNodes", nodes);
        out.set("profileOps", ops);
        out.set("profileMs",
                val(emscripten::typed_memory_view(ms.size(), ms.data())).call<val>("slice"));
      } else {
        val ops = val::array();
        for (const fx::exec::OpTime& t : r.profile) {
          val o = val::object();
          o.set("node", t.node);
          o.set("op", t.op);
          o.set("ms", t.microseconds / 1000.0);
          ops.call<void>("push", o);
        }
        out.set("profile", ops);
      }
    }
    return out;
  });
}

// One op call outside the module's graph, for the JS Interpreter: `tmp_gid` is a scratch Graph
// that JS made (and deletes) holding a placeholder per tensor argument, in `inputs` order, and a
// get_attr node per module attribute argument; `args`/`kwargs` are encoded against it. The call
// (target, args, kwargs) is appended there, with the meta of node (meta_gid, meta_nid) when
// meta_gid >= 0 (an ONNX node's captures, domain, output names) and `num_outputs` outputs, and
// runs as a module over `gm`'s attributes and meta (bodies, opset). Returns the outputs.
val gm_call_op(double id, double tmp_gid, std::string target, std::string args, std::string kwargs,
               val inputs, double num_outputs, double meta_gid, double meta_nid) {
  return guarded([&] {
    const fx::GraphModule& gm = *gm_entry(id).gm;
    fx::Graph& g = *graph_entry(tmp_gid).graph;
    std::vector<fx::Argument> a = decode_args(args, &g, "callFunction args");
    fx::Kwargs k = decode_kwargs(kwargs, &g, "callFunction kwargs");
    fx::Node* call = g.call_function(fx::fn(target), std::move(a), std::move(k));
    if (meta_gid >= 0) call->meta() = node_at(meta_gid, meta_nid)->meta();
    const int64_t n_out = static_cast<int64_t>(num_outputs);
    if (n_out < 1 || n_out > 4096)
      throw Error(ErrorKind::Value, "callFunction: numOutputs must be 1..4096");
    if (n_out == 1) {
      g.output(fx::Argument(call));
    } else {
      fx::Argument::Items names, outs;
      for (int64_t i = 0; i < n_out; ++i) {
        names.emplace_back("output_" + std::to_string(i));
        outs.emplace_back(g.call_function(fx::fn("operator.getitem"), {fx::Argument(call), i}));
      }
      if (!call->meta().find(fx::onnx::kOutputs))
        call->meta().set(fx::onnx::kOutputs, fx::Argument::list(std::move(names)));
      g.output(fx::Argument::tuple(std::move(outs)));
    }
    fx::GraphModule one(&gm, g.clone(), "CallFunction");
    one.meta() = gm.meta();
    val out = val::array();
    for (const auto& v : fx::exec::run(one, values_from_js(inputs, /*for_run=*/true)))
      out.call<void>("push", value_to_js(v));
    return out;
  });
}

val gm_coverage(double id) {
  return guarded([&] {
    return objects_to_js(fx::exec::coverage(*gm_entry(id).gm),
                         [](val& o, const fx::exec::CoverageGap& g) {
                           o.set("node", g.node);
                           o.set("target", g.target);
                           o.set("reason", g.reason);
                         });
  });
}

void gm_shape_prop(double id, val inputs) {
  guarded([&] { fx::exec::shape_prop(*gm_entry(id).gm, values_from_js(inputs)); });
}

// fx::exec::infer_shapes with `shapes` ({inputName: [number | string | null, ...]} or null);
// returns {typed, total, gaps: [{node, target, reason}]}.
val gm_infer_shapes(double id, val shapes) {
  return guarded([&] {
    fx::exec::ShapeInferOptions o;
    if (!shapes.isNull() && !shapes.isUndefined()) {
      if (shapes.typeOf().as<std::string>() != "object")
        throw Error(ErrorKind::Value, "inferShapes: inputShapes must be an object");
      const val keys = val::global("Object").call<val>("keys", shapes);
      const size_t n = keys["length"].as<size_t>();
      for (size_t i = 0; i < n; ++i) {
        const std::string name = keys[i].as<std::string>();
        const val dims = shapes[name];
        const std::string where = "inferShapes: inputShapes['" + name + "']";
        if (!val::global("Array").call<bool>("isArray", dims))
          throw Error(ErrorKind::Value, where + " must be an array of dims");
        std::vector<fx::Argument>& out = o.input_shapes[name];
        const size_t rank = dims["length"].as<size_t>();
        for (size_t k = 0; k < rank; ++k) {
          const val d = dims[k];
          const std::string type = d.typeOf().as<std::string>();
          if (d.isNull()) {
            out.emplace_back();
          } else if (type == "string") {
            out.emplace_back(d.as<std::string>());
          } else if (type == "number" && d.as<double>() >= 0 &&
                     d.as<double>() <= 9007199254740991.0 &&
                     d.as<double>() == static_cast<double>(static_cast<int64_t>(d.as<double>()))) {
            out.emplace_back(static_cast<long long>(d.as<double>()));
          } else {
            throw Error(ErrorKind::Value, where + "[" + std::to_string(k) +
                                              "] must be a size (an integer >= 0), a name or null");
          }
        }
      }
    }
    const fx::exec::ShapeInferResult r = fx::exec::infer_shapes(*gm_entry(id).gm, o);
    val gaps = objects_to_js(r.gaps, [](val& o, const fx::exec::ShapeInferGap& g) {
      o.set("node", g.node);
      o.set("target", g.target);
      o.set("reason", g.reason);
    });
    val out = val::object();
    out.set("typed", static_cast<double>(r.typed));
    out.set("total", static_cast<double>(r.total));
    out.set("gaps", gaps);
    return out;
  });
}

// {inputs, outputs}: "tensor", "sequence" or "optional" for each graph input and output, from
// their ONNX types (what valueFromONNX needs to read their test data).
val gm_value_kinds(double id) {
  return guarded([&] {
    const fx::GraphModule& gm = *gm_entry(id).gm;
    auto name = [](fx::onnx::DataValue::Kind k) {
      return std::string(k == fx::onnx::DataValue::Kind::Tensor     ? "tensor"
                         : k == fx::onnx::DataValue::Kind::Sequence ? "sequence"
                                                                    : "optional");
    };
    val inputs = val::array(), outputs = val::array();
    for (const fx::Node* n : gm.graph().nodes()) {
      if (n->op() == fx::Opcode::Placeholder)
        inputs.call<void>("push", name(fx::onnx::value_kind(n->meta().find(fx::onnx::kType))));
      if (n->op() != fx::Opcode::Output) continue;
      const fx::Argument a = n->args().empty() ? fx::Argument() : n->args()[0];
      const size_t count = a.is_sequence() ? a.elements().size() : 1;
      const fx::Argument* types = n->meta().find(fx::onnx::kOutputTypes);
      for (size_t i = 0; i < count; ++i)
        outputs.call<void>("push", name(fx::onnx::value_kind(types && types->is_sequence() &&
                                                                     i < types->elements().size()
                                                                 ? &types->elements()[i]
                                                                 : nullptr)));
    }
    val o = val::object();
    o.set("inputs", inputs);
    o.set("outputs", outputs);
    return o;
  });
}

double heap_used() { return static_cast<double>(mallinfo().uordblks); }

void release_cached_memory() {
  fx::exec::release_cached_memory();
  release_thread_alloc_cache();
}

double set_num_threads(double n) {
  fx::exec::set_num_threads(static_cast<int>(n));
  return fx::exec::num_threads();
}

double num_threads() { return fx::exec::num_threads(); }

}  // namespace fxwasm
