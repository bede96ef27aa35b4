// Verilator testbench for a generated top_<arch>.v (tcu_hw): AXI-Stream instruction feeder,
// two AXI4 slave DRAM models with protocol checks, completion by the flush probe (TCU.md §7).
//
// Built by sim/verilator_backend.py with -DTCU_TOP=<Vtop_x> -DTCU_TOP_HEADER="<Vtop_x.h>".
// Usage: tb <config file>; the config holds key value lines (see sim/verilator_backend.py).
// Exit status: 0 done, 2 bad usage or file, 3 AXI protocol violation, 4 did not finish.
// Prints one JSON object with cycles, counters and the top's status outputs on standard
// output. Fault tests: a misbehaving slave (fault_port, fault_kind, fault_after: the kinds of
// sim.axi_model.AxiFault), a cut instruction stream (feed_bytes), and `recover 1`: after the
// faulty run ends (or hangs), hold reset, read the status outputs, and run the program
// again with well-behaved slaves.
//
// Waveforms: a build with --trace or --trace-fst (VM_TRACE) writes every signal of the top
// to `trace_path` (VCD or FST, by the build) for the cycles `trace_first`..`trace_last`
// (inclusive; each optional), or, with `trace_pc_from`/`trace_pc_to`, from the
// first cycle the program counter reaches pc_from to `trace_drain` cycles after it passes
// pc_to (the PyRTL backend's window; the build makes the program counter readable, see
// sim/verilator_backend.py). One cycle is 1 ns: the clock is low at cycle*1000 ps and high
// at cycle*1000+500 ps. A build without tracing ignores these keys.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "verilated.h"
#include TCU_TOP_HEADER
#if VM_TRACE
#include "verilated_syms.h"
#endif
#if VM_TRACE_FST
#include "verilated_fst_c.h"
typedef VerilatedFstC TraceFile;
#elif VM_TRACE
#include "verilated_vcd_c.h"
typedef VerilatedVcdC TraceFile;
#endif

// ------------------------------------------------------------------ wide-signal helpers
template <typename T> static void put(T& v, const uint8_t* b, int nbytes) {
    uint64_t x = 0;
    for (int i = nbytes - 1; i >= 0; --i) x = (x << 8) | b[i];
    v = static_cast<T>(x);
}
template <std::size_t N> static void put(VlWide<N>& v, const uint8_t* b, int nbytes) {
    for (std::size_t w = 0; w < N; ++w) {
        uint32_t x = 0;
        for (int k = 3; k >= 0; --k) {
            int i = int(w) * 4 + k;
            x = (x << 8) | (i < nbytes ? b[i] : 0);
        }
        v[w] = x;
    }
}
template <typename T> static void get(const T& v, uint8_t* b, int nbytes) {
    uint64_t x = static_cast<uint64_t>(v);
    for (int i = 0; i < nbytes; ++i) { b[i] = x & 0xff; x >>= 8; }
}
template <std::size_t N> static void get(const VlWide<N>& v, uint8_t* b, int nbytes) {
    for (int i = 0; i < nbytes; ++i) b[i] = (v[i / 4] >> (8 * (i % 4))) & 0xff;
}

// ------------------------------------------------------------------ configuration
struct Config {
    std::map<std::string, std::string> kv;
    std::string s(const std::string& k) const {
        auto it = kv.find(k);
        if (it == kv.end()) { fprintf(stderr, "tb: missing config key %s\n", k.c_str()); exit(2); }
        return it->second;
    }
    uint64_t u(const std::string& k) const { return std::stoull(s(k)); }
    uint64_t u(const std::string& k, uint64_t otherwise) const {
        return kv.count(k) ? u(k) : otherwise;
    }
    double f(const std::string& k) const { return std::stod(s(k)); }
};

