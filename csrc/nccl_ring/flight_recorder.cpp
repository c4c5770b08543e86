#include "flight_recorder.hpp"

#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "errors.hpp"
#include "pickler.hpp"
#include "tcp_store.hpp"

namespace tinytorch::dist::fr {
namespace {

// The format version PyTorch 2.13/2.14 writes; its analyzer requires every rank's dump to carry the same one.
constexpr const char* kVersion = "2.10";

// PyTorch's rule for renamed variables: the first name wins; the old name alone still works, with a warning.
const char* env_of(const char* name, const char* old_name = nullptr) {
  const char* v = std::getenv(name);
  if (v && *v) return v;
  if (old_name) {
    v = std::getenv(old_name);
    if (v && *v) {
      std::fprintf(stderr, "Environment variable %s is deprecated; use %s instead\n", old_name, name);
      return v;
    }
  }
  return nullptr;
}

int64_t env_int(const char* name, const char* old_name, int64_t def) {
  const char* v = env_of(name, old_name);
  if (!v) return def;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || x < 0) {
    std::fprintf(stderr, "flight recorder: ignoring %s=%s (expected a non-negative integer); using %lld\n", name, v,
                 static_cast<long long>(def));
    return def;
  }
  return x;
}

bool env_bool(const char* name, bool def) {
  const char* v = env_of(name);
  if (!v) return def;
  std::string s(v);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  std::fprintf(stderr, "flight recorder: ignoring %s=%s (expected 0/1/true/false)\n", name, v);
  return def;
}

int64_t wall_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// c10::toString names, which PyTorch's dumps carry.
const char* torch_dtype_name(DType t) {
  switch (t) {
    case DType::Float16: return "Half";
    case DType::BFloat16: return "BFloat16";
    case DType::Float32: return "Float";
    case DType::Float64: return "Double";
    case DType::Int32: return "Int";
    case DType::Int64: return "Long";
  }
  return "Undefined";
}

struct ThreadIdentity {
  std::string name, id;
};

const ThreadIdentity& this_thread() {
  thread_local ThreadIdentity ident = [] {
    ThreadIdentity t;
    char buf[32] = {0};
    if (pthread_getname_np(pthread_self(), buf, sizeof(buf)) == 0) t.name = buf;
    t.id = std::to_string(static_cast<long>(::syscall(SYS_gettid)));
    return t;
  }();
  return ident;
}

thread_local CallerInfo* tls_caller = nullptr;

void mkdir_p(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos == dir.size() || dir[pos] == '/') ::mkdir(dir.substr(0, pos).c_str(), 0755);
  }
}

std::string ranks_str(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

void write_sizes(Pickler& p, const Sizes& sizes) {
  p.begin_list();
  for (const auto& shape : sizes) {
    p.begin_list();
    for (int64_t d : shape) p.integer(d);
    p.end_list();
  }
  p.end_list();
}

void write_dtypes(Pickler& p, size_t n, DType t) {
  p.begin_list();
  for (size_t i = 0; i < n; ++i) p.str(torch_dtype_name(t));
  p.end_list();
}

void write_optional_ns(Pickler& p, int64_t ns) {
  if (ns) p.integer(ns);
  else p.none();
}

std::atomic<bool> g_sigusr1{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the SIGUSR1 flag is set from a signal handler");

void on_sigusr1(int) { g_sigusr1.store(true); }

std::mutex g_active_mu;
std::weak_ptr<DumpWatchdog> g_active;

}  // namespace

const Config& config() {
  static const Config cfg = [] {
    Config c;
    c.buffer_size = static_cast<size_t>(env_int("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE", 2000));
    c.include_stack_trace = env_bool("TORCH_INCLUDE_STACK_TRACE", true);
    c.include_only_active = env_bool("TORCH_INCLUDE_ONLY_ACTIVE", false);
    c.dump_on_timeout = env_bool("TORCH_NCCL_DUMP_ON_TIMEOUT", true);
    c.coord_check_ms = static_cast<int>(std::max<int64_t>(10, env_int("TORCH_NCCL_COORD_CHECK_MILSEC", nullptr, 1000)));
    c.wait_dump_ms = static_cast<int>(env_int("TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC", nullptr, 15000));
    return c;
  }();
  return cfg;
}

std::string dump_path(int global_rank) {
  // Read at every dump (as PyTorch's DebugInfoWriter does at first use), so a process may point it elsewhere.
  if (const char* prefix = env_of("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"))
    return prefix + std::to_string(global_rank);
  std::string cache;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) cache = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home) cache = std::string(home) + "/.cache";
  else cache = "/tmp";
  // Only the default directory is created; a directory named by the variable must exist.
  mkdir_p(cache + "/torch");
  return cache + "/torch/comm_lib_trace_rank_" + std::to_string(global_rank);
}

