// The tokenizer a run records in its checkpoints, so that a checkpoint is
// self-contained: `generate --load` and a resume need no tokenizer flags, and
// a different tokenizer on resume is an error, not text decoded wrongly.
//
// meta.json's args.tokenizer (the "record"):
//  - char:          {"type": "char", "vocab": [...], "vocab_sha256": ...}: the
//                   vocabulary itself and the SHA-256 of its JSON as preprocess
//                   writes it (`sha256sum <prefix>_vocab.json`), so that a
//                   vocabulary edited in meta.json is refused; records saved
//                   before the checksum have none and are accepted;
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
//  - HuggingFaceTokenizer: the same with "tokenizer_json" (and
//    "tokenizer_config" when the folder has one), copied as tokenizer.json and
//    tokenizer_config.json; iter_N/tokenizer/ is then the --tokenizer-model
//    folder of a resume or `generate` (Qwen3's tokenizer.json is 11 MB,
//    Gemma 3's 33 MB).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"

namespace mt {

// The record of `tok`, built from `options` (see above).
nlohmann::json tokenizer_record(const Tokenizer& tok, const TokenizerOptions& options);
class CharTokenizer;
// The record of a character vocabulary, with its checksum.
nlohmann::json char_tokenizer_record(const CharTokenizer& vocab);
// The vocabulary of a char record, checked against its "vocab_sha256" (none
// recorded: accepted). `where` names the file holding the record (a
// meta.json); a mismatch is an error naming it and both checksums.
CharTokenizer char_vocab_of(const nlohmann::json& record, const std::string& where);

// A dataset made by `megatron preprocess` has its tokenizer recorded beside
// it: <prefix>_tokenizer.json (Tokenizer::describe(): per file its SHA-256)
// for --data-path <prefix>_<key>_document. When that record and the run's
// `record` are of the same type but name a file of different content (a
// vocabulary edited after preprocessing, another merges.txt), the dataset's
// ids would mean other text: an error naming both files and checksums.
// `vocab_file` is the run's --vocab-file ("" when adopted from --load), for
// the message. No record beside the dataset (older datasets, Megatron-LM's
// own preprocess): accepted.
// <prefix>_tokenizer.json, the tokenizer record preprocess wrote beside the dataset
// --data-path <prefix>_<key>_document ("" when there is none).
std::string dataset_record_path(const std::string& data_prefix);

void check_dataset_tokenizer(const std::string& data_prefix, const nlohmann::json& record,
                             const std::string& vocab_file);

// The datasets of one run (a blend, or the per-split paths) must share one
// tokenizer: two whose <prefix>_tokenizer.json records name different
// tokenizers (type, size or file contents) are refused, naming both. Returns
// a warning ("" for none) when some have a record and others have none.
std::string check_blend_tokenizers(const std::vector<std::string>& prefixes);

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
