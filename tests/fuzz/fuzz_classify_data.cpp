// The classification data readers on arbitrary bytes: a TSV file with a header
// (read_classify_data, both bad-row policies) and streamed text (TextInput, each format).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_util.h"
#include "linformer/classify_data.h"
#include "linformer/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static lf::fuzz::MemFile file("data.tsv");
  file.write(data, size);
  for (lf::BadRows policy : {lf::BadRows::stop, lf::BadRows::skip}) {
    try {
      lf::ReadOptions ro;
      ro.bad_rows = policy;
      lf::ClassifyData d = lf::read_classify_data(file.path(), ro);
      const lf::LabelMap labels = lf::build_label_map(d);
      (void)lf::LabelMap::from_json(labels.to_json());
      (void)lf::assign_labels(d, labels, policy);
    } catch (const lf::Error&) {
    }
  }
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const char* format : {"auto", "tsv", "lines"})
    for (bool pairs : {false, true}) {
      try {
        std::istringstream in(text);
        lf::TextInput reader(in, "input", format, pairs, lf::BadRows::skip);
        lf::ClassifyData chunk;
        while (reader.next(7, &chunk)) {
        }
      } catch (const lf::Error&) {
      }
    }
  return 0;
}
