// Helpers for tests that run the `megatron` binary as a user would: a
// self-removing temp directory, a synthetic English-like corpus, running a
// command and capturing its output and exit code, and reading --log-json.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "text_files.h"

namespace mt::test {

// Open MPI refuses root and more ranks than cores unless told; inside CI
// containers the tests run as root on 2 cores. Set before any mpirun starts
// (children of popen inherit it), whatever launched the test binary.
inline const bool kMpiEnvironmentSet = [] {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
  return true;
}();

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `args` through the shell with stderr merged into stdout.
inline RunResult run(const std::string& args) {
  RunResult r;
  FILE* p = ::popen((args + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Runs `args` with its stderr written to `stderr_file`: output is stdout
// alone. For what must be compared byte for byte (generated text), since
// stderr's notes (headers, free memory, the context restarting) land at no
// fixed place in a merged stream and may differ from run to run.
inline RunResult run_stdout(const std::string& args, const std::string& stderr_file) {
  std::string cmd = "(";  // (appended, not "(" + ...: GCC 12's false -Wrestrict)
  cmd += args + " 2>" + stderr_file + ")";
  return run(cmd);
}

inline std::string megatron() { return std::string("env OMP_NUM_THREADS=1 ") + MT_BINARY; }

// `megatron` on n ranks, one thread each, never hanging the test for long.
inline std::string mpirun(int n) {
  return "timeout 300 mpirun --oversubscribe --bind-to none -n " + std::to_string(n) +
         " -x OMP_NUM_THREADS=1 " + std::string(MT_BINARY);
}

// ||a − b|| / ||a||
inline double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(a[i]) * a[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Sentences from a tiny grammar: structured enough that a small model learns
// far more than the character unigram distribution.
inline std::string synthetic_corpus(int paragraphs, unsigned seed = 5) {
  const std::vector<std::string> subj = {"the cat", "a dog", "my friend", "the old king",
                                         "her brother", "the queen"};
  const std::vector<std::string> verb = {"sees", "likes", "follows", "calls", "finds", "helps"};
  const std::vector<std::string> obj = {"the river", "a small bird", "the castle", "his horse",
                                        "the garden", "a red apple"};
  std::mt19937 gen(seed);
  std::string text;
  for (int p = 0; p < paragraphs; ++p) {
    for (int s = 0; s < 4; ++s) {
      std::string sentence = subj[gen() % subj.size()] + " " + verb[gen() % verb.size()] + " " +
                             obj[gen() % obj.size()] + ".";
      sentence[0] = char(std::toupper(sentence[0]));
      text += sentence + (s < 3 ? " " : "\n");
    }
    text += "\n";
  }
  return text;
}

// tests/reference/hf_models.py (the independent PyTorch HF GPT-2/Llama), run
// by Debian's python3; require_torch() fails the test (no skip) without it.
inline const std::string kHfModels =
    std::string("/usr/bin/python3 ") + MT_SOURCE_DIR + "/tests/reference/hf_models.py";
inline void require_torch() {
  const RunResult r = run("/usr/bin/python3 -c 'import torch'");
  ASSERT_EQ(r.exit_code, 0) << "python3-torch is missing (tests/reference/hf_models.py needs it): "
                               "apt-get install python3-torch, or run scripts/install_deps.sh\n"
                            << r.output;
}

// Trains a SentencePiece BPE model of `vocab` pieces on `text_file` with
// Debian's spm_train (package sentencepiece): <prefix>.model. False when that fails.
inline bool spm_train(const std::string& text_file, const std::string& prefix, int vocab) {
  const RunResult r = run("command -v spm_train >/dev/null && spm_train --input=" + text_file +
                          " --model_prefix=" + prefix + " --vocab_size=" + std::to_string(vocab) +
                          " --model_type=bpe");
  return r.exit_code == 0 && std::filesystem::exists(prefix + ".model");
}

// A Hugging Face folder's tokenizer files in `hf_dir`, under HF's names: for
// gpt2 GPT-2's vocab.json + merges.txt (data/gpt2, fetched by the ctest
// fixture), for llama a 96-piece SentencePiece tokenizer.model trained once per
// `dir`. *vocab = the vocabulary size. A missing file fails the test (no skip).
inline void add_hf_tokenizer_files(const std::string& family, const TempDir& dir,
                                   const std::string& hf_dir, int* vocab) {
  namespace fs = std::filesystem;
  fs::create_directories(hf_dir);
  const auto over = fs::copy_options::overwrite_existing;
  if (family == "gpt2") {
    const std::string g = std::string(MT_SOURCE_DIR) + "/data/gpt2/";
    ASSERT_TRUE(fs::exists(g + "gpt2-vocab.json") && fs::exists(g + "gpt2-merges.txt"))
        << "GPT-2 files absent (" << g << "); the ctest fixture fetch_gpt2_tokenizer runs "
        << "scripts/fetch_gpt2_tokenizer.sh";
    fs::copy_file(g + "gpt2-vocab.json", hf_dir + "/vocab.json", over);
    fs::copy_file(g + "gpt2-merges.txt", hf_dir + "/merges.txt", over);
    *vocab = 50257;
    return;
  }
  if (!fs::exists(dir.file("sp.model"))) {
    write_text(dir.file("spm_corpus.txt"), synthetic_corpus(80));
    ASSERT_TRUE(spm_train(dir.file("spm_corpus.txt"), dir.file("sp"), 96))
        << "spm_train failed or is missing (Debian package sentencepiece; "
           "scripts/install_deps.sh installs it)";
  }
  fs::copy_file(dir.file("sp.model"), hf_dir + "/tokenizer.model", over);
  *vocab = 96;
}

// Preprocesses `text` into dir (with `preprocess_flags`, e.g. --append-eod);
// returns the flags that point train at it.
inline std::string prepare_data(const TempDir& dir, const std::string& text,
                                const std::string& preprocess_flags = "") {
  write_text(dir.file("corpus.txt"), text);
  const RunResult r = run(megatron() + " preprocess --input " + dir.file("corpus.txt") +
                          " --output-prefix " + dir.file("corpus") + preprocess_flags);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return " --data-path " + dir.file("corpus_text_document") + " --vocab-file " +
         dir.file("corpus_vocab.json");
}

// A tiny model and schedule, fast on one thread.
inline std::string tiny_model_flags() {
  return " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
         " --micro-batch-size 4 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4"
         " --lr-decay-style cosine --lr-warmup-iters 5 --weight-decay 0.1 --clip-grad 1.0"
         " --split 90,10,0 --peak-tflops 1 --log-interval 1";
}

// The JSON lines of a --log-json file: training entries by iteration, and evaluations.
struct JsonLogLines {
  std::map<int64_t, nlohmann::json> train;
  std::vector<nlohmann::json> eval;
  std::vector<nlohmann::json> test;  // --skip-train's test-split evaluations
  nlohmann::json memory;  // --log-memory's report of rank 0 (null if none)
  std::map<int, nlohmann::json> memory_by_rank;  // every rank's
};

inline JsonLogLines read_log_json(const std::string& path) {
  JsonLogLines out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("val_loss"))
      out.eval.push_back(j);
    else if (j.contains("test_loss"))
      out.test.push_back(j);
    else if (j.contains("memory"))
      out.memory_by_rank[j.at("rank").get<int>()] = j.at("memory");
    else
      out.train[j.at("iteration").get<int64_t>()] = j;
  }
  if (out.memory_by_rank.count(0)) out.memory = out.memory_by_rank.at(0);
  return out;
}

// Per-iteration training losses and the evaluations of two runs agree to
// `tol` relative.
inline void expect_same_losses(const JsonLogLines& ref, const JsonLogLines& got,
                               const std::string& tag, double tol = 1e-7) {
  ASSERT_EQ(got.train.size(), ref.train.size()) << tag;
  for (const auto& [it, j] : ref.train) {
    const double a = j.at("loss").get<double>(), b = got.train.at(it).at("loss").get<double>();
    EXPECT_NEAR(b, a, tol * std::abs(a)) << tag << " iteration " << it;
  }
  ASSERT_EQ(got.eval.size(), ref.eval.size()) << tag;
  for (size_t e = 0; e < ref.eval.size(); ++e) {
    const double a = ref.eval[e].at("val_loss").get<double>();
    EXPECT_NEAR(got.eval[e].at("val_loss").get<double>(), a, tol * a) << tag;
  }
}

// Runs `launch` (a whole `train` command line of 10 iterations) to iteration
// 5 saving dir/c, then resumes it to 10: the losses of iterations 6-10 that
// the same checkpoint resumed under other layouts must reproduce.
inline JsonLogLines save_at_5_and_resume(const TempDir& dir, const std::string& launch) {
  const RunResult save = run(launch + " --exit-interval 5 --save " + dir.file("c"));
  EXPECT_EQ(save.exit_code, 0) << save.output;
  const RunResult cont =
      run(launch + " --load " + dir.file("c") + " --log-json " + dir.file("cont.json"));
  EXPECT_EQ(cont.exit_code, 0) << cont.output;
  if (save.exit_code != 0 || cont.exit_code != 0) return {};
  JsonLogLines ref = read_log_json(dir.file("cont.json"));
  EXPECT_EQ(ref.train.size(), 5u);
  return ref;
}

// Resumes dir/c under `launch` and compares its losses with `ref` to `tol`.
inline void expect_resume_equal(const TempDir& dir, const std::string& tag,
                                const std::string& launch, const JsonLogLines& ref, double tol) {
  const RunResult r =
      run(launch + " --load " + dir.file("c") + " --log-json " + dir.file(tag + ".json"));
  ASSERT_EQ(r.exit_code, 0) << tag << "\n" << r.output;
  expect_same_losses(ref, read_log_json(dir.file(tag + ".json")), tag, tol);
}

inline bool exists(const std::string& path) { return std::filesystem::exists(path); }

}  // namespace mt::test