static std::vector<uint8_t> read_file(const std::string& path) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) { fprintf(stderr, "tb: cannot read %s\n", path.c_str()); exit(2); }
    fseek(f, 0, SEEK_END);
    std::vector<uint8_t> data(size_t(ftell(f)));
    fseek(f, 0, SEEK_SET);
    if (!data.empty() && fread(data.data(), 1, data.size(), f) != data.size()) {
        fprintf(stderr, "tb: cannot read %s\n", path.c_str()); exit(2);
    }
    fclose(f);
    return data;
}

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd() {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return uint32_t(rng_state >> 16);
}
static bool chance(double p) { return p > 0 && (rnd() & 0xffff) < p * 65536.0; }

static uint64_t cycle = 0;

// ------------------------------------------------------------------ waveform window
#if VM_TRACE
struct Trace {
    std::unique_ptr<TraceFile> file;
    uint64_t first = 0, last = ~uint64_t(0);    // cycle window (inclusive)
    const uint32_t* pc = nullptr;               // program-counter window, when set
    uint64_t pc_from = 0, pc_to = 0, drain = 0, stop = ~uint64_t(0);
    bool started = false, on = false;           // on: this cycle is dumped
    uint64_t cycles = 0, first_cycle = 0;

    // called once a cycle, with the clock low and the inputs evaluated
    void begin_cycle() {
        if (!file) return;
        if (pc) {
            started = started || *pc >= pc_from;
            if (started && stop == ~uint64_t(0) && *pc > pc_to) stop = cycle + drain;
            on = started && cycle < stop;
        } else {
            on = cycle >= first && cycle <= last;
        }
        if (on && !cycles++) first_cycle = cycle;
    }
    void dump(bool high) {
        if (on) file->dump(cycle * 1000 + (high ? 500 : 0));
    }
};
static Trace trace;

// the core's program counter (32 bits): the trace build makes TCU_PC_VAR public in the scope
// TCU_PC_SCOPE (both given with -D by sim/verilator_backend.py)
static const uint32_t* program_counter() {
    const VerilatedScope* scope = Verilated::threadContextp()->scopeFind(TCU_PC_SCOPE);
    const VerilatedVar* var = scope ? scope->varFind(TCU_PC_VAR) : nullptr;
    if (!var) {
        fprintf(stderr, "tb: no public %s in %s: cannot follow the program counter\n",
                TCU_PC_VAR, TCU_PC_SCOPE);
        exit(2);
    }
    return static_cast<const uint32_t*>(var->datap());
}
#define TRACE_BEGIN_CYCLE() trace.begin_cycle()
#define TRACE_DUMP(high) trace.dump(high)
#else
#define TRACE_BEGIN_CYCLE() ((void)0)
#define TRACE_DUMP(high) ((void)0)
#endif

// the waveform's first cycle and length as JSON members ("" without a waveform); closes it
static std::string trace_close() {
#if VM_TRACE
    if (!trace.file) return "";
    trace.file->close();
    trace.file.reset();
    std::ostringstream o;
    o << "\"trace\": {\"first_cycle\": " << trace.first_cycle << ", \"cycles\": "
      << trace.cycles << "}, ";
    return o.str();
#else
    return "";
#endif
}

[[noreturn]] static void violation(const char* port, const std::string& what) {
    fprintf(stderr, "AXI protocol violation on %s at cycle %llu: %s\n", port,
            (unsigned long long)cycle, what.c_str());
    const std::string traced = trace_close();
    printf("{\"violation\": \"%s: %s\", %s\"cycles\": %llu}\n", port, what.c_str(),
           traced.c_str(), (unsigned long long)cycle);
    exit(3);
}

// ------------------------------------------------------------------ AXI4 slave model
struct Burst { uint64_t addr; uint32_t beats; uint64_t ready_at; uint32_t done; uint32_t resp; };

// sim.axi_model.FAULT_KINDS, in order (0: none)
enum FaultKind { NO_FAULT = 0, SLVERR = 1, DECERR = 2, NO_READ_DATA = 3, NO_WRITE_RESPONSE = 4 };
static const uint64_t NEVER = ~uint64_t(0);