CallerScope::CallerScope(CallerInfo info) : info_(std::move(info)), prev_(tls_caller) { tls_caller = &info_; }
CallerScope::~CallerScope() { tls_caller = prev_; }

// ------------------------------------------------------------------ FlightRecorder

FlightRecorder& FlightRecorder::get() {
  static FlightRecorder* instance = new FlightRecorder();  // leaked on purpose (see the header)
  return *instance;
}

FlightRecorder::FlightRecorder() : capacity_(config().buffer_size) { entries_.reserve(std::min<size_t>(capacity_, 1 << 16)); }

int64_t FlightRecorder::record(Entry e) {
  std::lock_guard<std::mutex> g(mu_);
  e.id = next_id_++;
  if (!e.is_p2p) e.group->last_enqueued = static_cast<int64_t>(e.collective_seq_id);
  int64_t id = e.id;
  if (entries_.size() < capacity_) {
    entries_.push_back(std::move(e));
  } else {
    entries_[next_] = std::move(e);
  }
  next_ = (next_ + 1) % capacity_;
  return id;
}

FlightRecorder::Entry* FlightRecorder::find_locked(int64_t id) {
  // Ids are consecutive from first_id_, each in slot (id - first_id_) % capacity: an overwritten entry has
  // another id there, and an entry from before a reset is gone.
  if (id < first_id_ || id >= next_id_) return nullptr;
  Entry& e = entries_[static_cast<size_t>(id - first_id_) % capacity_];
  return e.id == id ? &e : nullptr;
}

void FlightRecorder::started(int64_t id) {
  std::lock_guard<std::mutex> g(mu_);
  Entry* e = find_locked(id);
  if (!e) return;
  e->time_started_ns = wall_ns();
  e->started_mono_ns = mono_ns();
  if (!e->is_p2p) e->group->last_started = std::max<int64_t>(e->group->last_started, e->collective_seq_id);
}

void FlightRecorder::finished(int64_t id, bool ok) {
  std::lock_guard<std::mutex> g(mu_);
  Entry* e = find_locked(id);
  if (!e) return;
  // A failed op is retired without completing: PyTorch's mark of an op that timed out or was aborted.
  e->retired = true;
  if (!ok) return;
  e->time_completed_ns = wall_ns();
  e->completed_mono_ns = mono_ns();
  if (!e->is_p2p) e->group->last_completed = std::max<int64_t>(e->group->last_completed, e->collective_seq_id);
}

void FlightRecorder::reset() {
  std::lock_guard<std::mutex> g(mu_);
  entries_.clear();
  next_ = 0;
  first_id_ = next_id_;  // ids are never reused: a Work issued before the reset must not find a new entry
}

std::shared_ptr<GroupInfo> FlightRecorder::new_group(std::string name, std::string desc, std::vector<int> ranks) {
  auto info = std::make_shared<GroupInfo>();
  info->name = std::move(name);
  info->desc = std::move(desc);
  info->ranks = std::move(ranks);
  std::lock_guard<std::mutex> g(mu_);
  info->pg_id = next_pg_id_++;
  groups_.erase(std::remove_if(groups_.begin(), groups_.end(), [](const auto& w) { return w.expired(); }),
                groups_.end());
  groups_.push_back(info);
  return info;
}

