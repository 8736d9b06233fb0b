// wasm/limits.cpp — fx::Limits for JS: init({limits}), setLimits(), limits().
#include "fx/limits.h"
#include "glue.h"
#include "handles.h"

namespace fxwasm {

namespace {
// A JS number of bytes or elements: a non-negative integer (0 or undefined: the default).
int64_t limit_from_js(const val& v, const char* name) {
  if (v.isUndefined() || v.isNull()) return 0;
  if (v.typeOf().as<std::string>() != "number")
    throw Error(ErrorKind::Type, std::string("limits.") + name + " must be a number");
  const double d = v.as<double>();
  if (!(d >= 0 && d <= 9007199254740992.0) || d != static_cast<double>(static_cast<int64_t>(d)))
    throw Error(ErrorKind::Value, std::string("limits.") + name +
                                      " must be a non-negative integer, got " + std::to_string(d));
  return static_cast<int64_t>(d);
}
}  // namespace

void set_limits(val limits) {
  guarded([&] {
    if (limits.typeOf().as<std::string>() != "object" || limits.isNull())
      throw Error(
          ErrorKind::Type,
          "setLimits: expected {maxTensorBytes, maxRunBytes, maxElements, maxLoopIterations}");
    fx::Limits l;
    l.max_tensor_bytes = limit_from_js(limits["maxTensorBytes"], "maxTensorBytes");
    l.max_run_bytes = limit_from_js(limits["maxRunBytes"], "maxRunBytes");
    l.max_elements = limit_from_js(limits["maxElements"], "maxElements");
    l.max_loop_iterations = limit_from_js(limits["maxLoopIterations"], "maxLoopIterations");
    fx::set_limits(l);
  });
}

val get_limits() {
  return guarded([&] {
    const fx::Limits l = fx::limits();
    val o = val::object();
    o.set("maxTensorBytes", static_cast<double>(l.max_tensor_bytes));
    o.set("maxRunBytes", static_cast<double>(l.max_run_bytes));
    o.set("maxElements", static_cast<double>(l.max_elements));
    o.set("maxLoopIterations", static_cast<double>(l.max_loop_iterations));
    return o;
  });
}

}  // namespace fxwasm
