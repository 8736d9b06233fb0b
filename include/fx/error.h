// fx::Error — the one exception type of the core. Every user error (misuse of the API, a malformed
// graph, a bad model) throws it with a `kind` the bindings carry across to JS as `FxError.kind`.
#pragma once

#include <stdexcept>
#include <string>

namespace fx {

/// What went wrong, coarse enough for a caller to branch on.
#define FX_ERROR_KINDS(X)                                                                       \
  X(Value, "ValueError")             /* a bad argument value (wrong opcode, bad name) */        \
  X(Type, "TypeError")               /* an Argument of the wrong kind was accessed */           \
  X(Index, "IndexError")             /* an index outside a tuple/list */                        \
  X(Key, "KeyError")                 /* a missing kwarg, meta key or attribute */               \
  X(Graph, "GraphError")             /* misuse of the graph: erase with users, foreign nodes */ \
  X(Lint, "LintError")               /* Graph::lint() found an ill-formed graph */              \
  X(Attribute, "AttributeError")     /* a module path that does not resolve */                  \
  X(StaleHandle, "StaleHandleError") /* a JS handle to an erased node or deleted graph */       \
  X(Trace, "TraceError")             /* symbolic tracing hit data-dependent control flow */     \
  X(Parse, "ParseError")             /* malformed input bytes (ONNX, protobuf) */               \
  X(Unsupported, "UnsupportedError") /* an op, dtype or feature we do not handle */             \
  X(Runtime, "RuntimeError")         /* execution failed */                                     \
  X(Resource, "ResourceError")       /* a size over fx::limits() or the memory available */     \
  X(Schema, "SchemaError")           /* a node that breaks its ONNX op schema */                \
  X(Internal, "InternalError")       /* a broken invariant: a bug in fxwasm */

enum class ErrorKind {
#define FX_ERROR_ENUM(name, str) name,
  FX_ERROR_KINDS(FX_ERROR_ENUM)
#undef FX_ERROR_ENUM
};

/// The stable string for `kind` ("GraphError", ...), used as `FxError.kind` in JS.
const char* error_kind_name(ErrorKind kind);

/// Thrown for every user-visible failure. `node()` names the node involved, if any.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message, std::string node = {})
      : std::runtime_error(message), kind_(kind), node_(std::move(node)) {}
  ErrorKind kind() const { return kind_; }
  const char* kind_name() const { return error_kind_name(kind_); }
  const std::string& node() const { return node_; }

 private:
  ErrorKind kind_;
  std::string node_;
};

/// Internal invariant check that throws (never aborts): a failure is a bug in fxwasm.
#define FX_CHECK(cond, msg)                                                                  \
  do {                                                                                       \
    if (!(cond))                                                                             \
      throw ::fx::Error(::fx::ErrorKind::Internal, std::string("internal error: ") + (msg)); \
  } while (0)

}  // namespace fx
