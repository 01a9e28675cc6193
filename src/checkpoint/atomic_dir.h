// Crash-safe replacement of a whole directory (a checkpoint iteration, a
// converted model): the new copy is written into "<dir>.tmp" beside it and
// renamed in only when complete; an existing <dir> is first renamed aside to
// "<dir>.old" and removed only once the new copy is in place. A crash at any
// moment leaves <dir> or <dir>.old complete, and at most an incomplete
// <dir>.tmp, never a half-written <dir>; repair_replaced_dir() tidies up after
// it. Every failure throws mt::Error naming the path and the system's reason.
#pragma once
#include <string>
#include <vector>

namespace mt {

std::string tmp_dir_of(const std::string& dir);  // "<dir>.tmp": the new copy being written
std::string old_dir_of(const std::string& dir);  // "<dir>.old": the previous copy, kept meanwhile

// fsync of every file and directory under `dir` and of `dir` itself, so that
// what was written there (also by plain copies) survives a crash once `dir`
// is renamed into place.
void fsync_tree(const std::string& dir);

// Moves the complete "<dir>.tmp" to <dir>: an existing <dir> is renamed aside
// to "<dir>.old" first (a stale "<dir>.old" is removed before), then the
// parent directory is fsynced. Returns whether "<dir>.old" now holds the
// previous copy: the caller removes it (remove_dir_synced) once whatever names
// the new copy (a tracker) is written.
bool move_into_place(const std::string& dir);

// remove_all(dir) and an fsync of its parent; nothing if it does not exist.
void remove_dir_synced(const std::string& dir);

// Only this step of the repair, safe before the caller holds <dir>'s lock: a
// "<dir>.old" without <dir> (a crash between the two renames) is renamed back
// to <dir>. Returns the line saying so, or "".
std::string restore_interrupted_replace(const std::string& dir, const std::string& what);

// After a crash (by the one writer of <dir>): restores <dir> as above, removes
// a "<dir>.old" beside a complete <dir> (the new copy was in place) and an
// incomplete "<dir>.tmp". `what` names the writing for the messages ("save",
// "conversion"). Returns one line per action, for the log.
std::vector<std::string> repair_replaced_dir(const std::string& dir, const std::string& what);

}  // namespace mt