std::string FlightRecorder::dump(bool include_collectives, bool include_stack_traces, bool only_active) {
  std::lock_guard<std::mutex> g(mu_);
  // Groups by name; a name reused after destroy/init shows the newest group (the highest pg_id).
  std::map<std::string, const GroupInfo*> by_name;
  std::map<int, const GroupInfo*> by_id;
  auto note = [&](const GroupInfo* gi) {
    auto it = by_name.find(gi->name);
    if (it == by_name.end() || it->second->pg_id < gi->pg_id) by_name[gi->name] = gi;
    by_id[gi->pg_id] = gi;
  };
  for (const auto& w : groups_)
    if (auto gi = w.lock()) note(gi.get());
  std::vector<const Entry*> order;
  const size_t n = entries_.size();
  const size_t first = n < capacity_ ? 0 : next_;  // oldest first
  for (size_t k = 0; k < n; ++k) {
    const Entry& e = entries_[(first + k) % n];
    note(e.group.get());
    if (only_active && e.time_completed_ns) continue;
    order.push_back(&e);
  }
  std::string libs;
  for (const auto& e : entries_) {
    std::string lib = e.profiling_name.substr(0, e.profiling_name.find(':'));
    if (libs.find(lib) == std::string::npos) libs += (libs.empty() ? "" : ",") + lib;
  }

  Pickler p;
  p.begin_dict();
  p.key("version").str(kVersion);
  p.key("comm_lib_version").str(libs.empty() ? "ring" : libs);
  p.key("pg_config").begin_dict();
  for (const auto& [name, gi] : by_name) {
    p.str(name);
    p.begin_dict();
    p.key("name").str(gi->name);
    p.key("desc").str(gi->desc);
    p.key("ranks").str(ranks_str(gi->ranks));
    p.end_dict();
  }
  p.end_dict();
  p.key("pg_status").begin_dict();
  for (const auto& [id, gi] : by_id) {
    p.str(std::to_string(id));
    p.begin_dict();
    p.key("last_enqueued_collective").integer(gi->last_enqueued);
    p.key("last_started_collective").integer(gi->last_started);
    p.key("last_completed_collective").integer(gi->last_completed);
    p.end_dict();
  }
  p.end_dict();
  if (include_collectives) {
    p.key("entries").begin_list();
    for (const Entry* e : order) {
      p.begin_dict();
      p.key("record_id").integer(e->id);
      p.key("pg_id").integer(e->group->pg_id);
      p.key("process_group").str(e->group->name);  // a (name, desc) tuple
      p.str(e->group->desc);
      p.tuple2();
      p.key("collective_seq_id").integer(static_cast<int64_t>(e->collective_seq_id));
      p.key("p2p_seq_id").integer(static_cast<int64_t>(e->p2p_seq_id));
      p.key("op_id").integer(static_cast<int64_t>(e->op_id));
      p.key("profiling_name").str(e->profiling_name);
      p.key("time_created_ns").integer(e->time_created_ns);
      if (e->completed_mono_ns && e->started_mono_ns)
        p.key("duration_ms").real(static_cast<double>(e->completed_mono_ns - e->started_mono_ns) / 1e6);
      write_sizes(p.key("input_sizes"), e->input_sizes);
      write_dtypes(p.key("input_dtypes"), e->input_sizes.size(), e->dtype);
      write_sizes(p.key("output_sizes"), e->output_sizes);
      write_dtypes(p.key("output_dtypes"), e->output_sizes.size(), e->dtype);
      p.key("state").str(e->time_completed_ns ? "completed" : e->time_started_ns ? "started" : "scheduled");
      write_optional_ns(p.key("time_discovered_started_ns"), e->time_started_ns);
      write_optional_ns(p.key("time_discovered_completed_ns"), e->time_completed_ns);
      p.key("retired").boolean(e->retired);
      p.key("timeout_ms").integer(static_cast<int64_t>(e->timeout_ms));
      p.key("is_p2p").boolean(e->is_p2p);
      p.key("thread_name").str(e->thread_name);
      p.key("thread_id").str(e->thread_id);
      if (include_stack_traces) {
        p.key("frames").begin_list();
        for (const Frame& f : e->frames) {
          p.begin_dict();
          p.key("name").str(f.code->name);
          p.key("filename").str(f.code->filename);
          p.key("line").integer(f.line);
          p.end_dict();
        }
        p.end_list();
      }
      p.end_dict();
    }
    p.end_list();
  }
  p.end_dict();
  return p.finish();
}

// ------------------------------------------------------------------ GroupTrace

GroupTrace::GroupTrace(int rank, int size) : rank_(rank), info_(std::make_shared<GroupInfo>()) {
  // Until the Python layer names it (a backend made directly): an unnamed group of ranks 0..size-1.
  info_->pg_id = -1;
  info_->name = info_->desc = "undefined";
  for (int r = 0; r < size; ++r) info_->ranks.push_back(r);
}