struct AxiSlave {
    const char* name;
    std::vector<uint8_t> mem;
    int beat_bytes;
    uint32_t latency, write_latency, outstanding;
    double stall;
    int fault = NO_FAULT;
    uint64_t fault_after = 0;
    std::deque<Burst> reads, writes, bresps;
    uint64_t bursts_r = 0, bursts_w = 0, beats_r = 0, beats_w = 0, written = 0;
    // previous-cycle valid/payload for the stability rule
    bool ar_pending = false, aw_pending = false, w_pending = false;
    uint64_t ar_prev = 0, aw_prev = 0;
    std::vector<uint8_t> w_prev;
    // what the slave drives this cycle
    bool arready = 0, awready = 0, wready = 0, rvalid = 0, rlast = 0, bvalid = 0;
    uint32_t rresp = 0, bresp = 0;
    std::vector<uint8_t> rdata;

    // the response code and answer cycle of the burst after `before` bursts of its direction
    uint32_t response(uint64_t before) const {
        return before < fault_after ? 0 : fault == SLVERR ? 2 : fault == DECERR ? 3 : 0;
    }
    uint64_t due(uint64_t before, int silent_kind, uint32_t wait) const {
        return fault == silent_kind && before >= fault_after ? NEVER : cycle + wait;
    }

    void check_burst(uint64_t addr, uint32_t len, uint32_t size, uint32_t burst, bool write) {
        const char* ch = write ? "AW" : "AR";
        if (burst != 1) violation(name, std::string(ch) + " burst type is not INCR");
        if ((1u << size) != uint32_t(beat_bytes))
            violation(name, std::string(ch) + " size does not match the data width");
        uint64_t bytes = uint64_t(len + 1) * beat_bytes;
        if (addr % beat_bytes) violation(name, std::string(ch) + " address not beat-aligned");
        if ((addr % 4096) + bytes > 4096)
            violation(name, std::string(ch) + " burst crosses a 4 KiB boundary");
        if (addr + bytes > mem.size()) {
            std::ostringstream m;
            m << ch << " burst at " << addr << " (" << bytes << " bytes) is outside the "
              << mem.size() << "-byte memory";
            violation(name, m.str());
        }
    }

    // decide the slave's outputs for this cycle (registered behaviour)
    void drive() {
        arready = reads.size() < outstanding && !chance(stall);
        awready = writes.size() < outstanding && !chance(stall);
        wready = !writes.empty() && !chance(stall);
        bool hold = rvalid;                 // a beat offered stays offered until taken
        rvalid = false; rlast = false;
        if (!reads.empty() && reads.front().ready_at <= cycle && (hold || !chance(stall))) {
            Burst& b = reads.front();
            rvalid = true;
            rlast = b.done + 1 == b.beats;
            rresp = b.resp;
            uint64_t a = b.addr + uint64_t(b.done) * beat_bytes;
            std::memcpy(rdata.data(), &mem[a], beat_bytes);
        }
        bvalid = !bresps.empty() && bresps.front().ready_at <= cycle;
        bresp = bresps.empty() ? 0 : bresps.front().resp;
    }

