#include "linformer/models.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "linformer/config.h"
#include "linformer/error.h"

#ifndef LINFORMER_INSTALL_DATADIR
#define LINFORMER_INSTALL_DATADIR "/usr/local/share"
#endif

namespace lf {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool is_model_folder(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "config.json", ec) &&
         fs::is_regular_file(dir / "model.safetensors", ec);
}

}  // namespace

std::vector<std::string> model_search_path() {
  std::vector<std::string> dirs;
  const std::string list = env("LINFORMER_MODELS");
  for (size_t b = 0; b <= list.size();) {
    size_t e = list.find(':', b);
    if (e == std::string::npos) e = list.size();
    if (e > b) dirs.push_back(list.substr(b, e - b));
    b = e + 1;
  }
  std::string data_home = env("XDG_DATA_HOME");
  if (data_home.empty() && !env("HOME").empty()) data_home = env("HOME") + "/.local/share";
  if (!data_home.empty()) dirs.push_back(data_home + "/linformer/models");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && exe.has_parent_path())
    dirs.push_back((exe.parent_path().parent_path() / "share/linformer/models").lexically_normal());
  dirs.push_back(std::string(LINFORMER_INSTALL_DATADIR) + "/linformer/models");
  dirs.push_back("/usr/local/share/linformer/models");
  dirs.push_back("/usr/share/linformer/models");
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (std::string& d : dirs) {
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    if (seen.insert(d).second) out.push_back(d);
  }
  return out;
}

std::vector<InstalledModel> installed_models() {
  std::vector<InstalledModel> out;
  std::set<std::string> names;
  for (const std::string& d : model_search_path()) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    std::vector<fs::path> folders;
    for (const fs::directory_entry& e : fs::directory_iterator(d, ec))
      if (is_model_folder(e.path())) folders.push_back(e.path());
    std::sort(folders.begin(), folders.end());
    for (const fs::path& f : folders) {
      InstalledModel m;
      m.name = f.filename().string();
      if (!names.insert(m.name).second) continue;
      m.path = f.string();
      try {
        const Config c = Config::load((f / "config.json").string());
        m.attention = to_string(c.attention);
        m.max_len = c.max_len;
      } catch (const Error&) {
        m.attention = "?";  // listed, so that the user sees it; loading it will say why
      }
      m.bytes = static_cast<int64_t>(fs::file_size(f / "model.safetensors", ec));
      m.has_card = fs::is_regular_file(f / "README.md", ec);
      out.push_back(std::move(m));
    }
  }
  return out;
}

std::string resolve_model(const std::string& arg) {
  std::error_code ec;
  if (arg.empty() || fs::exists(arg, ec)) return arg;
  const bool bare = arg.find('/') == std::string::npos && arg != "." && arg != "..";
  const std::vector<std::string> dirs = model_search_path();
  if (bare)  // the first search folder holding it, as installed_models() lists it
    for (const std::string& d : dirs)
      if (is_model_folder(fs::path(d) / arg)) return (fs::path(d) / arg).string();
  std::string list;
  for (const InstalledModel& m : installed_models()) list += (list.empty() ? "" : ", ") + m.name;
  std::string where;
  for (const std::string& d : dirs) where += "\n  " + d;
  fail("model ", arg, bare ? " is neither a folder nor an installed model" : " does not exist",
       list.empty() ? std::string("; no model is installed") : "; installed models: " + list,
       " (`linformer models` lists them; searched:", where, ")");
}

}  // namespace lf