void GroupTrace::set_group(std::string name, std::string desc, std::vector<int> ranks) {
  std::lock_guard<std::mutex> g(mu_);
  if (ranks.size() != info_->ranks.size())
    throw DistError("flight recorder: group '" + name + "' has " + std::to_string(info_->ranks.size()) +
                    " ranks, but " + std::to_string(ranks.size()) + " global ranks were given");
  info_ = FlightRecorder::get().new_group(std::move(name), std::move(desc), std::move(ranks));
}

int GroupTrace::global_rank(int group_rank) const {
  std::lock_guard<std::mutex> g(mu_);
  return info_->ranks.at(group_rank);
}

int64_t GroupTrace::record(const char* backend, const char* op, uint64_t collective_seq, int peer, DType t,
                           size_t in_count, size_t out_count, double timeout_s) {
  FlightRecorder& rec = FlightRecorder::get();
  if (!rec.enabled()) return -1;
  FlightRecorder::Entry e;
  e.is_p2p = collective_seq == 0;
  {
    std::lock_guard<std::mutex> g(mu_);
    e.group = info_;
    e.op_id = ++op_id_;
    if (e.is_p2p) ++p2p_seq_;
    else last_collective_seq_ = collective_seq;
    e.collective_seq_id = last_collective_seq_;
    e.p2p_seq_id = p2p_seq_;
  }
  e.profiling_name = std::string(backend) + ":" + op;
  // PyTorch's p2p names carry group ranks: "send 0->1" on the sender, "recv 1<-0" on the receiver.
  if (e.is_p2p && std::strcmp(op, "send") == 0) e.profiling_name += " " + std::to_string(rank_) + "->" + std::to_string(peer);
  if (e.is_p2p && std::strcmp(op, "recv") == 0) e.profiling_name += " " + std::to_string(rank_) + "<-" + std::to_string(peer);
  CallerInfo* caller = tls_caller;
  if (caller && caller->has_sizes) {
    e.input_sizes = caller->input_sizes;
    e.output_sizes = caller->output_sizes;
  } else {
    e.input_sizes = {{static_cast<int64_t>(in_count)}};
    e.output_sizes = {{static_cast<int64_t>(out_count)}};
  }
  if (caller) e.frames = std::move(caller->frames);  // one backend call records one op
  e.dtype = t;
  e.time_created_ns = wall_ns();
  e.timeout_ms = timeout_s * 1000.0;
  const ThreadIdentity& th = this_thread();
  e.thread_name = th.name;
  e.thread_id = th.id;
  return rec.record(std::move(e));
}

// ------------------------------------------------------------------ dumps

std::string write_dump(int global_rank, bool include_stack_traces, bool only_active) {
  const std::string path = dump_path(global_rank);
  const std::string data = FlightRecorder::get().dump(true, include_stack_traces, only_active);
  // A reader never sees half a dump: write a temporary file next to it, then rename.
  const std::string tmp = path + ".tmp" + std::to_string(static_cast<long>(::getpid()));
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw DistError("flight recorder: cannot write " + tmp + ": " + std::strerror(errno));
  bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(::fileno(f)) == 0 && ok;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    throw DistError("flight recorder: cannot write " + path + ": " + err);
  }
  return path;
}

namespace {

void dump_and_log(int rank, const std::string& why) {
  try {
    const std::string path = write_dump(rank, config().include_stack_trace, config().include_only_active);
    std::fprintf(stderr,
                 "[rank %d] flight recorder: %s; wrote %s (analyze with: python -m "
                 "tinytorch.distributed.flight_recorder.fr_trace DIR -p PREFIX)\n",
                 rank, why.c_str(), path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] flight recorder: %s; the dump failed: %s\n", rank, why.c_str(), e.what());
  }
}

}  // namespace

void on_collective_failure(int global_rank) {
  if (!FlightRecorder::get().enabled() || !config().dump_on_timeout) return;
  if (auto w = DumpWatchdog::active()) {
    w->on_failure();
    return;
  }
  dump_and_log(global_rank, "a collective failed on this rank");
}

// ------------------------------------------------------------------ DumpWatchdog

