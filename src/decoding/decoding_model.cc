#include "decoding/decoding_model.h"

#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/error.h"
#include "checkpoint/checkpoint_tokenizer.h"
#include "memory/host_memory.h"

namespace mt {

void add_decoding_layout_options(CLI::App& app, DecodingLayout& l, const char* help_tp) {
  app.add_option("--tensor-model-parallel-size", l.tp, help_tp);
  app.add_option("--expert-model-parallel-size", l.ep,
                 "MoE: split the experts over this many ranks (each rank holds E/EP of them "
                 "whole); the world is lcm(TP, EP) ranks");
}

ParallelConfig decoding_parallel_config(const DecodingLayout& l, int world, const char* who) {
  MT_CHECK(l.tp >= 1, "--tensor-model-parallel-size ", l.tp, " must be >= 1");
  MT_CHECK(l.ep >= 1, "--expert-model-parallel-size ", l.ep, " must be >= 1");
  const int64_t ranks = std::lcm(int64_t(l.tp), int64_t(l.ep));
  MT_CHECK(world == ranks, who, " with --tensor-model-parallel-size ", l.tp,
           l.ep > 1 ? " and --expert-model-parallel-size " + std::to_string(l.ep) : "",
           " needs exactly ", ranks, " ranks; got world size ", world, "; fix: mpirun -n ", ranks,
           " megatron ", who, " ...");
  ParallelConfig pc;
  pc.tp = l.tp;
  pc.ep = l.ep;
  return pc;
}

DecodingModel open_for_decoding(const std::string& load, const ParallelState& ps,
                                const char* who) {
  DecodingModel m;
  m.load = load;
  m.who = who;
  const int tp = ps.tp_size;
  const nlohmann::json meta = read_checkpoint_meta(load);
  const nlohmann::json& args = meta.at("args");
  m.cfg = model_config_from_json(args.at("model"));
  m.cfg.padded_vocab_size = 0;  // derived by finalize, then the checkpoint's rows below
  m.cfg.finalize(tp);
  m.cfg.padded_vocab_size = args.at("model").at("padded_vocab_size");  // as trained
  // Decoding never runs the MTP depths (Megatron skips them in inference):
  // their parameters are left unread, the rest decodes as without them.
  m.cfg.mtp_num_layers = 0;
  MT_CHECK(m.cfg.padded_vocab_size % tp == 0 && m.cfg.num_attention_heads % tp == 0,
           "--tensor-model-parallel-size ", tp, " does not divide the checkpoint's ",
           m.cfg.num_attention_heads, " heads and ", m.cfg.padded_vocab_size, " vocabulary rows");
  MT_CHECK(ps.ep_size == 1 || (m.cfg.moe() && m.cfg.num_experts % ps.ep_size == 0),
           "--expert-model-parallel-size ", ps.ep_size, " does not divide the checkpoint's ",
           m.cfg.num_experts, " experts", m.cfg.moe() ? "" : " (it has no MoE layer)",
           "; fix: choose an EP that divides them, or 1");
  const nlohmann::json& tj = args.at("tokenizer");
  MT_CHECK(tj.at("type") != "NullTokenizer", who, " needs a text tokenizer; this checkpoint "
           "was trained with NullTokenizer (token ids only)");
  // The checkpoint's own tokenizer: its vocabulary, or its copied files.
  m.tok = tokenizer_from_record(tj,
                                checkpoint_iteration_dir(load, meta.at("iteration").get<int64_t>()));
  m.reg = std::make_unique<ParamRegistry>(
      m.cfg, StageLayout{ps.tp_rank, ps.tp_size, 0, m.cfg.num_layers, true, true, {}, ps.ep_rank,
                         ps.ep_size});
  return m;
}

void load_weights(DecodingModel& m, const ParallelState& ps, double cache_bytes,
                  const std::string& cache_what, const std::string& levers, bool skip) {
  const double weights = double(m.reg->total_floats()) * sizeof(float);
  const std::string host = check_host_memory(weights + cache_bytes, ps, skip, m.who, levers.c_str());
  if (ps.world_rank == 0)
    std::fprintf(stderr, "%s: %s, %.2f MB per rank, weights %.2f MB; %s\n", m.who,
                 cache_what.c_str(), cache_bytes / 1e6, weights / 1e6, host.c_str());
  m.params = HostBuffer(size_t(m.reg->total_floats()) * sizeof(float));
  m.state = load_checkpoint(m.load, *m.reg, reinterpret_cast<float*>(m.params.data()), nullptr, ps);
  if (ps.world_rank == 0)
    std::fprintf(stderr, "%s: %s, iteration %lld, %s, %s\n", m.who, m.load.c_str(),
                 static_cast<long long>(m.state.iteration), m.cfg.summary().c_str(),
                 ps.layout().c_str());
}

void load_decoder(DecodingModel& m, const ParallelState& ps, int64_t positions,
                  const std::string& levers, bool skip) {
  MT_CHECK(positions >= 1 && positions <= m.context(), m.who, ": a key/value cache of ", positions,
           " positions; it holds 1 to ", m.context(), " (internal error)");
  load_weights(m, ps, GptDecoder::planned_bytes(*m.reg, positions),
               "key/value cache of " + std::to_string(positions) +
                   " positions (the model's context: " + std::to_string(m.context()) + "; " +
                   std::to_string(int64_t(BatchedDecoder::cache_bytes_per_token(*m.reg))) +
                   " bytes a token)",
               levers, skip);
  m.dec = std::make_unique<GptDecoder>(*m.reg, reinterpret_cast<const float*>(m.params.data()),
                                       TensorParallel{&ps.tp_comm, false}, positions,
                                       ps.ep_size > 1 ? &ps.ep_comm : nullptr);
}

}  // namespace mt
