// Layout strings (parse_layout, resolve_layout, stage_layer_counts): any text gives a Layout or
// an invalid-input error naming the key; an accepted layout resolves against a model's
// constraints (Llama-3-70B-like: 80 layers, 64 heads, 8 KV heads; and an 8-expert MoE) on GPU
// counts the input picks, and splits the layers into stages, without dividing by zero or
// overflowing.
#include <string>

#include "core/layout.h"
#include "fuzz/fuzz_util.h"

SCALEPLAN_FUZZ_TARGET(layout) {
  using namespace scaleplan;
  // The first byte picks the GPU count (a power of two or a product with 3, 5, 7); the rest is
  // the layout string.
  int64_t gpus = 1;
  if (size > 0) {
    const int k = data[0];
    gpus = (int64_t{1} << (k % 24)) * (k & 0x40 ? 3 : 1) * (k & 0x80 ? 5 : 1);
    ++data;
    --size;
  }
  const std::string_view text = fuzz::as_text(data, size);
  (void)layout_gives(text, "tp");
  auto l = parse_layout(text);
  fuzz::check_contract(l.status(), "parse_layout");
  if (!l) return 0;
  (void)format_layout(*l);
  for (const LayoutConstraints& c :
       {LayoutConstraints{80, 64, 8, 0, 8192, false},
        LayoutConstraints{61, 128, 128, 8, 4096, true}, LayoutConstraints{1, 1, 1, 0, 1, false}}) {
    auto r = resolve_layout(*l, c, gpus);
    fuzz::check_contract(r.status(), "resolve_layout");
    if (!r) continue;
    auto stages = stage_layer_counts(*r, c.num_layers);
    fuzz::check_contract(stages.status(), "stage_layer_counts");
    auto again = parse_layout(format_layout(*r));
    if (!again) fuzz::broken("format_layout does not parse back", again.status().message());
  }
  return 0;
}
