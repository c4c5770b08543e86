// Flight recorder (PyTorch's FlightRecorder): a per-process ring buffer of the last TORCH_FR_BUFFER_SIZE
// collectives and point-to-point ops of every process group, each with its group, sequence numbers, sizes,
// dtypes, state and timestamps, dumped in PyTorch's pickle format. A DumpWatchdog thread per process makes
// every rank dump when one rank's collective fails (through a store key), or when the process gets SIGUSR1.
// Both backends record in one place, GroupTrace::record; Work reports started / completed back.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dtypes.hpp"

namespace tinytorch::dist {
class TCPStore;
}

namespace tinytorch::dist::fr {

// Settings read once from the environment, with PyTorch's names and defaults.
struct Config {
  size_t buffer_size;         // TORCH_FR_BUFFER_SIZE (TORCH_NCCL_TRACE_BUFFER_SIZE), 2000; 0 turns recording off
  bool include_stack_trace;   // TORCH_INCLUDE_STACK_TRACE, true: Python stacks recorded and dumped
  bool include_only_active;   // TORCH_INCLUDE_ONLY_ACTIVE, false: automatic dumps skip completed entries
  bool dump_on_timeout;       // TORCH_NCCL_DUMP_ON_TIMEOUT, true: a failed collective makes every rank dump
  int coord_check_ms;         // TORCH_NCCL_COORD_CHECK_MILSEC, 1000: how often the watchdog polls the store
  int wait_dump_ms;           // TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC, 15000: how long a failing rank waits for dumps
};
const Config& config();

// Where rank `global_rank` dumps: TORCH_FR_DUMP_TEMP_FILE (TORCH_NCCL_DEBUG_INFO_TEMP_FILE) followed by the rank,
// by default ${XDG_CACHE_HOME:-~/.cache}/torch/comm_lib_trace_rank_<rank>.
std::string dump_path(int global_rank);

struct CodeInfo {
  std::string name, filename;
};
struct Frame {
  std::shared_ptr<const CodeInfo> code;
  int line;
};
using Sizes = std::vector<std::vector<int64_t>>;

// What the Python caller knows about an op and the backend does not: tensor shapes and the Python stack.
struct CallerInfo {
  bool has_sizes = false;
  Sizes input_sizes, output_sizes;
  std::vector<Frame> frames;
};

// The bindings wrap one backend call in a CallerScope (same thread); GroupTrace::record reads it.
class CallerScope {
 public:
  explicit CallerScope(CallerInfo info);
  ~CallerScope();
  CallerScope(const CallerScope&) = delete;
  CallerScope& operator=(const CallerScope&) = delete;

 private:
  CallerInfo info_;
  CallerInfo* prev_;
};

// A process group as the dump's pg_config and pg_status show it.
struct GroupInfo {
  int pg_id = 0;
  std::string name, desc;
  std::vector<int> ranks;  // global ranks, in group-rank order
  int64_t last_enqueued = -1, last_started = -1, last_completed = -1;  // collective sequence numbers
};

class FlightRecorder {
 public:
  // Process-wide and never destroyed: backend threads may still report while the process exits.
  static FlightRecorder& get();
  bool enabled() const { return capacity_ > 0; }

  struct Entry {
    int64_t id = -1;
    std::shared_ptr<GroupInfo> group;
    uint64_t collective_seq_id = 0, p2p_seq_id = 0, op_id = 0;
    std::string profiling_name;
    Sizes input_sizes, output_sizes;
    DType dtype = DType::Float32;
    int64_t time_created_ns = 0, time_started_ns = 0, time_completed_ns = 0;  // wall clock; 0: not yet
    int64_t started_mono_ns = 0, completed_mono_ns = 0;
    double timeout_ms = 0;
    bool is_p2p = false, retired = false;
    std::string thread_name, thread_id;
    std::vector<Frame> frames;
  };

  // Stores `e` (overwriting the oldest entry once the buffer is full); returns its record id.
  int64_t record(Entry e);
  void started(int64_t id);
  void finished(int64_t id, bool ok);
  // The dump: a pickled dict in PyTorch's format (version, comm_lib_version, pg_config, pg_status, entries).
  std::string dump(bool include_collectives, bool include_stack_traces, bool only_active);
  // Drops every entry (record ids go on counting).
  void reset();
  std::shared_ptr<GroupInfo> new_group(std::string name, std::string desc, std::vector<int> ranks);

 private:
  FlightRecorder();
  Entry* find_locked(int64_t id);

  size_t capacity_;
  std::mutex mu_;
  std::vector<Entry> entries_;
  size_t next_ = 0;        // the slot the next entry goes to
  int64_t next_id_ = 0;    // the next entry's record id
  int64_t first_id_ = 0;   // the record id of the first entry since the last reset (it sits in slot 0)
  int next_pg_id_ = 0;
  std::vector<std::weak_ptr<GroupInfo>> groups_;
};

// One process group's side of the recorder: its identity and its sequence counters.
class GroupTrace {
 public:
  GroupTrace(int rank, int size);
  // Called once the Python layer knows the group's name, description and global ranks.
  void set_group(std::string name, std::string desc, std::vector<int> ranks);
  int global_rank(int group_rank) const;
  // Records an op issued on this group: a collective with its sequence number `collective_seq`, or a
  // point-to-point op (collective_seq 0) with `peer`. Sizes come from the caller's CallerScope if it set any,
  // else from the element counts. Returns the id that Work reports back, or -1 with the recorder off.
  int64_t record(const char* backend, const char* op, uint64_t collective_seq, int peer, DType t, size_t in_count,
                 size_t out_count, double timeout_s);

 private:
  int rank_;
  mutable std::mutex mu_;
  std::shared_ptr<GroupInfo> info_;
  uint64_t last_collective_seq_ = 0, p2p_seq_ = 0, op_id_ = 0;
};

// Writes this process's dump to dump_path(global_rank) through a temporary file and a rename; returns the path.
std::string write_dump(int global_rank, bool include_stack_traces, bool only_active);

// The per-process thread that answers dump requests: the store key "<prefix>exception_dump" (set by a rank whose
// collective failed), and SIGUSR1. It beats a per-rank counter in the store so that a failing rank can tell a
// dead peer (no beat: not waited for) from one still on its way to dumping.
class DumpWatchdog {
 public:
  DumpWatchdog(const std::string& store_host, int store_port, std::string prefix, int rank, int world_size);
  ~DumpWatchdog();
  DumpWatchdog(const DumpWatchdog&) = delete;
  DumpWatchdog& operator=(const DumpWatchdog&) = delete;
  // Joins the thread and restores SIGUSR1; later failures dump only locally.
  void stop();
  // A collective of this process failed: ask every rank to dump, dump here, then wait (at most
  // TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC) until every rank that is still alive has.
  void on_failure();
  static std::shared_ptr<DumpWatchdog> active();
  static void set_active(const std::shared_ptr<DumpWatchdog>& w);

 private:
  void loop();
  void dump_once(const std::string& why);
  void wait_for_dumps();
  std::string key(const std::string& k) const { return prefix_ + k; }

  std::unique_ptr<TCPStore> store_;
  std::string prefix_;
  int rank_, world_size_;
  std::atomic<bool> dumped_{false};
  std::atomic<bool> store_ok_{true};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool installed_sigusr1_ = false;
  std::thread thread_;
};

// What a backend calls when one of its ops failed (timeout, error, abort).
void on_collective_failure(int global_rank);

}  // namespace tinytorch::dist::fr
