#include "train/run_tokenizer.h"

#include <memory>
#include <string>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/checkpoint_tokenizer.h"
#include "core/error.h"
#include "core/log.h"
#include "data/char_tokenizer.h"
#include "data/tokenizer.h"

namespace mt {

namespace {

// The tokenizer's end-of-document id, which --mock-data's documents end with
// and the document flags find documents by.
void take_tokenizer_eod(TrainArgs& args, int64_t eod) {
  args.tokenizer_eod = eod;
  args.documents.eod = int32_t(eod);
  MT_CHECK(!args.documents.any() || eod >= 0,
           "--reset-position-ids / --reset-attention-mask / --eod-mask-loss: the ",
           args.tokenizer_type, " tokenizer has no end-of-document token to find documents by; "
           "fix: preprocess with a tokenizer that has one (and --append-eod), or leave the flags "
           "out");
}

}  // namespace

nlohmann::json resolve_tokenizer(TrainArgs& args, int64_t loaded_iteration, bool rank0) {
  nlohmann::json saved;
  std::string iter;
  if (loaded_iteration >= 0) {
    const nlohmann::json meta = read_checkpoint_meta(args.load);
    saved = meta.at("args").at("tokenizer");
    iter = checkpoint_iteration_dir(args.load, loaded_iteration);
    // A vocabulary edited in meta.json is refused; one saved before the
    // checksum gets it now, in the checkpoints this run saves.
    if (saved.value("type", "") == "char")
      saved = char_tokenizer_record(char_vocab_of(saved, iter + "/meta.json"));
    const bool no_flags = args.tokenizer_type.empty() && args.vocab_file.empty() &&
                          args.merge_file.empty() && args.tokenizer_model.empty() &&
                          args.vocab_size == 0;
    if (no_flags) {
      args.tokenizer_type = saved.at("type").get<std::string>();
      args.vocab_size = saved.value("vocab_size", int64_t(0));
      args.model.vocab_size = meta.at("args").at("model").at("vocab_size").get<int64_t>();
      log_line(rank0, "tokenizer: %s, as recorded in the checkpoint\n", args.tokenizer_type.c_str());
      if (args.mock_data || args.documents.any())
        take_tokenizer_eod(args, tokenizer_from_record(saved, iter)->eod());
      return saved.at("type") == "char" || saved.at("type") == "NullTokenizer"
                 ? saved
                 : adopt_tokenizer_record(saved, iter);
    }
  }
  // Megatron-LM's older GPT scripts (examples/gpt3/train_gpt3_175b_distributed.sh)
  // pass GPT-2's vocab and merges without --tokenizer-type: a merge file is
  // only GPT-2 BPE's.
  if (args.tokenizer_type.empty() && !args.merge_file.empty()) {
    args.tokenizer_type = "GPT2BPETokenizer";
    log_line(rank0, "note: --merge-file without --tokenizer-type: GPT2BPETokenizer\n");
  }
  MT_CHECK(!args.mock_data || !args.tokenizer_type.empty() || !args.vocab_file.empty(),
           "--mock-data without a tokenizer: its documents end with the tokenizer's eod and "
           "their ids wrap at its vocabulary; fix: --tokenizer-type NullTokenizer --vocab-size N "
           "(or a real tokenizer's flags)");
  if (args.tokenizer_type.empty()) args.tokenizer_type = "char";
  TokenizerOptions o;
  o.type = args.tokenizer_type;
  o.vocab_file = args.vocab_file;
  o.merge_file = args.merge_file;
  o.tokenizer_model = args.tokenizer_model;
  o.vocab_size = args.vocab_size;
  const std::unique_ptr<Tokenizer> tok = make_tokenizer(o);
  args.model.vocab_size = tok->vocab_size();
  take_tokenizer_eod(args, tok->eod());
  nlohmann::json record = tokenizer_record(*tok, o);
  if (loaded_iteration >= 0 && !same_tokenizer(saved, record)) {
    std::string diff;
    if (saved.value("type", "") == "char" && record.value("type", "") == "char") {
      const nlohmann::json &a = saved.at("vocab"), &b = record.at("vocab");
      size_t i = 0;
      while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
      diff = " (" + std::to_string(a.size()) + " vs " + std::to_string(b.size()) +
             " entries; first difference at id " + std::to_string(i) + ": " +
             (i < a.size() ? a[i].dump() : std::string("none")) + " vs " +
             (i < b.size() ? b[i].dump() : std::string("none")) + ")";
    }
    MT_FAIL("--load ", args.load, ": the checkpoint was trained with another tokenizer (",
            saved.value("type", "?"), ") than this run's (", record.value("type", "?"), ")", diff,
            "; the ids would mean other text; fix: leave out the tokenizer flags to use the "
            "checkpoint's", saved.contains("vocab") ? "" : " (" + tokenizer_file_list(saved) +
            " in " + iter + "/tokenizer)", ", or pass the files it was trained with");
  }
  return record;
}

}  // namespace mt
