// Data derived from constant inputs (packed weights), computed on a node's first run and reused
// by later runs while the constant's buffer lives.
#include <algorithm>
#include <unordered_map>

#include "exec/ops.h"

namespace fx::exec {

namespace {

struct Entry {
  std::weak_ptr<const std::vector<uint8_t>> buffer;  // the constant it was derived from
  std::vector<int64_t> key;
  std::shared_ptr<const void> data;
};

struct ConstantCache {
  // Buffer address -> what was derived from that buffer (a few entries each: groups, views).
  std::unordered_map<const void*, std::vector<Entry>> entries;

  // Drops entries whose buffer has died (its address may be reused by a new buffer).
  void sweep() {
    for (auto it = entries.begin(); it != entries.end();) {
      auto& list = it->second;
      list.erase(std::remove_if(list.begin(), list.end(),
                                [](const Entry& e) { return e.buffer.expired(); }),
                 list.end());
      it = list.empty() ? entries.erase(it) : std::next(it);
    }
  }
};

ConstantCache& cache() {
  thread_local ConstantCache c;
  return c;
}

}  // namespace

const Node* constant_source(const Argument& a) {
  const Node* n = a.is_node() ? a.to_node() : nullptr;
  for (int hops = 0; n && hops < 16; ++hops) {
    if (n->op() == Opcode::GetAttr) return n;
    if (n->op() != Opcode::CallFunction || n->args().size() != 1 || !n->args()[0].is_node() ||
        n->target().function().qualname() != "onnx.Identity")
      return nullptr;
    n = n->args()[0].to_node();
  }
  return nullptr;
}

const Tensor* constant_tensor(const GraphModule& gm, const Argument& a) {
  const Node* src = constant_source(a);
  const Tensor* t = src ? gm.get_tensor(src->target().str()) : nullptr;
  return t && t->data && t->data->size() == t->nbytes() ? t : nullptr;
}

bool is_constant_input(const OpCall& c, size_t i) {
  if (i >= c.node.args().size() || !c.has_input(i)) return false;
  return constant_source(c.node.args()[i]) != nullptr;
}

std::shared_ptr<const void> derived_from_constant(
    const Value& constant, const std::vector<int64_t>& key,
    const std::function<std::shared_ptr<const void>()>& derive) {
  const std::shared_ptr<const std::vector<uint8_t>>& buf = constant.buffer();
  if (!buf) return derive();
  ConstantCache& c = cache();
  std::vector<Entry>& list = c.entries[buf.get()];
  for (Entry& e : list) {
    if (e.key != key) continue;
    if (e.buffer.lock() == buf) return e.data;
    e = Entry{};  // a dead buffer's entry at a reused address
  }
  list.erase(std::remove_if(list.begin(), list.end(), [](const Entry& e) { return !e.data; }),
             list.end());
  Entry e{buf, key, derive()};
  list.push_back(e);
  // Entries of dead buffers (a model deleted since) go as soon as something new is packed, so
  // their packed copies do not outlive the model by long; a sweep is a walk over a few hundred
  // entries at most, once per newly packed weight.
  c.sweep();
  return e.data;
}

void release_constant_cache() { cache().entries.clear(); }

void release_dead_weights() { cache().sweep(); }

std::shared_ptr<const kernels::PackedOperand> packed_right_operand(const OpCall& c, size_t i,
                                                                   bool trans, int64_t K, int64_t N,
                                                                   int64_t ld) {
  if (!is_constant_input(c, i)) return nullptr;
  const Value& b = c.input(i);
  return std::static_pointer_cast<const kernels::PackedOperand>(
      derived_from_constant(b, {2, trans, K, N, ld}, [&] {
        return std::make_shared<const kernels::PackedOperand>(
            kernels::PackedOperand::right(trans, K, N, b.data<float>(), ld));
      }));
}

}  // namespace fx::exec