    void ar(bool valid, uint64_t addr, uint32_t len, uint32_t size, uint32_t burst) {
        uint64_t payload = addr ^ (uint64_t(len) << 32) ^ (uint64_t(size) << 40);
        if (ar_pending && (!valid || payload != ar_prev))
            violation(name, "ARVALID dropped or AR payload changed before ARREADY");
        ar_pending = valid && !arready; ar_prev = payload;
        if (valid && arready) {
            check_burst(addr, len, size, burst, false);
            reads.push_back({addr, len + 1, due(bursts_r, NO_READ_DATA, latency), 0,
                             response(bursts_r)});
            ++bursts_r;
        }
    }
    void aw(bool valid, uint64_t addr, uint32_t len, uint32_t size, uint32_t burst) {
        uint64_t payload = addr ^ (uint64_t(len) << 32) ^ (uint64_t(size) << 40);
        if (aw_pending && (!valid || payload != aw_prev))
            violation(name, "AWVALID dropped or AW payload changed before AWREADY");
        aw_pending = valid && !awready; aw_prev = payload;
        if (valid && awready) {
            check_burst(addr, len, size, burst, true);
            writes.push_back({addr, len + 1, 0, 0, 0});
            ++bursts_w;
        }
    }
    void w(bool valid, const uint8_t* data, bool last, bool strb_ok) {
        if (w_pending && (!valid || std::memcmp(w_prev.data(), data, beat_bytes) != 0 ||
                          w_prev[beat_bytes] != last))
            violation(name, "WVALID dropped or W payload changed before WREADY");
        w_pending = valid && !wready;
        if (w_pending) {
            std::memcpy(w_prev.data(), data, beat_bytes);
            w_prev[beat_bytes] = last;
        }
        if (valid && wready) {
            if (!strb_ok) violation(name, "WSTRB is not all ones");
            Burst& b = writes.front();
            bool expect_last = b.done + 1 == b.beats;
            if (last != expect_last)
                violation(name, last ? "WLAST before the burst's last beat"
                                     : "no WLAST on the burst's last beat");
            std::memcpy(&mem[b.addr + uint64_t(b.done) * beat_bytes], data, beat_bytes);
            ++beats_w;
            if (++b.done == b.beats) {
                bresps.push_back({0, 0, due(written, NO_WRITE_RESPONSE, write_latency), 0,
                                  response(written)});
                ++written;
                writes.pop_front();
            }
        }
    }
    void r(bool ready) {
        if (rvalid && ready) {
            ++beats_r;
            if (++reads.front().done == reads.front().beats) reads.pop_front();
            rvalid = false;
        }
    }
    void b(bool ready) { if (bvalid && ready) bresps.pop_front(); }
    bool idle() const { return reads.empty() && writes.empty() && bresps.empty(); }
    // grows with every burst accepted and every beat moved: a change is progress
    uint64_t activity() const { return bursts_r + bursts_w + beats_r + beats_w; }
};

