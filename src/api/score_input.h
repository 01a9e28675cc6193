// The documents `megatron score --input` reads (megatron::Scorer): a .txt file
// of documents separated by blank lines, as `preprocess` splits them, or JSONL
// (one object per line, the text under a key).
#pragma once
#include <string>
#include <vector>

namespace mt {

// The documents of `path`, in order. A directory, an empty file or one of
// blank lines only is an mt::Error naming it (not a total of 0 tokens, loss 0),
// and so is a JSONL line that is no object with a string under `json_key`.
std::vector<std::string> read_score_documents(const std::string& path,
                                              const std::string& json_key);

}  // namespace mt
