// The streaming attention kernel's front: the on/off switch and the argument check; the
// kernel itself is the active instruction-set level's (isa/attention_block.cpp, one object
// per level; isa_kernels.h).
#include "kernels/attention_block.h"

#include <atomic>

#include "kernels/isa_kernels.h"
#include "linformer/error.h"

namespace lf::attn_block {

namespace {
std::atomic<bool> g_enabled{true};
}  // namespace

bool available(Operands o) {
  const isa::Kernels& k = isa::kernels();
  return g_enabled.load(std::memory_order_relaxed) && k.attend_head &&
         (o == Operands::f32 || k.attend_bf16);
}
bool has_bf16() { return isa::kernels().attend_bf16; }
void set_enabled(bool on) { g_enabled.store(on, std::memory_order_relaxed); }

int64_t work_floats(int64_t rows, int64_t Dh, int64_t kb) {
  const isa::Kernels& k = isa::kernels();
  return k.attend_work_floats ? k.attend_work_floats(rows, Dh, kb) : 0;
}

void attend_head(float* ctx, int64_t ldc, const HeadIn& in, const float* key_mask, int64_t rows,
                 int64_t keys, int64_t Dh, int64_t kb, int64_t first_query, float scale,
                 float* work) {
  const Operands o = operands_of(in);
  LF_CHECK(available(o), "attn_block::attend_head: no ", o == Operands::bf16 ? "bf16" : "f32",
           " kernel on this CPU's instruction-set level (check available() first)");
  isa::kernels().attend_head(ctx, ldc, in, key_mask, rows, keys, Dh, kb, first_query, scale, work);
}

}  // namespace lf::attn_block