#define SLAVE_IO(S, P)                                                                   \
    do {                                                                                 \
        top->P##_arready = S.arready; top->P##_awready = S.awready;                      \
        top->P##_wready = S.wready; top->P##_rvalid = S.rvalid;                          \
        top->P##_rlast = S.rlast; top->P##_rresp = S.rvalid ? S.rresp : 0;              \
        top->P##_rid = 0;                                                                \
        if (S.rvalid) put(top->P##_rdata, S.rdata.data(), S.beat_bytes);                 \
        top->P##_bvalid = S.bvalid; top->P##_bresp = S.bvalid ? S.bresp : 0;            \
        top->P##_bid = 0;                                                                \
    } while (0)

#define SLAVE_SAMPLE(S, P)                                                               \
    do {                                                                                 \
        S.ar(top->P##_arvalid, top->P##_araddr, top->P##_arlen, top->P##_arsize,         \
             top->P##_arburst);                                                          \
        S.aw(top->P##_awvalid, top->P##_awaddr, top->P##_awlen, top->P##_awsize,         \
             top->P##_awburst);                                                          \
        bool ok = true;                                                                  \
        if (top->P##_wvalid) {                                                           \
            get(top->P##_wdata, wbuf.data(), S.beat_bytes);                              \
            get(top->P##_wstrb, sbuf.data(), (S.beat_bytes + 7) / 8);                    \
            for (int i = 0; i < S.beat_bytes; ++i) ok &= (sbuf[i / 8] >> (i % 8)) & 1;  \
        }                                                                                \
        S.w(top->P##_wvalid, wbuf.data(), top->P##_wlast, ok);                           \
        S.r(top->P##_rready);                                                            \
        S.b(top->P##_bready);                                                            \
    } while (0)

// ------------------------------------------------------------------ one run of the program
struct Params {
    std::vector<uint8_t> prog, pattern;
    uint64_t probe_src, probe_dst, max_cycles, stall_cycles;
    double feed_stall;
    int beat_bytes, vector_bytes;
};

struct Outcome {
    bool done = false;
    uint64_t cycles = 0, error_at = 0;
    size_t fed = 0;
    std::string why;                 // why a run that did not finish stopped
};

struct Status { int error, timeout, dram_timeout, idle; };

static Status status(const TCU_TOP* top) {
    return {int(top->error), int(top->timeout), int(top->dram_timeout), int(top->idle)};
}
static std::string status_json(const Status& st) {
    std::ostringstream o;
    o << "\"error\": " << st.error << ", \"timeout_flag\": " << st.timeout
      << ", \"dram_timeout\": " << st.dram_timeout << ", \"idle\": " << st.idle;
    return o.str();
}

// drive the slaves' inputs, evaluate, sample the handshakes, then `before_edge()` (which
// still sees this cycle's outputs), clock: one cycle
template <typename F>
static void step(TCU_TOP* top, AxiSlave* s, std::vector<uint8_t>& wbuf, std::vector<uint8_t>& sbuf,
                 F before_edge) {
    s[0].drive(); s[1].drive();
    SLAVE_IO(s[0], m_axi_dram0);
    SLAVE_IO(s[1], m_axi_dram1);
    top->clock = 0;
    top->eval();
    TRACE_BEGIN_CYCLE();
    TRACE_DUMP(false);
    SLAVE_SAMPLE(s[0], m_axi_dram0);
    SLAVE_SAMPLE(s[1], m_axi_dram1);
    before_edge();
    top->clock = 1;
    top->eval();
    TRACE_DUMP(true);
    ++cycle;
}

// hold reset (active low) for a few cycles with the slaves' inputs quiet
static void hold_reset(TCU_TOP* top) {
    top->instruction_tvalid = 0;
    top->m_axi_dram0_arready = top->m_axi_dram0_awready = top->m_axi_dram0_wready = 0;
    top->m_axi_dram0_rvalid = top->m_axi_dram0_bvalid = 0;
    top->m_axi_dram1_arready = top->m_axi_dram1_awready = top->m_axi_dram1_wready = 0;
    top->m_axi_dram1_rvalid = top->m_axi_dram1_bvalid = 0;
    top->reset = 0;
    for (int i = 0; i < 4; ++i) { top->clock = 1; top->eval(); top->clock = 0; top->eval(); }
    top->reset = 1;
    top->eval();
}

static Outcome run_program(TCU_TOP* top, AxiSlave* s, const Params& p, size_t feed_limit) {
    std::vector<uint8_t> wbuf(p.beat_bytes), sbuf(p.beat_bytes / 8 + 8), word(p.beat_bytes);
    const int beat_bytes = p.beat_bytes;
    std::memcpy(&s[0].mem[p.probe_src], p.pattern.data(), p.vector_bytes);
    std::memset(&s[0].mem[p.probe_dst], 0, p.vector_bytes);
    Outcome o;
    uint64_t quiet = 0, last_activity = 0;
    size_t word_at = size_t(-1);
    const uint64_t start = cycle;
    const size_t feed = std::min(feed_limit, p.prog.size());
    while (true) {
        const uint64_t ran = cycle - start;
        if (quiet >= p.stall_cycles || (p.max_cycles && ran >= p.max_cycles)) {
            std::ostringstream m;
            if (quiet >= p.stall_cycles)
                m << "nothing moved for " << quiet << " cycles at cycle " << ran;
            else
                m << "did not finish in " << p.max_cycles << " cycles";
            m << " (" << o.fed << " of " << p.prog.size() << " instruction bytes fed)";
            o.why = m.str();
            o.cycles = ran;
            return o;
        }
        // drive inputs for this cycle
        bool tvalid = o.fed < feed && !chance(p.feed_stall);
        if (tvalid && o.fed != word_at) {
            std::memset(word.data(), 0, beat_bytes);
            std::memcpy(word.data(), &p.prog[o.fed],
                        std::min<size_t>(beat_bytes, p.prog.size() - o.fed));
            put(top->instruction_tdata, word.data(), beat_bytes);
            word_at = o.fed;
        }
        top->instruction_tvalid = tvalid;
        top->instruction_tlast = o.fed + beat_bytes >= p.prog.size();
        step(top, s, wbuf, sbuf, [&] {
            if (tvalid && top->instruction_tready) o.fed += beat_bytes;
            if (top->error && !o.error_at) o.error_at = cycle - start + 1;
            const uint64_t activity = o.fed + s[0].activity() + s[1].activity();
            quiet = activity == last_activity ? quiet + 1 : 0;
            last_activity = activity;
        });
        if (o.fed >= p.prog.size() &&
            std::memcmp(&s[0].mem[p.probe_dst], p.pattern.data(), p.vector_bytes) == 0) {
            o.done = true;
            o.cycles = cycle - start;
            return o;
        }
    }
}

int main(int argc, char** argv) {
    if (argc < 2) { fprintf(stderr, "usage: tb CONFIG\n"); return 2; }
    Config cfg;
    {
        std::ifstream in(argv[1]);
        if (!in) { fprintf(stderr, "tb: cannot read %s\n", argv[1]); return 2; }
        std::string line;             // key, one space, value (to the end of the line)
        while (std::getline(in, line)) {
            const size_t at = line.find(' ');
            if (at != std::string::npos) cfg.kv[line.substr(0, at)] = line.substr(at + 1);
        }
    }
    Verilated::commandArgs(1, argv);
#if VM_TRACE
    if (cfg.kv.count("trace_path")) Verilated::traceEverOn(true);
#endif
    auto top = std::make_unique<TCU_TOP>();
#if VM_TRACE
    if (cfg.kv.count("trace_path")) {
        trace.file = std::make_unique<TraceFile>();
        top->trace(trace.file.get(), 99);
        trace.file->set_time_unit("1ps");
        trace.file->set_time_resolution("1ps");
        trace.file->open(cfg.s("trace_path").c_str());
        if (!trace.file->isOpen()) {
            fprintf(stderr, "tb: cannot write %s\n", cfg.s("trace_path").c_str());
            return 2;
        }
        trace.first = cfg.u("trace_first", 0);
        trace.last = cfg.u("trace_last", ~uint64_t(0));
        if (cfg.kv.count("trace_pc_from")) {
            trace.pc = program_counter();
            trace.pc_from = cfg.u("trace_pc_from");
            trace.pc_to = cfg.u("trace_pc_to");
            trace.drain = cfg.u("trace_drain", 0);
        }
    }
#endif

    Params p;
    p.beat_bytes = int(cfg.u("beat_bytes"));
    p.vector_bytes = int(cfg.u("vector_bytes"));
    p.prog = read_file(cfg.s("program"));
    rng_state ^= cfg.u("seed") * 0x9E3779B97F4A7C15ull;
    auto slave = [&](int k) {
        AxiSlave sl{k ? "dram1" : "dram0", read_file(cfg.s(k ? "dram1_in" : "dram0_in")),
                    p.beat_bytes, uint32_t(cfg.u("latency")), uint32_t(cfg.u("write_latency")),
                    uint32_t(cfg.u("outstanding")), cfg.f("stall")};
        sl.rdata.assign(p.beat_bytes, 0);
        sl.w_prev.assign(p.beat_bytes + 1, 0);
        return sl;
    };
    AxiSlave s[2] = {slave(0), slave(1)};
    const int fault_port = int(cfg.u("fault_port", 2));        // 2: no fault
    if (fault_port < 2) {
        s[fault_port].fault = int(cfg.u("fault_kind"));
        s[fault_port].fault_after = cfg.u("fault_after", 0);
    }

    // flush probe: the pattern at DRAM0[depth-1] must appear at DRAM0[depth-2]
    p.probe_src = cfg.u("probe_src") * p.vector_bytes;
    p.probe_dst = cfg.u("probe_dst") * p.vector_bytes;
    p.pattern.assign(p.vector_bytes, 0);
    const std::string hex = cfg.s("pattern");          // a valid vector of the data type
    if (hex.size() != size_t(2 * p.vector_bytes)) { fprintf(stderr, "tb: bad pattern\n"); return 2; }
    for (int i = 0; i < p.vector_bytes; ++i)
        p.pattern[i] = uint8_t(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    p.max_cycles = cfg.u("max_cycles");         // 0: no limit
    p.stall_cycles = cfg.u("stall_cycles");     // hung after this many quiet cycles
    p.feed_stall = cfg.f("feed_stall");
    const size_t feed_bytes = size_t(cfg.u("feed_bytes", 0));   // 0: the whole program
    const bool recover = cfg.u("recover", 0) != 0;

    const auto started = std::chrono::steady_clock::now();
    top->clock = 0;
    hold_reset(top.get());
    Outcome o = run_program(top.get(), s, p, feed_bytes ? feed_bytes : p.prog.size());
    std::string first;
    if (recover) {
        // the faulty run's end and the status right after reset, then a clean run
        std::ostringstream m;
        m << "\"first\": {\"done\": " << int(o.done) << ", \"cycles\": " << o.cycles << ", "
          << status_json(status(top.get())) << "}, ";
        hold_reset(top.get());
        m << "\"after_reset\": {" << status_json(status(top.get())) << "}, ";
        first = m.str();
        s[0] = slave(0);
        s[1] = slave(1);
        o = run_program(top.get(), s, p, p.prog.size());
    }
    if (!o.done) {
        fprintf(stderr, "tb: %s\n", o.why.c_str());
        const std::string traced = trace_close();
        printf("{\"timeout\": true, %s%s\"cycles\": %llu, \"why\": \"%s\", %s}\n",
               first.c_str(), traced.c_str(), (unsigned long long)o.cycles, o.why.c_str(),
               status_json(status(top.get())).c_str());
        return 4;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const Status end = status(top.get());
    // let the last write responses drain so the images are final
    {
        std::vector<uint8_t> wbuf(p.beat_bytes), sbuf(p.beat_bytes / 8 + 8);
        for (int i = 0; i < 64 && !(s[0].idle() && s[1].idle()); ++i)
            step(top.get(), s, wbuf, sbuf, [] {});
    }
    std::memset(&s[0].mem[p.probe_src], 0, p.vector_bytes);
    std::memset(&s[0].mem[p.probe_dst], 0, p.vector_bytes);
    for (int k = 0; k < 2; ++k) {
        std::ofstream out(cfg.s(k ? "dram1_out" : "dram0_out"), std::ios::binary);
        out.write(reinterpret_cast<const char*>(s[k].mem.data()), s[k].mem.size());
    }
    first += trace_close();
    printf("{%s\"cycles\": %llu, \"sim_seconds\": %.6f, %s, \"error_cycle\": %llu, "
           "\"dram0\": {\"read_bursts\": %llu, \"write_bursts\": %llu, \"read_beats\": %llu, "
           "\"write_beats\": %llu}, \"dram1\": {\"read_bursts\": %llu, \"write_bursts\": %llu, "
           "\"read_beats\": %llu, \"write_beats\": %llu}}\n",
           first.c_str(), (unsigned long long)o.cycles, seconds, status_json(end).c_str(),
           (unsigned long long)o.error_at,
           (unsigned long long)s[0].bursts_r, (unsigned long long)s[0].bursts_w,
           (unsigned long long)s[0].beats_r, (unsigned long long)s[0].beats_w,
           (unsigned long long)s[1].bursts_r, (unsigned long long)s[1].bursts_w,
           (unsigned long long)s[1].beats_r, (unsigned long long)s[1].beats_w);
    top->final();
    return 0;
}
