#include "core/config_names.h"

namespace lf {

namespace {

const Named<AttentionKind> kAttentionNames[] = {{AttentionKind::standard, "standard"},
                                                {AttentionKind::linformer, "linformer"},
                                                {AttentionKind::nystrom, "nystrom"}};
const Named<Sharing> kSharingNames[] = {{Sharing::none, "none"},
                                        {Sharing::headwise, "headwise"},
                                        {Sharing::kv, "kv"},
                                        {Sharing::layerwise, "layerwise"}};
const Named<Projection> kProjectionNames[] = {{Projection::linear, "linear"},
                                              {Projection::mean_pool, "mean_pool"},
                                              {Projection::max_pool, "max_pool"},
                                              {Projection::conv, "conv"}};
const Named<ProjectionInit> kProjectionInitNames[] = {{ProjectionInit::normal, "normal"},
                                                      {ProjectionInit::mean_pool, "mean_pool"}};
const Named<NormPlacement> kNormNames[] = {{NormPlacement::post, "post"},
                                           {NormPlacement::pre, "pre"}};
const Named<ClassifierPooling> kPoolingNames[] = {{ClassifierPooling::first, "first"},
                                                  {ClassifierPooling::mean, "mean"}};

template <typename E, size_t M>
NameList<E> list(const Named<E> (&names)[M]) {
  return {names, M};
}

template <typename E>
const char* name_of(E v) {
  for (const Named<E>& n : names_of(E{}))
    if (n.value == v) return n.name;
  return "?";
}

}  // namespace

NameList<AttentionKind> names_of(AttentionKind) { return list(kAttentionNames); }
NameList<Sharing> names_of(Sharing) { return list(kSharingNames); }
NameList<Projection> names_of(Projection) { return list(kProjectionNames); }
NameList<ProjectionInit> names_of(ProjectionInit) { return list(kProjectionInitNames); }
NameList<NormPlacement> names_of(NormPlacement) { return list(kNormNames); }
NameList<ClassifierPooling> names_of(ClassifierPooling) { return list(kPoolingNames); }

const char* to_string(AttentionKind v) { return name_of(v); }
const char* to_string(Sharing v) { return name_of(v); }
const char* to_string(Projection v) { return name_of(v); }
const char* to_string(ProjectionInit v) { return name_of(v); }
const char* to_string(NormPlacement v) { return name_of(v); }
const char* to_string(ClassifierPooling v) { return name_of(v); }

}  // namespace lf
