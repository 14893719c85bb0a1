// The activation arena's guard words: they must catch a write past a block.
#include <gtest/gtest.h>

#include "core/buffer.h"
#include "test_util.h"

namespace lf {
namespace {

// Lays out three blocks of a float, 17 floats and an int, as a planner would.
size_t lay(Arena* ar, float** a, float** b, int32_t** c) {
  Carver cv{ar};
  *a = cv.take<float>(1);
  *b = cv.take<float>(17);
  *c = cv.take<int32_t>(1);
  return cv.bytes;
}

TEST(ArenaGuards, WritingOneElementPastABlockIsCaught) {
  const test::GuardWords guards;
  for (int victim = 0; victim < 3; ++victim) {
    Arena ar;
    float *a, *b;
    int32_t* c;
    ar.reserve(lay(nullptr, &a, &b, &c));
    lay(&ar, &a, &b, &c);
    EXPECT_NO_THROW(ar.check_guards());
    // Writes to the padding that rounds a block up to 64 bytes are allowed; the first byte
    // past that is the guard.
    unsigned char* end = victim == 0   ? reinterpret_cast<unsigned char*>(a) + Arena::aligned(1, 4)
                         : victim == 1 ? reinterpret_cast<unsigned char*>(b) + Arena::aligned(17, 4)
                                       : reinterpret_cast<unsigned char*>(c) + Arena::aligned(1, 4);
    end[0] ^= 1;
    EXPECT_ERROR_MENTIONS(ar.check_guards(), "block " + std::to_string(victim));
  }
}

TEST(ArenaGuards, CarverCountsTheGuardsSoSizingStaysExact) {
  float *a, *b;
  int32_t* c;
  size_t plain = 0;
  {
    const test::GuardWords off(false);
    plain = lay(nullptr, &a, &b, &c);
  }
  const test::GuardWords guards;
  const size_t guarded = lay(nullptr, &a, &b, &c);
  EXPECT_EQ(guarded, plain + 3 * Arena::kGuardBytes);
  Arena ar;
  ar.reserve(guarded);
  EXPECT_NO_THROW(lay(&ar, &a, &b, &c));  // no overflow: the reservation was exact
  EXPECT_EQ(ar.used(), guarded);
}

}  // namespace
}  // namespace lf
