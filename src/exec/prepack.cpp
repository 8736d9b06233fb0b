// prepack_weights: a model's GEMM weights held once, in the layout the GEMM reads, instead of
// twice (the module's tensor, plus the packed copy the first run makes and keeps). The module's
// tensor keeps its dtype and shape; its bytes become ExternalData read back from the packed copy
// (PackedOperand::unpack_right, bit for bit), so export, inspection and passes still see them.
#include <map>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "exec/ops.h"

namespace fx::exec {

namespace {

// The reader of a tensor that gave way to its packed copy; packed_weight_of() recognises it
// (std::function::target).
struct PackedWeightReader {
  std::shared_ptr<const PackedWeight> weight;
  Bytes operator()() const { return weight->unpack(); }
};

bool is_call_to(const Node& n, const char* qualname) {
  return n.op() == Opcode::CallFunction && n.target().function().qualname() == qualname;
}

// Gemm's transB as the executor reads it (0 when absent); -1 when it is not an int.
int64_t gemm_trans_b(const Node& gemm) {
  const Argument* a = gemm.kwargs().find("transB");
  if (!a) return 0;
  if (a->kind() != Argument::Kind::Int && a->kind() != Argument::Kind::Bool) return -1;
  return a->to_int() != 0 ? 1 : 0;
}

// The transB every user of the get_attr nodes `readers` agrees on (0 for MatMul), or -1 if there
// is none or some user takes a node other than as the right operand of a MatMul or Gemm.
int64_t common_trans(const std::vector<const Node*>& readers) {
  int64_t trans = -1;  // no user yet
  for (const Node* n : readers)
    for (const Node* u : n->users()) {
      const auto& args = u->args();
      int64_t t;
      if (is_call_to(*u, "onnx.MatMul") && args.size() == 2)
        t = 0;
      else if (is_call_to(*u, "onnx.Gemm") && (args.size() == 2 || args.size() == 3))
        t = gemm_trans_b(*u);
      else
        return -1;
      // Only as B: not as A (x @ x) nor as Gemm's C.
      for (size_t i = 0; i < args.size(); ++i)
        if (args[i].is_node() && args[i].to_node() == n && i != 1) return -1;
      if (t < 0 || (trans >= 0 && t != trans)) return -1;
      trans = t;
    }
  return trans;
}

}  // namespace

Bytes PackedWeight::unpack() const {
  const int64_t K = operand->rows(), N = operand->cols();
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(K * N) * sizeof(float));
  operand->unpack_right(trans, reinterpret_cast<float*>(bytes->data()), trans ? K : N);
  return bytes;
}

std::shared_ptr<const PackedWeight> packed_weight_of(const Tensor& t) {
  if (t.data || !t.external) return nullptr;
  const auto* r = t.external->read.target<PackedWeightReader>();
  return r ? r->weight : nullptr;
}

bool takes_packed_weight(const Node& n, const PackedWeight& w) {
  return common_trans({&n}) == (w.trans ? 1 : 0);
}

size_t prepack_weights(GraphModule& root) {
  size_t packed = 0;
  [[maybe_unused]] size_t freed = 0;  // plain bytes given up since the last trim (glibc)
  // Every GraphModule of the tree (the root, and If/Loop/Scan bodies) with the nodes that read
  // each of its tensors.
  for (const auto& [prefix, m] : root.named_modules()) {
    auto* gm = dynamic_cast<GraphModule*>(const_cast<Module*>(m));
    if (!gm) continue;
    std::map<std::string, std::vector<const Node*>> readers;
    for (const Node* n : gm->graph().nodes())
      if (n->op() == Opcode::GetAttr) readers[n->target().str()].push_back(n);
    for (const auto& [target, nodes] : readers) {
      const Tensor* t = gm->get_tensor(target);
      if (!t || t->dtype != Dtype::Float32 || t->shape.size() != 2 || t->shape[0] <= 0 ||
          t->shape[1] <= 0 || !t->data || t->data->size() != t->nbytes())
        continue;
      const int64_t trans = common_trans(nodes);
      if (trans < 0) continue;
      auto w = std::make_shared<PackedWeight>();
      w->trans = trans != 0;
      const int64_t K = w->trans ? t->shape[1] : t->shape[0];
      const int64_t N = w->trans ? t->shape[0] : t->shape[1];
      w->operand = std::make_shared<const kernels::PackedOperand>(kernels::PackedOperand::right(
          w->trans, K, N, reinterpret_cast<const float*>(t->data->data()), t->shape[1]));

      const size_t t_bytes = t->nbytes();
      Tensor replaced = *t;
      replaced.data = nullptr;
      auto ext = std::make_shared<ExternalData>();
      ext->location = "<packed>/" + target;
      ext->length = static_cast<int64_t>(t_bytes);
      ext->in_memory = true;
      ext->read = PackedWeightReader{std::move(w)};
      replaced.external = std::move(ext);
      const size_t dot = target.rfind('.');
      const std::string owner = dot == std::string::npos ? std::string() : target.substr(0, dot);
      const std::string name = dot == std::string::npos ? target : target.substr(dot + 1);
      const std::shared_ptr<Module> holder = gm->get_submodule(owner);
      // The plain bytes go as this assignment drops the module's reference (the last one, unless
      // the caller holds a copy of the tensor).
      if (holder->attr_kind(name) == 'p')
        holder->register_parameter(name, std::move(replaced));
      else
        holder->register_buffer(name, std::move(replaced));
      ++packed;
      freed += t_bytes;
#if defined(__GLIBC__)
      // glibc's dynamic mmap threshold (raised by the import's frees) puts these buffers in the
      // heap, where the freed plain bytes are holes the packed copies do not fit: hand their
      // pages back every 32 MB (a 346 MB ViT-B/16 peaked at 1.50x its file without, ~1.07x with).
      if (freed >= (size_t{32} << 20)) {
        malloc_trim(0);
        freed = 0;
      }
#endif
    }
  }
#if defined(__GLIBC__)
  if (freed) malloc_trim(0);
#endif
  return packed;
}

}  // namespace fx::exec
