// Verilator testbench for a generated top_<arch>.v (tcu_hw): AXI-Stream instruction feeder,
// two AXI4 slave DRAM models with protocol checks, completion by the flush probe (TCU.md §7).
//
// Built by sim/verilator_backend.py with -DTCU_TOP=<Vtop_x> -DTCU_TOP_HEADER="<Vtop_x.h>".
// Usage: tb <config file>; the config holds key value lines (see sim/verilator_backend.py).
// Exit status: 0 done, 2 bad usage or file, 3 AXI protocol violation, 4 did not finish.
// Prints one JSON object with cycles and counters on standard output.

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

[[noreturn]] static void violation(const char* port, const std::string& what) {
    fprintf(stderr, "AXI protocol violation on %s at cycle %llu: %s\n", port,
            (unsigned long long)cycle, what.c_str());
    printf("{\"violation\": \"%s: %s\", \"cycles\": %llu}\n", port, what.c_str(),
           (unsigned long long)cycle);
    exit(3);
}

// ------------------------------------------------------------------ AXI4 slave model
struct Burst { uint64_t addr; uint32_t beats; uint64_t ready_at; uint32_t done; };

struct AxiSlave {
    const char* name;
    std::vector<uint8_t> mem;
    int beat_bytes;
    uint32_t latency, write_latency, outstanding;
    double stall;
    std::deque<Burst> reads, writes, bresps;
    uint64_t bursts_r = 0, bursts_w = 0, beats_r = 0, beats_w = 0;
    // previous-cycle valid/payload for the stability rule
    bool ar_pending = false, aw_pending = false, w_pending = false;
    uint64_t ar_prev = 0, aw_prev = 0;
    std::vector<uint8_t> w_prev;
    // what the slave drives this cycle
    bool arready = 0, awready = 0, wready = 0, rvalid = 0, rlast = 0, bvalid = 0;
    std::vector<uint8_t> rdata;

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
            uint64_t a = b.addr + uint64_t(b.done) * beat_bytes;
            std::memcpy(rdata.data(), &mem[a], beat_bytes);
        }
        bvalid = !bresps.empty() && bresps.front().ready_at <= cycle;
    }

    void ar(bool valid, uint64_t addr, uint32_t len, uint32_t size, uint32_t burst) {
        uint64_t payload = addr ^ (uint64_t(len) << 32) ^ (uint64_t(size) << 40);
        if (ar_pending && (!valid || payload != ar_prev))
            violation(name, "ARVALID dropped or AR payload changed before ARREADY");
        ar_pending = valid && !arready; ar_prev = payload;
        if (valid && arready) {
            check_burst(addr, len, size, burst, false);
            reads.push_back({addr, len + 1, cycle + latency, 0});
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
            writes.push_back({addr, len + 1, 0, 0});
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
                bresps.push_back({0, 0, cycle + write_latency, 0});
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
        top->P##_rlast = S.rlast; top->P##_rresp = 0; top->P##_rid = 0;                  \
        if (S.rvalid) put(top->P##_rdata, S.rdata.data(), S.beat_bytes);                 \
        top->P##_bvalid = S.bvalid; top->P##_bresp = 0; top->P##_bid = 0;                \
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

int main(int argc, char** argv) {
    if (argc < 2) { fprintf(stderr, "usage: tb CONFIG\n"); return 2; }
    Config cfg;
    {
        std::ifstream in(argv[1]);
        if (!in) { fprintf(stderr, "tb: cannot read %s\n", argv[1]); return 2; }
        std::string k, v;
        while (in >> k >> v) cfg.kv[k] = v;
    }
    Verilated::commandArgs(1, argv);
    auto top = std::make_unique<TCU_TOP>();

    const int beat_bytes = int(cfg.u("beat_bytes"));
    const int vector_bytes = int(cfg.u("vector_bytes"));
    std::vector<uint8_t> prog = read_file(cfg.s("program"));
    rng_state ^= cfg.u("seed") * 0x9E3779B97F4A7C15ull;
    AxiSlave s[2] = {
        {"dram0", read_file(cfg.s("dram0_in")), beat_bytes, uint32_t(cfg.u("latency")),
         uint32_t(cfg.u("write_latency")), uint32_t(cfg.u("outstanding")), cfg.f("stall")},
        {"dram1", read_file(cfg.s("dram1_in")), beat_bytes, uint32_t(cfg.u("latency")),
         uint32_t(cfg.u("write_latency")), uint32_t(cfg.u("outstanding")), cfg.f("stall")}};
    for (auto& sl : s) { sl.rdata.assign(beat_bytes, 0); sl.w_prev.assign(beat_bytes + 1, 0); }
    std::vector<uint8_t> wbuf(beat_bytes), sbuf(beat_bytes / 8 + 8), word(beat_bytes);

    // flush probe: the pattern at DRAM0[depth-1] must appear at DRAM0[depth-2]
    const uint64_t probe_src = cfg.u("probe_src") * vector_bytes;
    const uint64_t probe_dst = cfg.u("probe_dst") * vector_bytes;
    std::vector<uint8_t> pattern(vector_bytes);
    const std::string hex = cfg.s("pattern");          // a valid vector of the data type
    if (hex.size() != size_t(2 * vector_bytes)) { fprintf(stderr, "tb: bad pattern\n"); return 2; }
    for (int i = 0; i < vector_bytes; ++i) pattern[i] = uint8_t(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    std::memcpy(&s[0].mem[probe_src], pattern.data(), vector_bytes);
    std::memset(&s[0].mem[probe_dst], 0, vector_bytes);

    const uint64_t max_cycles = cfg.u("max_cycles");      // 0: no limit
    const uint64_t stall_cycles = cfg.u("stall_cycles");  // hung after this many quiet cycles
    uint64_t quiet = 0, last_activity = 0;
    const double feed_stall = cfg.f("feed_stall");
    size_t fed = 0, word_at = size_t(-1);
    uint64_t done_at = 0, error_at = 0;
    bool done = false;

    const auto started = std::chrono::steady_clock::now();
    top->clock = 0; top->reset = 0;
    for (int i = 0; i < 4; ++i) { top->clock = 1; top->eval(); top->clock = 0; top->eval(); }
    top->reset = 1;

    while (!done) {
        if (quiet >= stall_cycles || (max_cycles && cycle >= max_cycles)) {
            if (quiet >= stall_cycles)
                fprintf(stderr, "tb: nothing moved for %llu cycles at cycle %llu (%zu of %zu "
                        "instruction bytes fed)\n", (unsigned long long)quiet,
                        (unsigned long long)cycle, fed, prog.size());
            else
                fprintf(stderr, "tb: did not finish in %llu cycles (%zu of %zu instruction "
                        "bytes fed)\n", (unsigned long long)max_cycles, fed, prog.size());
            printf("{\"timeout\": true, \"cycles\": %llu}\n", (unsigned long long)cycle);
            return 4;
        }
        // drive inputs for this cycle
        bool tvalid = fed < prog.size() && !chance(feed_stall);
        if (tvalid && fed != word_at) {
            std::memset(word.data(), 0, beat_bytes);
            std::memcpy(word.data(), &prog[fed], std::min<size_t>(beat_bytes, prog.size() - fed));
            put(top->instruction_tdata, word.data(), beat_bytes);
            word_at = fed;
        }
        top->instruction_tvalid = tvalid;
        top->instruction_tlast = fed + beat_bytes >= prog.size();
        s[0].drive(); s[1].drive();
        SLAVE_IO(s[0], m_axi_dram0);
        SLAVE_IO(s[1], m_axi_dram1);
        top->clock = 0;
        top->eval();
        // sample handshakes before the edge
        if (tvalid && top->instruction_tready) fed += beat_bytes;
        SLAVE_SAMPLE(s[0], m_axi_dram0);
        SLAVE_SAMPLE(s[1], m_axi_dram1);
        if (top->error && !error_at) error_at = cycle + 1;
        const uint64_t activity = fed + s[0].activity() + s[1].activity();
        quiet = activity == last_activity ? quiet + 1 : 0;
        last_activity = activity;
        top->clock = 1;
        top->eval();
        ++cycle;
        if (fed >= prog.size() &&
            std::memcmp(&s[0].mem[probe_dst], pattern.data(), vector_bytes) == 0) {
            done = true;
            done_at = cycle;
        }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    // let the last write responses drain so the images are final
    for (int i = 0; i < 64 && !(s[0].idle() && s[1].idle()); ++i) {
        s[0].drive(); s[1].drive();
        SLAVE_IO(s[0], m_axi_dram0); SLAVE_IO(s[1], m_axi_dram1);
        top->clock = 0; top->eval();
        SLAVE_SAMPLE(s[0], m_axi_dram0); SLAVE_SAMPLE(s[1], m_axi_dram1);
        top->clock = 1; top->eval(); ++cycle;
    }
    std::memset(&s[0].mem[probe_src], 0, vector_bytes);
    std::memset(&s[0].mem[probe_dst], 0, vector_bytes);
    for (int k = 0; k < 2; ++k) {
        std::ofstream out(cfg.s(k ? "dram1_out" : "dram0_out"), std::ios::binary);
        out.write(reinterpret_cast<const char*>(s[k].mem.data()), s[k].mem.size());
    }
    printf("{\"cycles\": %llu, \"sim_seconds\": %.6f, \"error\": %d, \"error_cycle\": %llu, "
           "\"idle\": %d, "
           "\"dram0\": {\"read_bursts\": %llu, \"write_bursts\": %llu, \"read_beats\": %llu, "
           "\"write_beats\": %llu}, \"dram1\": {\"read_bursts\": %llu, \"write_bursts\": %llu, "
           "\"read_beats\": %llu, \"write_beats\": %llu}}\n",
           (unsigned long long)done_at, seconds, int(top->error), (unsigned long long)error_at,
           int(top->idle),
           (unsigned long long)s[0].bursts_r, (unsigned long long)s[0].bursts_w,
           (unsigned long long)s[0].beats_r, (unsigned long long)s[0].beats_w,
           (unsigned long long)s[1].bursts_r, (unsigned long long)s[1].bursts_w,
           (unsigned long long)s[1].beats_r, (unsigned long long)s[1].beats_w);
    top->final();
    return 0;
}
