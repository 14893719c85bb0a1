// The names of the configuration's enum values (include/linformer/config.h), listed once:
// config.json reads and writes them (src/model/config.cpp) and every level names them in its
// messages through to_string(). In core so that the layers name a configuration without
// reaching up into the model.
#pragma once
#include <cstddef>

#include "linformer/config.h"

namespace lf {

template <typename E>
struct Named {
  E value;
  const char* name;
};

// The values of one enum with their names, in declaration order.
template <typename E>
struct NameList {
  const Named<E>* first;
  size_t count;
  const Named<E>* begin() const { return first; }
  const Named<E>* end() const { return first + count; }
};

// The list of E's names; called as names_of(E{}).
NameList<AttentionKind> names_of(AttentionKind);
NameList<Sharing> names_of(Sharing);
NameList<Projection> names_of(Projection);
NameList<ProjectionInit> names_of(ProjectionInit);
NameList<NormPlacement> names_of(NormPlacement);
NameList<ClassifierPooling> names_of(ClassifierPooling);

}  // namespace lf
