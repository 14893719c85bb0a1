// Files served as they are, compiled in from server/assets/ (CMake writes assets.cpp).
#pragma once

namespace lf::serve {
extern const char* const kIndexHtml;    // GET /: the page to try the model in a browser
extern const char* const kOpenApiJson;  // GET /openapi.json
}  // namespace lf::serve
