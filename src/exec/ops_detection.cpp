// Detection post-processing ONNX ops: NonMaxSuppression.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "exec/ops.h"

namespace fx::exec {

namespace {

struct Box {
  float y1, x1, y2, x2;  // corners, y1 <= y2 and x1 <= x2
};

// Box `i` of a [.., 4] float list in either encoding, as ordered corners.
Box box_at(const float* b, bool center) {
  if (center) {
    const float xc = b[0], yc = b[1], w = b[2], h = b[3];
    return {yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// Whether a and b overlap by more than `threshold` (intersection over union), as onnxruntime:
// boxes without area never suppress.
bool suppresses(const Box& a, const Box& b, float threshold) {
  const float area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  if (area_a <= 0 || area_b <= 0) return false;
  const float iy1 = std::max(a.y1, b.y1), ix1 = std::max(a.x1, b.x1);
  const float iy2 = std::min(a.y2, b.y2), ix2 = std::min(a.x2, b.x2);
  const float inter = std::max(0.0f, iy2 - iy1) * std::max(0.0f, ix2 - ix1);
  if (inter <= 0) return false;
  return inter / (area_a + area_b - inter) > threshold;
}

void non_max_suppression(OpCall& c) {
  const Value& boxes = c.input(0);
  const Value& scores = c.input(1);
  need_f32(c, boxes, "NonMaxSuppression boxes");
  need_f32(c, scores, "NonMaxSuppression scores");
  if (boxes.shape().size() != 3 || boxes.shape()[2] != 4)
    c.fail("boxes must be (batches, spatial_dimension, 4)");
  if (scores.shape().size() != 3 || scores.shape()[0] != boxes.shape()[0] ||
      scores.shape()[2] != boxes.shape()[1])
    c.fail("scores must be (batches, classes, spatial_dimension) matching boxes");
  const int64_t max_out = c.has_input(2) && c.input(2).numel() ? c.input(2).to_i64()[0] : 0;
  const float iou = c.has_input(3) && c.input(3).numel() ? c.input(3).to_f32()[0] : 0.0f;
  const bool has_score = c.has_input(4) && c.input(4).numel();
  const float score_min = has_score ? c.input(4).to_f32()[0] : 0.0f;
  const int64_t center = c.attr_int("center_point_box", 0);
  if (center != 0 && center != 1) c.fail("center_point_box must be 0 or 1");
  if (iou < 0 || iou > 1) c.fail("iou_threshold must be in [0, 1]");
  const int64_t B = boxes.shape()[0], S = boxes.shape()[1], C = scores.shape()[1];
  std::vector<int64_t> out;
  std::vector<int64_t> cand;
  std::vector<Box> kept;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < C && max_out > 0; ++k) {
      const float* sc = scores.data<float>() + (b * C + k) * S;
      cand.clear();
      for (int64_t i = 0; i < S; ++i)
        if (!has_score || sc[i] > score_min) cand.push_back(i);
      // Highest score first; equal scores keep the lower index first.
      std::stable_sort(cand.begin(), cand.end(),
                       [&](int64_t x, int64_t y) { return sc[x] > sc[y]; });
      kept.clear();
      for (int64_t i : cand) {
        const Box bx = box_at(boxes.data<float>() + (b * S + i) * 4, center != 0);
        bool drop = false;
        for (const Box& k2 : kept)
          if (suppresses(k2, bx, iou)) {
            drop = true;
            break;
          }
        if (drop) continue;
        kept.push_back(bx);
        out.insert(out.end(), {b, k, i});
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
      }
    }
  c.outputs.push_back(Value::from_i64({static_cast<int64_t>(out.size() / 3), 3}, out));
}

}  // namespace

void register_detection_ops() { register_builtin("onnx.NonMaxSuppression", non_max_suppression); }

}  // namespace fx::exec
