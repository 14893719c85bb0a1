// Plain-text corpus input: files or folders, read line by line with UTF-8 checks.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace lf {

// Expands files and folders (recursively, sorted, hidden entries skipped) into a file list.
// Throws if a path does not exist or nothing readable is found.
std::vector<std::string> list_corpus_files(const std::vector<std::string>& paths);

// Returns the byte offset of the first invalid UTF-8 sequence in s, or -1 if valid.
int64_t find_invalid_utf8(const std::string& s);

// Calls fn(line) for every non-empty line (CR stripped) of every file, in order.
// Invalid UTF-8 throws lf::Error naming the file, line and byte column.
// fn returns false to stop early.
void for_each_line(const std::vector<std::string>& files,
                   const std::function<bool(const std::string&)>& fn);

}  // namespace lf
