// Control flow and constants: If (runs the chosen body, a sub-GraphModule, on the values it
// captures) and Constant in its scalar/list forms (tensor-valued Constant nodes import as
// get_attr of a buffer and never reach the executor).
#include <cstring>

#include "exec/ops.h"
#include "fx/onnx.h"

namespace fx::exec {
namespace {

void if_op(OpCall& c) {
  const Value& cond = c.input(0);
  if (cond.numel() != 1) c.fail("the condition must have one element, it is " + cond.describe());
  const bool take_then = cond.to_f32()[0] != 0.0f;
  const char* attr = take_then ? "then_branch" : "else_branch";
  const Argument* branch = c.attrs.find(attr);
  if (!branch || !branch->is_node() || branch->to_node()->op() != Opcode::GetAttr || !c.module)
    c.fail(std::string("'") + attr + "' must be a get_attr of a sub-GraphModule");
  const std::string& path = branch->to_node()->target().str();
  auto body = std::dynamic_pointer_cast<const GraphModule>(c.module->get_submodule(path));
  if (!body) c.fail("'" + path + "' is not a GraphModule");
  // Inputs after the ONNX ones are the values the bodies capture, in the order of their
  // outer-scope placeholders.
  size_t first = 1;
  if (const Argument* k = c.node.meta().find(fx::onnx::meta::kNumInputs);
      k && k->kind() == Argument::Kind::Int)
    first = static_cast<size_t>(k->to_int());
  // Each body placeholder is an outer-scope name (meta "onnx_outer_scope"); the node lists the
  // names of its trailing args in meta "onnx_captures".
  const Argument* names = c.node.meta().find(fx::onnx::meta::kCaptures);
  auto captured = [&](const std::string& name) -> const Value& {
    if (names && names->is_sequence())
      for (size_t k = 0; k < names->elements().size(); ++k)
        if (names->elements()[k].kind() == Argument::Kind::String &&
            names->elements()[k].to_string() == name && first + k < c.inputs.size() &&
            c.inputs[first + k])
          return *c.inputs[first + k];
    c.fail("body '" + path + "' uses '" + name + "', which the node does not pass");
  };
  std::vector<Value> args;
  for (const Node* p : body->graph().nodes()) {
    if (p->op() != Opcode::Placeholder) continue;
    const Argument* outer = p->meta().find(fx::onnx::meta::kOuterScope);
    if (!outer || outer->kind() != Argument::Kind::String)
      c.fail("body '" + path + "' has an input '" + p->name() + "'; If bodies take none");
    args.push_back(captured(outer->to_string()));
  }
  c.outputs = run(*body, args);
}

// Constant with value_float(s)/value_int(s) (value= tensors are buffers after import).
void constant(OpCall& c) {
  if (const Argument* f = c.attrs.find("value_float")) {
    c.outputs.push_back(Value::scalar_f32(static_cast<float>(f->to_double())));
  } else if (const Argument* i = c.attrs.find("value_int")) {
    c.outputs.push_back(Value::from_i64({}, {i->to_int()}));
  } else if (const Argument* fs = c.attrs.find("value_floats"); fs && fs->is_sequence()) {
    std::vector<float> v;
    for (const Argument& e : fs->elements()) v.push_back(static_cast<float>(e.to_double()));
    c.outputs.push_back(Value::from_f32({static_cast<int64_t>(v.size())}, v));
  } else if (const Argument* is = c.attrs.find("value_ints"); is && is->is_sequence()) {
    std::vector<int64_t> v;
    for (const Argument& e : is->elements()) v.push_back(e.to_int());
    c.outputs.push_back(Value::from_i64({static_cast<int64_t>(v.size())}, v));
  } else if (const Argument* t = c.attrs.find("value"); t && t->is_node() && c.module) {
    const Tensor* tensor = c.module->get_tensor(t->to_node()->target().str());
    if (!tensor) c.fail("'value' does not name a tensor");
    c.outputs.push_back(Value::from_tensor(*tensor, "Constant value"));
  } else {
    c.unsupported(
        "a Constant without value_float(s)/value_int(s)/value (strings and sparse tensors)");
  }
}

}  // namespace

void register_control_ops() {
  register_builtin("onnx.If", if_op);
  register_builtin("onnx.Constant", constant);
}

}  // namespace fx::exec
