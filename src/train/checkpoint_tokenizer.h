// The tokenizer a run records in its checkpoints, so that a checkpoint is
// self-contained: `generate --load` and a resume need no tokenizer flags, and
// a different tokenizer on resume is an error, not text decoded wrongly.
//
// meta.json's args.tokenizer (the "record"):
//  - char:          {"type": "char", "vocab": [...]}: the vocabulary itself;
//  - NullTokenizer: {"type": "NullTokenizer", "vocab_size": N};
//  - GPT2BPETokenizer, SentencePieceTokenizer, Llama2Tokenizer: Tokenizer::
//    describe(): {"type", "vocab_size", "eod", "bos", and per file
//    "<flag>": {"path": the file the run was given, "sha256": its hash}}.
//    The files themselves are copied into iter_N/tokenizer/ under Hugging
//    Face's names (vocab.json, merges.txt, tokenizer.model): copies rather than
//    paths alone, because a checkpoint outlives the paths it was trained from
//    (other machines, deleted caches), the files are small (GPT-2's are 1.5 MB,
//    a SentencePiece model 0.5–4 MB, against megabytes to gigabytes of
//    weights) and an export to Hugging Face needs them beside the weights.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"

namespace mt {

// The record of `tok`, built from `options` (see above).
nlohmann::json tokenizer_record(const Tokenizer& tok, const TokenizerOptions& options);

// Do two records name the same tokenizer? Paths may differ; contents may not.
bool same_tokenizer(const nlohmann::json& a, const nlohmann::json& b);

// "vocab.json and merges.txt" etc.: the files of a record, for messages.
std::string tokenizer_file_list(const nlohmann::json& record);

// Copies the record's files into <iter_dir>/tokenizer/, checking that each
// still has the recorded SHA-256 (a file changed during the run is an error).
void save_tokenizer_files(const nlohmann::json& record, const std::string& iter_dir);

// The record with its file paths pointing at the copies in
// <iter_dir>/tokenizer/ (checked against their hashes): what a run that gives
// no tokenizer flags adopts on resume.
nlohmann::json adopt_tokenizer_record(const nlohmann::json& record, const std::string& iter_dir);

// The tokenizer a checkpoint was trained with (its copies, or for char the
// vocabulary in the record).
std::unique_ptr<Tokenizer> tokenizer_from_record(const nlohmann::json& record,
                                                 const std::string& iter_dir);

}  // namespace mt
