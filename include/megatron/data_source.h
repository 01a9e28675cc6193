// megatron/data_source.h — training samples a program supplies.
//
// A DataSource given to megatron::Trainer::set_train_data replaces the
// training split of --data-path / --mock-data (those flags may still give the
// validation and test splits). The run reads it exactly as it reads its own
// datasets: iteration i's global batch is samples [c, c + global batch) where c
// counts the samples consumed before it (so a resumed run goes on where the
// checkpoint stopped), cut into micro-batches and data-parallel ranks as
// Megatron's sampler cuts them; each rank asks only for the samples it reads.
//
// Sample `index` is seq_length + 1 token ids: the model's inputs are the first
// seq_length, its labels the last seq_length. Every id must lie in
// [0, vocabulary size): the run stops with one line naming the sample, the
// position and the value otherwise.
#pragma once
#include <cstdint>

namespace megatron {

class DataSource {
 public:
  virtual ~DataSource() = default;
  // Samples held: at least --train-iters x the global batch (checked at set-up).
  virtual int64_t size() const = 0;
  // tokens[0, seq_length + 1) = sample `index` (0 <= index < size()); the same
  // sample every time it is asked for, on every rank. Called on the thread
  // that calls Trainer::step() / run().
  virtual void sample(int64_t index, int64_t seq_length, int32_t* tokens) const = 0;
};

}  // namespace megatron