DumpWatchdog::DumpWatchdog(const std::string& store_host, int store_port, std::string prefix, int rank,
                           int world_size)
    : prefix_(std::move(prefix)), rank_(rank), world_size_(world_size) {
  // A short store timeout: a dead store must not hold up a failing rank or shutdown for long.
  store_ = std::make_unique<TCPStore>(store_host, store_port, -1, false, 5.0, false, -1);
  store_->set_timeout(2.0);
  struct sigaction old {};
  if (::sigaction(SIGUSR1, nullptr, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO)) {
    struct sigaction sa {};
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    installed_sigusr1_ = ::sigaction(SIGUSR1, &sa, nullptr) == 0;
  }
  thread_ = std::thread([this] { loop(); });
}

DumpWatchdog::~DumpWatchdog() { stop(); }

std::shared_ptr<DumpWatchdog> DumpWatchdog::active() {
  std::lock_guard<std::mutex> g(g_active_mu);
  return g_active.lock();
}

void DumpWatchdog::set_active(const std::shared_ptr<DumpWatchdog>& w) {
  std::lock_guard<std::mutex> g(g_active_mu);
  g_active = w;
}

void DumpWatchdog::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> g(g_active_mu);
    if (auto w = g_active.lock(); w.get() == this) g_active.reset();
  }
  // Back to the default, unless someone (Python's signal module) has installed a handler of its own since.
  struct sigaction now {};
  if (installed_sigusr1_ && ::sigaction(SIGUSR1, nullptr, &now) == 0 && now.sa_handler == on_sigusr1) {
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGUSR1, &sa, nullptr);
  }
}

void DumpWatchdog::dump_once(const std::string& why) {
  if (dumped_.exchange(true)) return;
  dump_and_log(rank_, why);
  if (!store_ok_) return;
  try {
    store_->set(key("fr/dumped/" + std::to_string(rank_)), "1");
  } catch (const std::exception&) {
    store_ok_ = false;
  }
}

void DumpWatchdog::on_failure() {
  if (store_ok_) {
    try {
      store_->compare_set(key("exception_dump"), "", std::to_string(rank_));
    } catch (const std::exception&) {
      store_ok_ = false;
    }
  }
  dump_once("a collective failed on this rank, every rank was asked to dump");
  if (store_ok_) wait_for_dumps();
}

void DumpWatchdog::wait_for_dumps() {
  // Exits before the others have dumped would let a launcher stop them first. A rank still alive beats
  // every coord_check_ms; one whose beat stands still for two periods is dead and is not waited for.
  const Config& cfg = config();
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(cfg.wait_dump_ms);
  const auto dead_after = start + std::chrono::milliseconds(2 * cfg.coord_check_ms + 500);
  std::map<int, int64_t> pending;  // rank -> its beat count when the wait began
  try {
    for (int r = 0; r < world_size_; ++r)
      if (r != rank_) pending[r] = store_->add(key("fr/beat/" + std::to_string(r)), 0);
    while (!pending.empty() && Clock::now() < deadline) {
      const bool may_be_dead = Clock::now() > dead_after;
      for (auto it = pending.begin(); it != pending.end();) {
        const std::string r = std::to_string(it->first);
        if (store_->check({key("fr/dumped/" + r)}) ||
            (may_be_dead && store_->add(key("fr/beat/" + r), 0) == it->second))
          it = pending.erase(it);
        else
          ++it;
      }
      if (!pending.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception&) {
    store_ok_ = false;  // the store went away (its host exited): nobody else can be waited for
  }
}

void DumpWatchdog::loop() {
  const Config& cfg = config();
  auto next_poll = Clock::now();
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    // SIGUSR1 only sets a flag; this thread notices it within 100 ms.
    cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return stop_; });
    if (stop_) break;
    lk.unlock();
    if (g_sigusr1.exchange(false)) dump_and_log(rank_, "SIGUSR1 received");
    if (cfg.dump_on_timeout && store_ok_ && Clock::now() >= next_poll) {
      next_poll = Clock::now() + std::chrono::milliseconds(cfg.coord_check_ms);
      try {
        store_->add(key("fr/beat/" + std::to_string(rank_)), 1);
        if (!dumped_ && store_->check({key("exception_dump")})) {
          std::string src = store_->get(key("exception_dump"));
          dump_once("dump signal from rank " + src + " observed via the store");
        }
      } catch (const std::exception&) {
        store_ok_ = false;  // the store's host is gone; SIGUSR1 still works
      }
    }
    lk.lock();
  }
}

}  // namespace tinytorch::dist::fr
