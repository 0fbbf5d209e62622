// The pipelines of Tally's conformance corpora (tools/corpus/README.md), written with Halide's C++
// API: shared by the corpus generator (corpus_generator.cpp), which lowers and compiles them with
// Halide, and by the Halide bridge's conformance runner (test/halide/bridge_corpus.cpp), which
// compiles the same pipelines through Tally's bridge. Float constants: see CorpusDefs.h.

#include "CorpusDefs.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace Halide;

namespace corpus {

const char *const kBaseTarget = "x86-64-linux-sse41-avx-avx2";

std::string type_name(const Type &t) {
    if (t.is_bool()) {
        return "bool";
    }
    std::string kind = t.is_float() ? "float" : t.is_uint() ? "uint" : "int";
    return kind + std::to_string(t.bits());
}

namespace {

/** Adds an input buffer argument. */
void add_input(Def &d, const ImageParam &p, std::vector<int> extents, std::vector<int> mins,
               double lo, double hi) {
    d.args.push_back(p);
    d.inputs.push_back({p.name(), p.type(), extents, mins, lo, hi});
    d.order += 'i';
}

template <typename T>
void add_scalar(Def &d, const Param<T> &p, const std::string &value) {
    d.args.push_back(p);
    d.scalars.push_back({p.name(), p.type(), value});
    d.order += 's';
}

/** Adds an output's shape (mins default to 0); its type is read off the pipeline later. */
void add_output(Def &d, std::vector<int> extents, std::vector<int> mins = {}) {
    if (mins.empty()) {
        mins.assign(extents.size(), 0);
    }
    d.outputs.push_back({Type(), extents, mins});
}

/** Constants of types Halide's Expr constructors do not take without ambiguity. */
Expr f64c(double v) {
    return Internal::make_const(Float(64), v);
}
Expr u32c(uint32_t v) {
    return Internal::make_const(UInt(32), uint64_t(v));
}
Expr u64c(uint64_t v) {
    return Internal::make_const(UInt(64), v);
}

Var x("x"), y("y"), c("c"), n("n"), k("k");

/** The outputs of a pipeline of many small Funcs of one shape, each of (x) or (x, y) and
 * vectorized along x: each becomes an output of the Def (in the order added) and a Func the
 * profiler must name. */
class FuncOutputs {
public:
    FuncOutputs(Def &d, std::vector<int> extents, int lanes)
        : d(d), extents(std::move(extents)), lanes(lanes) {}

    /** Adds the Func `name` computing `e`; returns it for more scheduling. */
    Func add(const std::string &name, const Expr &e) {
        Func f(name);
        if (extents.size() == 1) {
            f(x) = e;
        } else {
            f(x, y) = e;
        }
        f.vectorize(x, lanes);
        funcs.push_back(f);
        add_output(d, extents);
        d.funcs.push_back(name);
        return f;
    }

    Pipeline pipeline() const { return Pipeline(funcs); }

private:
    Def &d;
    std::vector<int> extents;
    int lanes;
    std::vector<Func> funcs;
};

// ---------------------------------------------------------------------------------------------
// The pipelines. Each returns a Def; names are unique (they become symbols).

/** Separable 3-tap blur: sliding window and storage folding inside parallel strips. */
Def sep_blur() {
    Def d;
    ImageParam in(UInt(16), 2, "in");
    Func cl = BoundaryConditions::repeat_edge(in);
    Func bx("bx"), by("by");
    bx(x, y) = cast<uint16_t>((cast<uint32_t>(cl(x - 1, y)) + cl(x, y) + cl(x + 1, y)) / 3);
    by(x, y) = cast<uint16_t>((cast<uint32_t>(bx(x, y - 1)) + bx(x, y) + bx(x, y + 1)) / 3);
    Var yo("yo"), yi("yi");
    by.split(y, yo, yi, 16).parallel(yo).vectorize(x, 8);
    bx.store_at(by, yo).compute_at(by, yi).vectorize(x, 8);
    d.pipeline = Pipeline(by);
    add_input(d, in, {64, 48}, {0, 0}, 0, 65535);
    add_output(d, {64, 48});
    d.funcs = {"bx", "by"};
    return d;
}

/** 3x3 box blur reading a halo (input mins -1,-1), tiled, intermediate computed per tile. */
Def blur3x3_halo() {
    Def d;
    ImageParam in(UInt(8), 2, "in");
    Func hx("hx"), hy("hy");
    hx(x, y) = cast<uint16_t>(in(x - 1, y)) + in(x, y) + in(x + 1, y);
    hy(x, y) = cast<uint8_t>((hx(x, y - 1) + hx(x, y) + hx(x, y + 1)) / 9);
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    hy.tile(x, y, xo, yo, xi, yi, 16, 8).vectorize(xi, 8).unroll(yi, 2).parallel(yo);
    hx.compute_at(hy, xo).vectorize(x, 8);
    d.pipeline = Pipeline(hy);
    add_input(d, in, {66, 50}, {-1, -1}, 0, 255);
    add_output(d, {64, 48});
    d.funcs = {"hx", "hy"};
    return d;
}

/** Split tails: RoundUp (an intermediate), ShiftInwards and GuardWithIf (the output), on an
 * output 67x45 that no split factor divides. */
Def split_tails() {
    Def d;
    ImageParam in(Int(32), 2, "in");
    Func cl = BoundaryConditions::repeat_edge(in);
    Func ta("ta"), tb("tb"), tc("tc");
    ta(x, y) = cl(x, y) * 3 + 1;
    tb(x, y) = ta(x, y) - ta(x + 1, y) * 2;
    tc(x, y) = tb(x, y) + ta(x, y + 1);
    Var xo("xo"), xi("xi"), yo("yo"), yi("yi");
    ta.compute_root().split(x, xo, xi, 8, TailStrategy::RoundUp).vectorize(xi);
    tb.compute_root().split(x, xo, xi, 8, TailStrategy::ShiftInwards).vectorize(xi);
    tc.split(x, xo, xi, 8, TailStrategy::GuardWithIf)
        .split(y, yo, yi, 4, TailStrategy::GuardWithIf)
        .vectorize(xi);
    d.pipeline = Pipeline(tc);
    add_input(d, in, {67, 45}, {0, 0}, -100000, 100000);
    add_output(d, {67, 45});
    d.funcs = {"ta", "tb", "tc"};
    return d;
}

/** Vectorize and unroll with int16 select/min/max/clamp and Euclidean division and modulo of
 * negative numbers. */
Def vec_unroll() {
    Def d;
    ImageParam a(Int(16), 2, "a"), b(Int(16), 2, "b");
    Func va("va"), vo("vo");
    va(x, y) = select(a(x, y) > b(x, y), a(x, y) - b(x, y), b(x, y) * 2);
    vo(x, y) = clamp(va(x, y), -700, 900) + max(a(x, y), b(x, y)) / 7 + min(a(x, y), b(x, y)) % 5 +
               a(x, y) / b(x, y);
    vo.vectorize(x, 16).unroll(y, 2);
    va.compute_at(vo, y).vectorize(x, 16).unroll(x, 2);
    d.pipeline = Pipeline(vo);
    add_input(d, a, {64, 48}, {0, 0}, -1000, 1000);
    add_input(d, b, {64, 48}, {0, 0}, 1, 300);
    add_output(d, {64, 48});
    d.funcs = {"va", "vo"};
    return d;
}

/** rfactor: row sums vectorized through an rfactor'd intermediate, and a 0-D total computed in
 * parallel through another. Two outputs. */
Def rfactor_sum() {
    Def d;
    ImageParam in(Int(32), 2, "in");
    Func rowsum("rowsum"), total("total");
    RDom r(0, 64, "r");
    rowsum(y) = 0;
    rowsum(y) += in(r, y);
    RDom t(0, 64, 0, 48, "t");
    total() = 0;
    total() += in(t.x, t.y);
    RVar ro("ro"), ri("ri");
    Var u("u");
    Func rs_intm = rowsum.update().split(r, ro, ri, 16).rfactor(ri, u);
    rs_intm.compute_root().vectorize(u, 8);
    rs_intm.update().vectorize(u, 8);
    RVar tyo("tyo"), tyi("tyi");
    Var v("v");
    Func tot_intm = total.update().split(t.y, tyo, tyi, 8).rfactor(tyo, v);
    tot_intm.compute_root().update().parallel(v);
    d.pipeline = Pipeline({rowsum, total});
    add_input(d, in, {64, 48}, {0, 0}, -1000, 1000);
    add_output(d, {48});
    add_output(d, {});
    d.funcs = {"rowsum", "total"};
    return d;
}

/** Update definitions over RDoms: a prefix sum along x (serial in x, parallel in y) and a
 * triangular update through RDom::where. */
Def rdom_scan() {
    Def d;
    ImageParam in(UInt(32), 2, "in");
    Func scan("scan");
    scan(x, y) = in(x, y);
    RDom r(1, 63, "r");
    scan(r, y) += scan(r - 1, y);
    RDom tri(0, 64, 0, 48, "tri");
    tri.where(tri.x < tri.y);
    scan(tri.x, tri.y) = scan(tri.x, tri.y) * 2 + 1;
    scan.parallel(y).vectorize(x, 8);
    scan.update(0).parallel(y);
    scan.update(1).parallel(tri.y);
    d.pipeline = Pipeline(scan);
    add_input(d, in, {64, 48}, {0, 0}, 0, 4000);
    add_output(d, {64, 48});
    d.funcs = {"scan"};
    return d;
}

/** Tuples: an argmax reduction (index and value) per row, and a pure two-element Tuple. */
Def tuple_argmax() {
    Def d;
    ImageParam in(Float(32), 2, "in");
    Func am("am"), pair("pair");
    RDom r(0, 64, "r");
    am(y) = Tuple(0, in(0, y));
    Expr better = in(r, y) > am(y)[1];
    am(y) = Tuple(select(better, r, am(y)[0]), select(better, in(r, y), am(y)[1]));
    pair(x, y) = Tuple(in(x, y) * 2.0f + 0.25f, cast<int32_t>(floor(in(x, y) * 64.0f)));
    pair.vectorize(x, 8).parallel(y);
    am.compute_root();
    d.pipeline = Pipeline({am, pair});
    add_input(d, in, {64, 48}, {0, 0}, -4, 4);
    add_output(d, {48});
    add_output(d, {48});
    add_output(d, {64, 48});
    add_output(d, {64, 48});
    d.is_float = true;
    d.rtol = 1e-6;
    d.atol = 1e-6;
    d.funcs = {"am", "pair"};
    return d;
}

/** specialize: on a bool scalar, on an int scalar and on the input's width. */
Def specialize_p() {
    Def d;
    ImageParam in(UInt(8), 2, "in");
    Param<bool> flag("flag");
    Param<int32_t> mode("mode");
    Func sp("sp");
    sp(x, y) = select(flag, cast<int16_t>(in(x, y)) + mode, cast<int16_t>(in(x, y)) - mode * 3);
    sp.specialize(flag && mode == 2).vectorize(x, 16);
    sp.specialize(in.width() % 32 == 0).parallel(y).vectorize(x, 8);
    d.pipeline = Pipeline(sp);
    add_input(d, in, {64, 48}, {0, 0}, 0, 255);
    add_scalar(d, flag, "true");
    add_scalar(d, mode, "2");
    add_output(d, {64, 48});
    d.funcs = {"sp"};
    return d;
}

/** async and fork: two compute_root producers run as async tasks, one consumer. */
Def async_fork() {
    Def d;
    ImageParam in(UInt(8), 2, "in");
    Func fa("fa"), fb("fb"), fo("fo");
    fa(x, y) = cast<uint16_t>(in(x, y)) + 1;
    fb(x, y) = cast<uint16_t>(in(x, y)) * 2;
    fo(x, y) = fa(x, y) + fb(x, y);
    fa.compute_root().async();
    fb.compute_root().async();
    d.pipeline = Pipeline(fo);
    add_input(d, in, {64, 48}, {0, 0}, 0, 255);
    add_output(d, {64, 48});
    d.funcs = {"fa", "fb", "fo"};
    return d;
}

/** async producer at a loop level with store_root: a sliding 3-tap window whose folded storage
 * is handed from producer to consumer through semaphores. */
Def async_store() {
    Def d;
    ImageParam in(UInt(8), 2, "in");
    Func cl = BoundaryConditions::repeat_edge(in);
    Func ap("ap"), aq("aq");
    ap(x, y) = cast<uint16_t>(cl(x, y)) * 3;
    aq(x, y) = ap(x, y - 1) + ap(x, y) + ap(x, y + 1);
    ap.store_root().compute_at(aq, y).async().vectorize(x, 8);
    aq.vectorize(x, 8);
    d.pipeline = Pipeline(aq);
    add_input(d, in, {64, 48}, {0, 0}, 0, 255);
    add_output(d, {64, 48});
    d.funcs = {"ap", "aq"};
    return d;
}

/** atomic(): a histogram updated from parallel rows. */
Def atomic_hist() {
    Def d;
    ImageParam in(UInt(8), 2, "in");
    Func hist("hist");
    RDom r(0, 64, 0, 48, "r");
    hist(x) = 0;
    hist(cast<int32_t>(in(r.x, r.y))) += 1;
    hist.update().atomic().parallel(r.y);
    d.pipeline = Pipeline(hist);
    add_input(d, in, {64, 48}, {0, 0}, 0, 255);
    add_output(d, {256});
    d.funcs = {"hist"};
    return d;
}

/** prefetch of an input two rows ahead. */
Def prefetch_p() {
    Def d;
    ImageParam in(UInt(16), 2, "in");
    Func pf("pf");
    pf(x, y) = in(x, y) + in(x, y + 1);
    pf.prefetch(in, y, y, 2).vectorize(x, 8);
    d.pipeline = Pipeline(pf);
    add_input(d, in, {64, 49}, {0, 0}, 0, 30000);
    add_output(d, {64, 48});
    d.funcs = {"pf"};
    return d;
}

/** Boundary conditions: repeat_edge, constant_exterior, mirror_image and mirror_interior, on an
 * output whose mins are negative. */
Def boundary_modes() {
    Def d;
    ImageParam in(UInt(16), 2, "in");
    Func re = BoundaryConditions::repeat_edge(in);
    Func ce = BoundaryConditions::constant_exterior(in, 7);
    Func mi = BoundaryConditions::mirror_image(in);
    Func mt = BoundaryConditions::mirror_interior(in);
    Func bm("bm");
    bm(x, y) = cast<int32_t>(re(x - 2, y)) + ce(x + 2, y - 1) * 2 + mi(x - 3, y + 3) * 3 +
               mt(x + 3, y - 2) * 5;
    bm.vectorize(x, 8);
    d.pipeline = Pipeline(bm);
    add_input(d, in, {40, 30}, {0, 0}, 0, 1000);
    add_output(d, {52, 40}, {-6, -5});
    d.funcs = {"bm"};
    return d;
}

/** Unsigned fixed-point intrinsics on uint8 (vectorized so they print as vector intrinsics),
 * and lerp. One output each. */
Def fixed_point_u8() {
    Def d;
    ImageParam a(UInt(8), 2, "a"), b(UInt(8), 2, "b"), w(UInt(8), 2, "w");
    FuncOutputs out(d, {64, 48}, 16);
    Expr ea = a(x, y), eb = b(x, y), ew = w(x, y);
    out.add("u_wmul", widening_mul(ea, eb));
    out.add("u_wadd", widening_add(ea, eb));
    out.add("u_wsub", widening_sub(ea, eb));
    out.add("u_hadd", halving_add(ea, eb));
    out.add("u_rhadd", rounding_halving_add(ea, eb));
    out.add("u_hsub", halving_sub(ea, eb));
    out.add("u_rshr", rounding_shift_right(widening_mul(ea, eb), 5));
    out.add("u_sadd", saturating_add(ea, eb));
    out.add("u_ssub", saturating_sub(ea, eb));
    out.add("u_msr", mul_shift_right(ea, eb, 8));
    out.add("u_rmsr", rounding_mul_shift_right(ea, eb, 8));
    out.add("u_absd", absd(ea, eb));
    out.add("u_lerp", lerp(ea, eb, ew));
    out.add("u_scast", saturating_cast<uint8_t>(widening_add(ea, eb)));
    d.pipeline = out.pipeline();
    add_input(d, a, {64, 48}, {0, 0}, 0, 255);
    add_input(d, b, {64, 48}, {0, 0}, 0, 255);
    add_input(d, w, {64, 48}, {0, 0}, 0, 255);
    return d;
}

/** Signed fixed-point intrinsics on int16 (Q15 multiplies, signed shifts and saturation). */
Def fixed_point_s16() {
    Def d;
    ImageParam a(Int(16), 2, "a"), b(Int(16), 2, "b"), s(Int(16), 2, "s");
    FuncOutputs out(d, {64, 48}, 8);
    Expr ea = a(x, y), eb = b(x, y), es = s(x, y);
    out.add("s_wmul", widening_mul(ea, eb));
    out.add("s_wsub", widening_sub(ea, eb));
    out.add("s_sadd", saturating_add(ea, eb));
    out.add("s_ssub", saturating_sub(ea, eb));
    out.add("s_hsub", halving_sub(ea, eb));
    out.add("s_rhadd", rounding_halving_add(ea, eb));
    out.add("s_rshr", rounding_shift_right(ea, es));
    out.add("s_rshl", rounding_shift_left(ea, es));
    out.add("s_q15", rounding_mul_shift_right(ea, eb, 15));
    out.add("s_msr", mul_shift_right(ea, eb, 15));
    out.add("s_absd", absd(ea, eb));
    out.add("s_wshl", widening_shift_left(ea, 3));
    out.add("s_lerp",
            lerp(cast<uint16_t>(cast<int32_t>(ea) + 32768),
                 cast<uint16_t>(cast<int32_t>(eb) + 32768), cast<uint16_t>(es + 4) * 4000));
    d.pipeline = out.pipeline();
    add_input(d, a, {64, 48}, {0, 0}, -32768, 32767);
    add_input(d, b, {64, 48}, {0, 0}, -32768, 32767);
    add_input(d, s, {64, 48}, {0, 0}, -4, 12);
    return d;
}

/** Bit counting and bitwise operations on uint32, int64 and uint64. */
Def bit_ops() {
    Def d;
    ImageParam a(UInt(32), 1, "a"), b(Int(64), 1, "b"), u(UInt(64), 1, "u");
    FuncOutputs out(d, {256}, 4);
    Expr ea = a(x), eb = b(x), eu = u(x);
    out.add("b_clz32", count_leading_zeros(ea));
    out.add("b_ctz32", count_trailing_zeros(ea));
    out.add("b_pop32", popcount(ea));
    out.add("b_clz64", count_leading_zeros(eb));
    out.add("b_pop64", popcount(eu));
    out.add("b_ctz64", count_trailing_zeros(eu));
    out.add("b_mix32", (ea ^ (ea >> 7)) | (~ea & cast<uint32_t>(0x00ff00ff)));
    out.add("b_mix64", (eu << 3) ^ (eu >> 11) ^ cast<uint64_t>(eb));
    out.add("b_sshr64", (eb >> 13) + (eb & cast<int64_t>(0xffff)));
    d.pipeline = out.pipeline();
    add_input(d, a, {256}, {0}, 0, 4294967295.0);
    add_input(d, b, {256}, {0}, -1e18, 1e18);
    add_input(d, u, {256}, {0}, 0, 1.8e19);
    return d;
}

/** Every integer element type in and out, with casts between them (wrapping narrow casts, no
 * signed overflow: Halide assumes none for 32 and 64 bits). */
Def types_int() {
    Def d;
    ImageParam i8(Int(8), 2, "i8"), u8(UInt(8), 2, "u8"), i16(Int(16), 2, "i16"),
        u16(UInt(16), 2, "u16"), i32(Int(32), 2, "i32"), u32(UInt(32), 2, "u32"),
        i64(Int(64), 2, "i64"), u64(UInt(64), 2, "u64");
    FuncOutputs out(d, {32, 16}, 8);
    Expr a = i8(x, y), b = u8(x, y), e = i16(x, y), f = u16(x, y), g = i32(x, y), h = u32(x, y),
         p = i64(x, y), q = u64(x, y);
    out.add("t_i8", cast<int8_t>(a * 3) + cast<int8_t>(b));
    out.add("t_u8", cast<uint8_t>(e) ^ b);
    out.add("t_i16", cast<int16_t>(f) - e / 3);
    out.add("t_u16", cast<uint16_t>(h >> 8) + f);
    out.add("t_i32", g / 7 + cast<int32_t>(a) * cast<int32_t>(e));
    out.add("t_u32", h * u32c(2654435761u) + cast<uint32_t>(g));
    out.add("t_i64", p + cast<int64_t>(g) * cast<int64_t>(h));
    out.add("t_u64", q * u64c(6364136223846793005ull) + cast<uint64_t>(p));
    for (ImageParam *ip : {&i8, &u8, &i16, &u16, &i32, &u32, &i64, &u64}) {
        d.args.push_back(*ip);
        d.order += 'i';
    }
    d.inputs = {{"i8", Int(8), {32, 16}, {0, 0}, -128, 127},
                {"u8", UInt(8), {32, 16}, {0, 0}, 0, 255},
                {"i16", Int(16), {32, 16}, {0, 0}, -32768, 32767},
                {"u16", UInt(16), {32, 16}, {0, 0}, 0, 65535},
                {"i32", Int(32), {32, 16}, {0, 0}, -1000000, 1000000},
                {"u32", UInt(32), {32, 16}, {0, 0}, 0, 4294967295.0},
                {"i64", Int(64), {32, 16}, {0, 0}, -1e15, 1e15},
                {"u64", UInt(64), {32, 16}, {0, 0}, 0, 1.8e19}};
    d.pipeline = out.pipeline();
    return d;
}

/** float16, float32 and float64 in and out: half arithmetic, conversions, floor/ceil/round,
 * sqrt, abs, min/max. */
Def types_float() {
    Def d;
    ImageParam h(Float(16), 2, "h"), f(Float(32), 2, "f"), g(Float(64), 2, "g");
    FuncOutputs out(d, {32, 16}, 8);
    Expr eh = h(x, y), ef = f(x, y), eg = g(x, y);
    out.add("f_f16", eh * eh + cast<float16_t>(ef));
    out.add("f_f32", floor(ef * 4.0f) + ceil(ef) - round(ef * 0.5f) + abs(ef) * cast<float>(eh) +
                         min(ef, 0.25f) - max(ef, -0.75f));
    out.add("f_f64", sqrt(abs(eg)) * eg + cast<double>(ef) - cast<double>(eh) * f64c(0.125));
    out.add("f_i32", cast<int32_t>(eg * f64c(1000.0)) + cast<int32_t>(ef * 64.0f));
    out.add("f_h2d", cast<double>(eh) * cast<double>(eh));
    d.pipeline = out.pipeline();
    add_input(d, h, {32, 16}, {0, 0}, -4, 4);
    add_input(d, f, {32, 16}, {0, 0}, -8, 8);
    add_input(d, g, {32, 16}, {0, 0}, -100, 100);
    d.is_float = true;
    d.rtol = 1e-5;
    d.atol = 1e-6;
    return d;
}

/** Halide's math functions on float32 and float64 (the transcendental ones go to libm, the
 * rest to LLVM intrinsics), and float classification of arbitrary bit patterns: NaNs, infinities
 * and denormals come from reinterpreting a uint32 input. Vectorized, so the calls are made per
 * lane. */
Def math_funcs() {
    Def d;
    ImageParam f(Float(32), 1, "f"), g(Float(64), 1, "g"), bits(UInt(32), 1, "bits");
    FuncOutputs out(d, {256}, 8);
    Expr ef = f(x), eg = g(x);
    // Inputs lie in (-0.9, 0.9): in range for asin, acos and atanh.
    out.add("m_trig", sin(ef) + cos(ef) * 0.5f + tan(ef) * 0.25f + asin(ef) + acos(ef) * 0.5f +
                          atan(ef) + atan2(ef, ef + 2.0f));
    out.add("m_hyp",
            sinh(ef) + cosh(ef) + tanh(ef) + asinh(ef) + acosh(ef * ef + 1.0f) + atanh(ef));
    out.add("m_exp", exp(ef) + log(ef * ef + 0.5f) + pow(ef + 1.0f, ef) + sqrt(ef + 1.0f));
    out.add("m_f64", sin(eg) + cos(eg) + tan(eg) + asin(eg) + acos(eg) + atan(eg) +
                         atan2(eg, eg + 2) + sinh(eg) + tanh(eg) + exp(eg) + log(eg + 2) +
                         pow(eg + 2, eg) + sqrt(eg + 1) + floor(eg * 8) + ceil(eg * 8) +
                         round(eg * 8) + trunc(eg * 8));
    Expr r = reinterpret<float>(bits(x));
    out.add("m_class",
            select(is_nan(r), 1, 0) + select(is_inf(r), 2, 0) + select(is_finite(r), 4, 0));
    d.pipeline = out.pipeline();
    add_input(d, f, {256}, {0}, -0.875, 0.875);
    add_input(d, g, {256}, {0}, -0.875, 0.875);
    // Every exponent field occurs: the high bits of the draws are uniform.
    add_input(d, bits, {256}, {0}, 0, 4294967295.0);
    d.is_float = true;
    d.rtol = 1e-6;
    d.atol = 1e-6;
    return d;
}

/** bool in and out: logic, select on bool buffers. */
Def types_bool() {
    Def d;
    ImageParam a(Bool(), 2, "a"), b(Bool(), 2, "b"), v(UInt(8), 2, "v");
    Func lg("lg"), sel("sel");
    lg(x, y) = (a(x, y) && !b(x, y)) || (v(x, y) > 128);
    sel(x, y) = select(a(x, y) != b(x, y), v(x, y), cast<uint8_t>(255 - v(x, y)));
    lg.vectorize(x, 16);
    sel.vectorize(x, 16);
    d.pipeline = Pipeline({lg, sel});
    add_input(d, a, {64, 48}, {0, 0}, 0, 1);
    add_input(d, b, {64, 48}, {0, 0}, 0, 1);
    add_input(d, v, {64, 48}, {0, 0}, 0, 255);
    add_output(d, {64, 48});
    add_output(d, {64, 48});
    d.funcs = {"lg", "sel"};
    return d;
}

/** Scalar arguments of every type. */
Def scalar_params() {
    Def d;
    ImageParam in(Float(32), 2, "in");
    Param<int8_t> p_i8("p_i8");
    Param<uint8_t> p_u8("p_u8");
    Param<int16_t> p_i16("p_i16");
    Param<uint16_t> p_u16("p_u16");
    Param<int32_t> p_i32("p_i32");
    Param<uint32_t> p_u32("p_u32");
    Param<int64_t> p_i64("p_i64");
    Param<uint64_t> p_u64("p_u64");
    Param<float16_t> p_f16("p_f16");
    Param<float> p_f32("p_f32");
    Param<double> p_f64("p_f64");
    Param<bool> p_b("p_b");
    Func sd("sd"), si("si");
    Expr ints = cast<double>(p_i8) + cast<double>(p_u8) * 2 + cast<double>(p_i16) * 3 +
                cast<double>(p_u16) + cast<double>(p_i32) + cast<double>(p_u32);
    sd(x, y) = cast<double>(in(x, y)) * p_f64 + ints + cast<double>(p_f16) +
               select(p_b, cast<double>(p_f32), f64c(-1.0));
    si(x, y) = cast<int64_t>(x) * p_i64 + cast<int64_t>(p_u64 >> 4) + y;
    sd.vectorize(x, 4);
    si.vectorize(x, 4);
    d.pipeline = Pipeline({sd, si});
    add_input(d, in, {32, 16}, {0, 0}, -1, 1);
    add_scalar(d, p_i8, "-100");
    add_scalar(d, p_u8, "200");
    add_scalar(d, p_i16, "-30000");
    add_scalar(d, p_u16, "60000");
    add_scalar(d, p_i32, "-2000000000");
    add_scalar(d, p_u32, "4000000000");
    add_scalar(d, p_i64, "-1099511627776");
    add_scalar(d, p_u64, "18000000000000000000");
    add_scalar(d, p_f16, "1.5");
    add_scalar(d, p_f32, "0.25");
    add_scalar(d, p_f64, "-2.75");
    add_scalar(d, p_b, "true");
    add_output(d, {32, 16});
    add_output(d, {32, 16});
    d.is_float = true;
    d.rtol = 1e-12;
    d.atol = 1e-12;
    d.funcs = {"sd", "si"};
    return d;
}

/** Bilateral grid (after Halide's app, much smaller): a grid built by an update over an RDom, a
 * separable blur of the grid, and a trilinear slice with a division. */
Def bilateral_grid() {
    Def d;
    ImageParam in(Float(32), 2, "in");
    const int s = 8;  // spatial cell; the range has 8 cells (in is in [0, 1))
    Func cl = BoundaryConditions::repeat_edge(in);
    Var z("z");
    Func histogram("histogram");
    RDom r(0, s, 0, s, "r");
    Expr val = clamp(cl(x * s + r.x - s / 2, y * s + r.y - s / 2), 0.0f, 1.0f);
    Expr zi = cast<int32_t>(val * 8.0f + 0.5f);
    histogram(x, y, z, c) = 0.0f;
    histogram(x, y, zi, c) += select(c == 0, val, 1.0f);
    Func bz("bz"), bxg("bxg"), byg("byg");
    bz(x, y, z, c) =
        histogram(x, y, z - 1, c) + histogram(x, y, z, c) * 2.0f + histogram(x, y, z + 1, c);
    bxg(x, y, z, c) = bz(x - 1, y, z, c) + bz(x, y, z, c) * 2.0f + bz(x + 1, y, z, c);
    byg(x, y, z, c) = bxg(x, y - 1, z, c) + bxg(x, y, z, c) * 2.0f + bxg(x, y + 1, z, c);
    Expr v = clamp(in(x, y), 0.0f, 1.0f) * 8.0f;
    Expr zv = clamp(cast<int32_t>(floor(v)), 0, 7);
    Expr zf = v - zv;
    Expr xf = cast<float>(x % s) * 0.125f, yf = cast<float>(y % s) * 0.125f;
    Expr xi = x / s, yi = y / s;
    Func interp("interp"), bgrid("bgrid");
    interp(x, y, c) =
        lerp(lerp(lerp(byg(xi, yi, zv, c), byg(xi + 1, yi, zv, c), xf),
                  lerp(byg(xi, yi + 1, zv, c), byg(xi + 1, yi + 1, zv, c), xf), yf),
             lerp(lerp(byg(xi, yi, zv + 1, c), byg(xi + 1, yi, zv + 1, c), xf),
                  lerp(byg(xi, yi + 1, zv + 1, c), byg(xi + 1, yi + 1, zv + 1, c), xf), yf),
             zf);
    bgrid(x, y) = interp(x, y, 0) / interp(x, y, 1);
    histogram.compute_root().reorder(c, z, x, y).parallel(y);
    histogram.update().reorder(c, r.x, r.y, x, y).unroll(c).parallel(y);
    bz.compute_root().reorder(c, z, x, y).parallel(y);
    bxg.compute_root().reorder(c, z, x, y).parallel(y);
    byg.compute_root().reorder(c, z, x, y).parallel(y);
    Var xo("xo"), yo("yo"), xii("xii"), yii("yii");
    bgrid.tile(x, y, xo, yo, xii, yii, 16, 8).vectorize(xii, 8).parallel(yo);
    d.pipeline = Pipeline(bgrid);
    add_input(d, in, {64, 48}, {0, 0}, 0, 1);
    add_output(d, {64, 48});
    d.is_float = true;
    d.rtol = 1e-4;
    d.atol = 1e-5;
    d.funcs = {"histogram", "bz", "bxg", "byg", "bgrid"};
    return d;
}

/** A local-Laplacian-style pyramid: Gaussian pyramid down (1 3 3 1)/8 twice, Laplacian levels,
 * a remapping curve per level, and the collapse back up. */
Def local_laplacian() {
    Def d;
    ImageParam in(Float(32), 2, "in");
    Func g0("g0");
    g0(x, y) = BoundaryConditions::repeat_edge(in)(x, y);
    auto down = [&](Func f, const std::string &name) {
        Func dx(name + "_dx"), dd(name);
        dx(x, y) =
            (f(2 * x - 1, y) + 3.0f * (f(2 * x, y) + f(2 * x + 1, y)) + f(2 * x + 2, y)) * 0.125f;
        dd(x, y) =
            (dx(x, 2 * y - 1) + 3.0f * (dx(x, 2 * y) + dx(x, 2 * y + 1)) + dx(x, 2 * y + 2)) *
            0.125f;
        dx.compute_root().vectorize(x, 8);
        dd.compute_root().vectorize(x, 8).parallel(y);
        return dd;
    };
    auto up = [&](Func f, const std::string &name) {
        Func ux(name + "_ux"), uu(name);
        ux(x, y) = lerp(f((x + 1) / 2 - 1, y), f((x + 1) / 2, y), 0.25f + (x % 2) * 0.5f);
        uu(x, y) = lerp(ux(x, (y + 1) / 2 - 1), ux(x, (y + 1) / 2), 0.25f + (y % 2) * 0.5f);
        return uu;
    };
    g0.compute_root();
    Func g1 = down(g0, "g1");
    Func g2 = down(g1, "g2");
    Func l0("l0"), l1("l1");
    l0(x, y) = g0(x, y) - up(g1, "u1")(x, y);
    l1(x, y) = g1(x, y) - up(g2, "u2")(x, y);
    auto remap = [](Expr v) { return v * 1.5f - v * v * v * 0.5f; };
    Func r1("r1"), llap("llap");
    r1(x, y) = up(g2, "v2")(x, y) + remap(l1(x, y));
    r1.compute_root().vectorize(x, 8);
    llap(x, y) = up(r1, "v1")(x, y) + remap(l0(x, y));
    llap.vectorize(x, 8).parallel(y);
    d.pipeline = Pipeline(llap);
    add_input(d, in, {64, 48}, {0, 0}, 0, 1);
    add_output(d, {64, 48});
    d.is_float = true;
    d.rtol = 1e-5;
    d.atol = 1e-6;
    d.funcs = {g0.name(), g1.name(), g2.name(), r1.name(), llap.name()};
    return d;
}

/** Tiled matrix multiply: tiles of the output, the reduction split and unrolled, vectorized. */
Def matmul_tiled() {
    Def d;
    ImageParam ma(Float(32), 2, "ma"), mb(Float(32), 2, "mb");
    Func mm("mm"), prod("prod");
    RDom r(0, 40, "r");
    prod(x, y) = 0.0f;
    prod(x, y) += ma(r, y) * mb(x, r);
    mm(x, y) = prod(x, y);
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    mm.tile(x, y, xo, yo, xi, yi, 16, 8).vectorize(xi, 8).parallel(yo);
    prod.compute_at(mm, xo).vectorize(x, 8);
    RVar ro("ro"), ri("ri");
    prod.update().split(r, ro, ri, 4).reorder(x, y, ri, ro).unroll(ri).vectorize(x, 8);
    d.pipeline = Pipeline(mm);
    add_input(d, ma, {40, 32}, {0, 0}, -1, 1);
    add_input(d, mb, {48, 40}, {0, 0}, -1, 1);
    add_output(d, {48, 32});
    d.is_float = true;
    d.rtol = 1e-5;
    d.atol = 1e-5;
    d.funcs = {"prod", "mm"};
    return d;
}

/** Camera-pipe-ish demosaic: an RGGB Bayer mosaic (uint16) to a 3-D uint8 image, with the
 * deinterleave, bilinear green/red/blue, a colour matrix and a gamma-like curve; c unrolled. */
Def demosaic() {
    Def d;
    ImageParam raw(UInt(16), 2, "raw");
    Func cl = BoundaryConditions::mirror_interior(raw);
    Func val("val");
    val(x, y) = cast<int32_t>(cl(x, y));
    Expr px = x % 2, py = y % 2;
    Expr g_here = px != py;  // G at (1,0) and (0,1) of each 2x2 cell
    Expr g_interp = (val(x - 1, y) + val(x + 1, y) + val(x, y - 1) + val(x, y + 1) + 2) / 4;
    Func green("green"), red("red"), blue("blue");
    green(x, y) = select(g_here, val(x, y), g_interp);
    Expr diag =
        (val(x - 1, y - 1) + val(x + 1, y - 1) + val(x - 1, y + 1) + val(x + 1, y + 1) + 2) / 4;
    Expr horiz = (val(x - 1, y) + val(x + 1, y) + 1) / 2;
    Expr vert = (val(x, y - 1) + val(x, y + 1) + 1) / 2;
    red(x, y) =
        select(px == 0 && py == 0, val(x, y), px == 1 && py == 1, diag, py == 0, horiz, vert);
    blue(x, y) =
        select(px == 1 && py == 1, val(x, y), px == 0 && py == 0, diag, py == 1, horiz, vert);
    Func rgb("rgb"), cam("cam");
    rgb(x, y, c) = select(c == 0, red(x, y) * 3 - green(x, y), c == 1, green(x, y) * 2,
                          blue(x, y) * 3 - green(x, y)) /
                   2;
    Expr lin = clamp(rgb(x, y, c), 0, 4095);
    cam(x, y, c) = cast<uint8_t>(select(lin < 512, lin / 4, 128 + (lin - 512) / 28));
    cam.bound(c, 0, 3).reorder(c, x, y).unroll(c).vectorize(x, 8).parallel(y);
    green.compute_at(cam, y).vectorize(x, 8);
    red.compute_at(cam, y).vectorize(x, 8);
    blue.compute_at(cam, y).vectorize(x, 8);
    d.pipeline = Pipeline(cam);
    add_input(d, raw, {64, 48}, {0, 0}, 0, 4095);
    add_output(d, {64, 48, 3});
    d.funcs = {"green", "red", "blue", "cam"};
    return d;
}

/** Histogram equalization: a histogram, its cumulative sum by a scan, and the lookup. */
Def hist_equalize() {
    Def d;
    ImageParam in(UInt(8), 2, "in");
    Func eh("eh"), cdf("cdf"), eq("eq");
    RDom r(0, 64, 0, 48, "r");
    eh(x) = 0;
    eh(cast<int32_t>(in(r.x, r.y))) += 1;
    RDom b(1, 255, "b");
    cdf(x) = eh(x);
    cdf(b) += cdf(b - 1);
    eq(x, y) = cast<uint8_t>((cdf(cast<int32_t>(in(x, y))) * 255 + 1536) / 3072);
    eh.compute_root();
    cdf.compute_root();
    eq.vectorize(x, 16).parallel(y);
    d.pipeline = Pipeline(eq);
    add_input(d, in, {64, 48}, {0, 0}, 0, 200);
    add_output(d, {64, 48});
    d.funcs = {"eh", "cdf", "eq"};
    return d;
}

/** A three-stage float pointwise chain s1 -> s2 -> s3, each compute_root, parallel, vectorized. */
Def float_chain() {
    Def d;
    ImageParam in(Float(32), 2, "in");
    Func s1("s1"), s2("s2"), s3("s3");
    s1(x, y) = in(x, y) * 0.5f + 0.25f;
    s2(x, y) = s1(x, y) * s1(x, y) - 0.125f;
    s3(x, y) = max(s2(x, y), 0.0f) * 4.0f + s1(x, y);
    s1.compute_root().parallel(y).vectorize(x, 8);
    s2.compute_root().parallel(y).vectorize(x, 8);
    s3.compute_root().parallel(y).vectorize(x, 8);
    d.pipeline = Pipeline(s3);
    add_input(d, in, {128, 96}, {0, 0}, -2, 2);
    add_output(d, {128, 96});
    d.is_float = true;
    d.rtol = 1e-6;
    d.atol = 1e-6;
    d.funcs = {s1.name(), s2.name(), s3.name()};  // "s1$0": Halide renames s1
    d.profile_object = true;
    return d;
}

// The truth pipelines (truth_chain, truth_inner): stages whose times are set in advance. Every
// element of a stage calls tally_truth_work(v, ns, first) (test/conformance/extern_stages.c),
// which returns v + 1 once the calling thread's deadline, chained from the run's first element
// (first = 1) and advanced by ns, has passed: a stage of N elements at ns each takes N * ns,
// whatever caches, the code around the calls, the stages around it or a preemption do. The ns are
// scalar arguments, so a benchmark sets the stages' times (bench/truth_bench.cpp); the corpus runs
// them at a few hundred ns per element. Each has a -profile object in Halide's library.

/** An elemental call of tally_truth_work: v + 1, once this thread's chained deadline, advanced
 * by ns, has passed; `first` 1 (the run's first element) restarts the chain, 2 continues it after
 * a parallel stage's join, 3 starts a parallel task (test/conformance/truth_work.h). */
Expr truth_work(const Expr &v, const Expr &ns, const Expr &first = 0) {
    return Internal::Call::make(Int(32), "tally_truth_work", {v, ns, cast<int32_t>(first)},
                                Internal::Call::Extern);
}

/** Three stages in a row, each compute_root and serial: t1 -> t2 -> t3. */
Def truth_chain() {
    Def d;
    ImageParam in(Int(32), 1, "in");
    Param<int32_t> ns1("ns1"), ns2("ns2"), ns3("ns3");
    Func t1("t1"), t2("t2"), t3("t3");
    t1(x) = truth_work(in(x), ns1, x == in.dim(0).min());
    t2(x) = truth_work(t1(x), ns2);
    t3(x) = truth_work(t2(x), ns3);
    t1.compute_root();
    t2.compute_root();
    d.pipeline = Pipeline(t3);
    add_input(d, in, {64}, {0}, -1000, 1000);
    add_scalar(d, ns1, "100");
    add_scalar(d, ns2, "300");
    add_scalar(d, ns3, "600");
    add_output(d, {64});
    d.funcs = {t1.name(), t2.name(), t3.name()};  // Halide renames them t1$0, ...
    d.profile_object = true;
    return d;
}

/** A Func computed inside another's loop: ti at every element of to (compute_at to, x), so the
 * profiler switches between the two twice per element; then a compute_root stage tr after them. */
Def truth_inner() {
    Def d;
    ImageParam in(Int(32), 1, "in");
    Param<int32_t> ns_inner("ns_inner"), ns_outer("ns_outer"), ns_root("ns_root");
    Func ti("ti"), to("to"), tr("tr");
    ti(x) = truth_work(in(x), ns_inner, x == in.dim(0).min());
    to(x) = truth_work(ti(x), ns_outer);
    tr(x) = truth_work(to(x), ns_root);
    ti.compute_at(to, x);
    to.compute_root();
    d.pipeline = Pipeline(tr);
    add_input(d, in, {64}, {0}, -1000, 1000);
    add_scalar(d, ns_inner, "200");
    add_scalar(d, ns_outer, "300");
    add_scalar(d, ns_root, "500");
    add_output(d, {64});
    d.funcs = {ti.name(), to.name(), tr.name()};
    d.profile_object = true;
    return d;
}

/** A parallel stage with uneven work per thread, between two serial stages: tpar's two halves run
 * as two parallel tasks, the first half's elements at ns_par each and the second half's at
 * ns_par / 2, so with a thread for each half the stage takes the heavy half's time, N / 2 *
 * ns_par, while its threads' times add up to 1.5 times that. A profiler that bills a stage its
 * wall time reads the set shares; one that adds up the threads' times, or bills only what the
 * calling thread did, does not. The heavy half is the first task, which the calling thread
 * takes (Halide's pool and Tally's both have the caller claim its loop's first iteration under the
 * lock it lists the loop with), so a worker's time to wake up falls in the light half's slack
 * rather than in the stage. The calling thread's deadline chain runs through the three stages,
 * started by the run's first element only: the pool's dispatch before the heavy half, when it
 * takes over a microsecond, is time the stage lost (truth_work.h), and so is the calling thread's
 * wait after it for the light half (tpost's first element says so: 2, TALLY_TRUTH_AFTER_JOIN),
 * billed to the stage by the truth as by a profiler. The light half's first element says it forks
 * (3, TALLY_TRUTH_FORK): on the worker it starts a chain of its own; where the worker starts too
 * late and the calling thread takes the light half too (a hog on both cores), its time is the
 * stage's, the calling thread's chain goes on through it, and the truth counts it. */
Def truth_par() {
    Def d;
    ImageParam in(Int(32), 1, "in");
    Param<int32_t> ns_pre("ns_pre"), ns_par("ns_par"), ns_post("ns_post");
    Func tpre("tpre"), tpar("tpar"), tpost("tpost");
    Var xo("xo"), xi("xi");
    const Expr first = in.dim(0).min(), half = in.dim(0).extent() / 2;
    const Expr heavy = x < first + half;
    tpre(x) = truth_work(in(x), ns_pre, x == first);
    tpar(x) =
        truth_work(tpre(x), select(heavy, ns_par, ns_par / 2), select(x == first + half, 3, 0));
    tpost(x) = truth_work(tpar(x), ns_post, select(x == first, 2, 0));
    tpre.compute_root();
    tpar.compute_root().split(x, xo, xi, half, TailStrategy::GuardWithIf).parallel(xo);
    d.pipeline = Pipeline(tpost);
    add_input(d, in, {64}, {0}, -1000, 1000);
    add_scalar(d, ns_pre, "100");
    add_scalar(d, ns_par, "500");
    add_scalar(d, ns_post, "150");
    add_output(d, {64});
    d.funcs = {tpre.name(), tpar.name(), tpost.name()};
    d.profile_object = true;
    return d;
}

/** Wrappers and RDoms: an input wrapper (in.in()) computed per row, a 5x5 convolution with a
 * weights buffer over a 2-D RDom (unrolled), and a Func wrapper (conv.in(out)). */
Def wrapper_rdom() {
    Def d;
    ImageParam in(UInt(8), 2, "in"), wt(Int(16), 2, "wt");
    Func cl = BoundaryConditions::constant_exterior(in, 0);
    Func cv("cv"), wo("wo");
    RDom r(0, 5, 0, 5, "r");
    cv(x, y) = 0;
    cv(x, y) += cast<int32_t>(wt(r.x, r.y)) * cl(x + r.x - 2, y + r.y - 2);
    wo(x, y) = cv(x, y) >> 4;
    Func in_w = in.in();
    Func cv_w = cv.in(wo);
    in_w.compute_at(wo, y);
    cv_w.compute_at(wo, y).vectorize(x, 8);
    cv.compute_at(wo, y).vectorize(x, 8);
    cv.update().reorder(x, r.x, r.y).unroll(r.x).vectorize(x, 8);
    wo.parallel(y);
    d.pipeline = Pipeline(wo);
    add_input(d, in, {64, 48}, {0, 0}, 0, 255);
    add_input(d, wt, {5, 5}, {0, 0}, -64, 64);
    add_output(d, {64, 48});
    d.funcs = {"cv", "wo"};
    return d;
}

/** A 4-D convolution layer (x, y, channel, batch) with 4-D weights, a ReLU and a bias. */
Def conv4d() {
    Def d;
    ImageParam in(Float(32), 4, "in"), w(Float(32), 4, "w"), bias(Float(32), 1, "bias");
    Func acc("acc"), relu("relu");
    RDom r(0, 3, 0, 3, 0, 4, "r");
    acc(x, y, k, n) = bias(k);
    acc(x, y, k, n) += w(r.x, r.y, r.z, k) * in(x + r.x, y + r.y, r.z, n);
    relu(x, y, k, n) = max(acc(x, y, k, n), 0.0f);
    relu.vectorize(x, 8).parallel(n);
    acc.compute_at(relu, k).vectorize(x, 8);
    acc.update().reorder(x, r.x, r.y, r.z).vectorize(x, 8);
    d.pipeline = Pipeline(relu);
    add_input(d, in, {18, 12, 4, 2}, {0, 0, 0, 0}, -1, 1);
    add_input(d, w, {3, 3, 4, 6}, {0, 0, 0, 0}, -1, 1);
    add_input(d, bias, {6}, {0}, -1, 1);
    add_output(d, {16, 10, 6, 2});
    d.is_float = true;
    d.rtol = 1e-5;
    d.atol = 1e-5;
    d.funcs = {"acc", "relu"};
    return d;
}

/** A float64 iteration (a Mandelbrot-style escape count) in an update over an RDom, parallel. */
Def escape_f64() {
    Def d;
    Param<double> scale("scale");
    Func it("it");
    Expr cre = cast<double>(x) * scale - f64c(2.0), cim = cast<double>(y) * scale - f64c(1.0);
    RDom r(0, 24, "r");
    it(x, y) = Tuple(f64c(0.0), f64c(0.0), 0);
    Expr zr = it(x, y)[0], zi = it(x, y)[1];
    // The bound grows with the iteration: the update must mention its RDom, or it runs once.
    Expr esc = zr * zr + zi * zi > f64c(4.0) + cast<double>(r) * f64c(0.015625);
    it(x, y) =
        Tuple(select(esc, zr, zr * zr - zi * zi + cre), select(esc, zi, f64c(2.0) * zr * zi + cim),
              select(esc, it(x, y)[2], it(x, y)[2] + 1));
    Func cnt("cnt");
    cnt(x, y) = it(x, y)[2];
    it.compute_at(cnt, y);
    cnt.parallel(y);
    d.pipeline = Pipeline(cnt);
    add_scalar(d, scale, "0.046875");
    add_output(d, {64, 48});
    d.is_float = true;
    d.rtol = 0;
    d.atol = 0;
    d.funcs = {"it", "cnt"};
    return d;
}

/** An extern stage (define_extern): a C function (test/conformance/extern_stages.c) between
 * two Halide stages, given a Func and a scalar, asked for its input's bounds first (Halide's
 * bounds query) and then run on the region the consumer needs, tile by tile. */
Def extern_stage() {
    Def d;
    ImageParam in(Int(16), 2, "in");
    Param<int32_t> offset("offset");
    Func pre("pre"), diff("diff"), post("post");
    pre(x, y) = cast<int32_t>(in(x, y)) * 3 + 1;
    diff.define_extern("tally_corpus_forward_diff", {pre, offset}, Int(32), 2, NameMangling::C);
    post(x, y) = diff(x, y) * 2 + cast<int32_t>(in(x, y));
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    post.tile(x, y, xo, yo, xi, yi, 32, 16).vectorize(xi, 8);
    diff.compute_at(post, xo);
    pre.compute_root().vectorize(x, 8);
    d.pipeline = Pipeline(post);
    add_input(d, in, {65, 48}, {0, 0}, -2000, 2000);
    add_scalar(d, offset, "-7");
    add_output(d, {64, 48});
    d.funcs = {"pre", "diff", "post"};
    return d;
}

/** An extern stage in C++ (define_extern with NameMangling::CPlusPlus): Halide prints only the
 * qualified name, `tally_corpus::scale_stage(...)`, and calls the symbol the Itanium ABI mangles
 * from its argument types (test/conformance/extern_stages_cpp.cpp); the target needs
 * c_plus_plus_name_mangling. */
Def extern_cpp() {
    Def d;
    ImageParam in(Float(32), 2, "in");
    Param<int32_t> k("k");
    Func pre("pre"), scaled("scaled"), out("out");
    pre(x, y) = in(x, y) + 0.5f;
    scaled.define_extern("tally_corpus::scale_stage", {pre, k}, Float(32), 2,
                         NameMangling::CPlusPlus);
    out(x, y) = scaled(x, y) * 0.25f + in(x, y);
    pre.compute_root();
    scaled.compute_root();
    out.vectorize(x, 8);
    d.pipeline = Pipeline(out);
    add_input(d, in, {40, 12}, {0, 0}, -10, 10);
    add_scalar(d, k, "3");
    add_output(d, {40, 12});
    d.features = {Target::CPlusPlusMangling};
    d.is_float = true;
    d.rtol = 1e-6;
    d.atol = 1e-6;
    d.funcs = {"pre", "scaled", "out"};
    return d;
}

/** Memoization (Func::memoize): a Func of a Param and a Tuple Func keyed by memoize_tag, each
 * printing when it is computed. The harness runs every pipeline twice (as the references were
 * made), so the second run finds both in the cache and prints nothing. */
Def memoize_p() {
    Def d;
    ImageParam in(Float(32), 2, "in");
    Param<int32_t> kp("kp");
    Func m("m"), mt("mt"), out("out");
    m(x, y) =
        print_when(x == 0 && y == 0, cast<float>(x * kp + y) * 0.25f, "computing m, kp =", kp);
    Expr v = memoize_tag(in(x, y), kp);
    mt(x, y) =
        Tuple(print_when(x == 1 && y == 0, v * 2.0f, "computing mt"), cast<int32_t>(v * 8.0f));
    out(x, y) = m(x, y) + mt(x, y)[0] + cast<float>(mt(x, y)[1]);
    m.compute_root().memoize();
    mt.compute_root().memoize();
    d.pipeline = Pipeline(out);
    add_input(d, in, {24, 16}, {0, 0}, -4, 4);
    add_scalar(d, kp, "3");
    add_output(d, {24, 16});
    d.is_float = true;
    d.rtol = 1e-6;
    d.atol = 1e-6;
    d.funcs = {"m", "mt", "out"};
    return d;
}

/** Tracing and printing: trace_stores, trace_loads and trace_realizations with a tag on one Func,
 * vectorized traced stores on another, print_when with float32, float64 and integer values, and
 * require; serial, so the printed text has one order, which the harness compares with Halide's. */
Def trace_print() {
    Def d;
    ImageParam in(UInt(8), 2, "in");
    Param<int32_t> gain("gain");
    Func a("a"), b("b"), out("out");
    // The print is in `a`, which is serial (print_vec prints in vectorized code).
    a(x, y) = cast<int16_t>(in(x, y)) * cast<int16_t>(gain) +
              cast<int16_t>(print_when(x == 2 && y == 1, 0, "a at", x, y, "in is", in(x, y),
                                       "in / 8 is", cast<double>(in(x, y)) * f64c(0.125),
                                       "half of it", cast<float>(in(x, y)) * 0.5f));
    b(x, y) = cast<float>(a(x, y)) * 0.5f + 0.25f;
    out(x, y) =
        require(gain > 0, b(x, y) + cast<float>(a(x + 1, y)), "gain must be positive, not", gain);
    a.compute_root().trace_stores().trace_loads().trace_realizations().add_trace_tag("a's tag");
    b.compute_at(out, y).vectorize(x, 4).trace_stores();
    out.trace_realizations();
    d.pipeline = Pipeline(out);
    add_input(d, in, {9, 3}, {0, 0}, 0, 255);
    add_scalar(d, gain, "3");
    add_output(d, {8, 3});
    d.is_float = true;
    d.rtol = 1e-6;
    d.atol = 1e-6;
    d.funcs = {"a", "b", "out"};
    return d;
}

/** Printing in vectorized code: a print_when, a print and a require whose operands are vectors.
 * Halide 14 prints them as vector calls (`(char *)x4stringify(...)`, `(int32x8)halide_print(...)`)
 * and its code runs them lane by lane, in lane order; so must Tally's. `a` vectorized by 4 with a
 * ShiftInwards tail (9 columns), `out` by 8 with a GuardWithIf tail; serial, so the text has one
 * order. */
Def print_vec() {
    Def d;
    ImageParam in(UInt(8), 2, "in");
    Param<int32_t> gain("gain");
    Func a("a"), out("out");
    Var xo("xo"), xi("xi");
    a(x, y) = print_when(x % 3 == 1 && y == 1, cast<int32_t>(in(x, y)) * gain, "a at", x, y,
                         "in is", in(x, y), "as float", cast<float>(in(x, y)) * 0.25f, "as double",
                         cast<double>(in(x, y)) + f64c(0.1));
    out(x, y) = require(a(x, y) + x >= 0, print(cast<float>(a(x, y)) * 0.5f, "out at", x, y),
                        "a + x must not be negative at", x, y);
    a.compute_root().vectorize(x, 4, TailStrategy::ShiftInwards);
    out.split(x, xo, xi, 8, TailStrategy::GuardWithIf).vectorize(xi);
    d.pipeline = Pipeline(out);
    add_input(d, in, {13, 3}, {0, 0}, 0, 255);
    add_scalar(d, gain, "3");
    add_output(d, {13, 3});
    d.is_float = true;
    d.rtol = 1e-6;
    d.atol = 1e-6;
    d.funcs = {"a", "out"};
    return d;
}

/** Buffers embedded in the pipeline (a Buffer used directly, not an ImageParam): a uint8 lookup
 * table and a float32 3x3 kernel with mins -1. Halide prints them `buffer lut = {...}` without
 * their data; the corpus carries them as .npy files, which Tally is given with
 * --buffer-constant. */
Def embedded_lut() {
    Def d;
    ImageParam in(UInt(8), 2, "in");
    Buffer<uint8_t> lut(256, "lut");
    for (int i = 0; i < 256; i++) {
        lut(i) = uint8_t((i * 37 + 11) & 255);
    }
    Buffer<float> kern(3, 3, "kern");
    kern.set_min(-1, -1);
    for (int j = -1; j <= 1; j++) {
        for (int i = -1; i <= 1; i++) {
            kern(i, j) = float(i + 2) * 0.125f + float(j) * 0.25f;  // exact in float32
        }
    }
    Func f("f"), out("out");
    RDom r(-1, 3, -1, 3, "r");
    f(x, y) = lut(cast<int32_t>(in(x, y)));
    out(x, y) = sum(cast<float>(f(x + r.x, y + r.y)) * kern(r.x, r.y));
    f.compute_root();
    out.vectorize(x, 8);
    d.pipeline = Pipeline(out);
    add_input(d, in, {18, 11}, {-1, -1}, 0, 255);
    add_output(d, {16, 9});
    d.constants = {Buffer<>(lut), Buffer<>(kern)};
    d.is_float = true;
    d.rtol = 1e-6;
    d.atol = 1e-4;
    d.funcs = {"f", "out"};
    return d;
}

/** Halide's fast approximations: fast_inverse and fast_inverse_sqrt (x86's RCPPS and RSQRTPS,
 * whose low bits differ between CPU models, hence the tolerance and no strict twin),
 * fast_exp, fast_log and fast_pow (polynomials), vectorized by 8 with a scalar tail. */
Def fast_math() {
    Def d;
    ImageParam in(Float(32), 2, "in");
    Func out("out");
    Expr v = in(x, y);
    out(x, y) = fast_inverse(v) + fast_inverse_sqrt(v) + fast_exp(v * 0.25f) + fast_log(v) +
                fast_pow(v, 0.75f);
    out.vectorize(x, 8, TailStrategy::GuardWithIf);
    d.pipeline = Pipeline(out);
    add_input(d, in, {67, 9}, {0, 0}, 0.5, 8);
    add_output(d, {67, 9});
    d.rtol = 2e-3;
    d.atol = 1e-5;
    d.funcs = {"out"};
    return d;
}

/** Func::debug_to_file in Halide's three formats, named by the file's extension: a float32
 * 2-D Func to a .tiff, a 3-channel uint16 Func to a .tiff (planar channels), an int8 Func to a
 * .mat and the int32 output to Halide's raw form. The files land in the working directory; the
 * harness compares them with Halide's byte for byte (debug.<file> in the pipeline's folder). */
Def debug_files() {
    Def d;
    ImageParam in(UInt(8), 2, "in");
    Func ff("ff"), rgb("rgb"), small("small"), out("out");
    ff(x, y) = cast<float>(in(x, y)) * 0.25f;
    rgb(x, y, c) = cast<uint16_t>(in(x, y)) * cast<uint16_t>(c + 1);
    small(x, y) = cast<int8_t>(in(x, y) / 4) - 20;
    out(x, y) = cast<int32_t>(ff(x, y)) + cast<int32_t>(rgb(x, y, 2)) + cast<int32_t>(small(x, y));
    ff.compute_root().debug_to_file("debug_files_ff.tiff");
    rgb.compute_root().bound(c, 0, 3).debug_to_file("debug_files_rgb.tiff");
    small.compute_root().debug_to_file("debug_files_small.mat");
    out.debug_to_file("debug_files_out.tmp");
    d.pipeline = Pipeline(out);
    add_input(d, in, {13, 7}, {0, 0}, 0, 255);
    add_output(d, {13, 7});
    d.funcs = {"ff", "rgb", "small", "out"};
    d.files = {"debug_files_ff.tiff", "debug_files_rgb.tiff", "debug_files_small.mat",
               "debug_files_out.tmp"};
    return d;
}

/** Storage scheduling: reorder_storage, align_storage and align_bounds on a compute_root Func;
 * an explicit fold_storage on a Func stored at root and slid along its consumer's rows; a Func
 * kept on the stack (store_in(MemoryType::Stack)) per 16-wide strip; a parallel loop with a
 * task size (parallel(y, 4)). */
Def storage_layout() {
    Def d;
    ImageParam in(UInt(16), 2, "in");
    Func tr("tr"), rows("rows"), mid("mid"), sm("sm"), out("out");
    Var xo("xo"), xi("xi");
    tr(x, y) = cast<uint32_t>(in(x, y)) * 3 + 1;
    rows(x, y) = tr(x, y) + tr(x + 1, y);
    mid(x, y) = rows(x, y) + rows(x, y + 1) + rows(x, y + 2);
    sm(x, y) = mid(x, y) * 2;
    out(x, y) = cast<uint16_t>((sm(x, y) + sm(x + 1, y)) >> 3);
    tr.compute_root().reorder_storage(y, x).align_storage(x, 8).align_bounds(y, 4);
    mid.compute_root();
    rows.store_root().compute_at(mid, y).fold_storage(y, 4);
    out.split(x, xo, xi, 16).parallel(y, 4);
    sm.compute_at(out, xo).store_in(MemoryType::Stack);
    d.pipeline = Pipeline(out);
    add_input(d, in, {72, 56}, {0, 0}, 0, 4000);
    add_output(d, {64, 48});
    d.funcs = {"tr", "rows", "mid", "sm", "out"};
    return d;
}

/** Checks on the arguments: scalar ranges (set_range), a host alignment, fixed mins and strides
 * on the input and the output, and specializations on a ranged Param ending in specialize_fail
 * (the run takes a specialization that holds). */
Def param_checks() {
    Def d;
    ImageParam in(Float(32), 2, "in");
    Param<int32_t> k("k");
    Param<float> s("s");
    k.set_range(-4, 4);
    s.set_range(0.0f, 2.0f);
    in.set_host_alignment(16);
    // Strides constrained to the dense layout (so that the benchmark's inputs, tiled 8x, keep
    // them): Halide checks each.
    in.dim(0).set_min(0).dim(1).set_min(0).set_stride(in.dim(0).extent());
    Func pc("pc");
    pc(x, y) = in(x, y) * s + cast<float>(k);
    pc.specialize(k == 0).vectorize(x, 8);
    pc.specialize(k > 0).vectorize(x, 4);
    pc.specialize_fail("k must not be negative");
    pc.output_buffer().dim(0).set_min(0).dim(1).set_stride(pc.output_buffer().dim(0).extent());
    d.pipeline = Pipeline(pc);
    add_input(d, in, {64, 20}, {0, 0}, -10, 10);
    add_scalar(d, k, "3");
    add_scalar(d, s, "1.5");
    add_output(d, {64, 20});
    d.is_float = true;
    d.rtol = 1e-6;
    d.atol = 1e-6;
    d.funcs = {"pc"};
    return d;
}

/** compute_with: two compute_root producers whose row loops are fused (compute_with(f1, y)),
 * one consumer. */
Def compute_with_p() {
    Def d;
    ImageParam in(Float(32), 2, "in");
    Func f1("f1"), f2("f2"), cw("cw");
    f1(x, y) = in(x, y) * 2.0f;
    f2(x, y) = in(x, y) + 1.0f;
    cw(x, y) = f1(x, y) - f2(x, y) * 0.5f;
    f1.compute_root().vectorize(x, 8);
    f2.compute_root().vectorize(x, 8);
    f2.compute_with(f1, y);
    d.pipeline = Pipeline(cw);
    add_input(d, in, {48, 20}, {0, 0}, -10, 10);
    add_output(d, {48, 20});
    d.is_float = true;
    d.rtol = 1e-6;
    d.atol = 1e-6;
    // Halide's lowering of the fused group names the two `f1$0` and `f2$0` (its profiler's
    // names, and so Tally's).
    d.funcs = {"f1$0", "f2$0", "cw"};
    return d;
}

#if TALLY_HALIDE_VERSION >= 21
// ---------------------------------------------------------------------------------------------
// Pipelines of what Halide added after 14 (the Halide 21 corpus only).

/** The blending tail strategies: two updates of a compute_root Func 62 wide, vectorized by 8,
 * one with RoundUpAndBlend and one with ShiftInwardsAndBlend (a plain RoundUp or ShiftInwards
 * would recompute, and so double-apply, the updates' tail elements). */
Def blend_tails() {
    Def d;
    ImageParam in(Int(16), 2, "in");
    Func acc("acc"), bt("bt");
    acc(x, y) = cast<int32_t>(in(x, y));
    acc(x, y) += cast<int32_t>(in(x, y)) * 3;
    acc(x, y) = acc(x, y) * 2 - 5;
    bt(x, y) = acc(x, y) + acc(x + 1, y);
    acc.compute_root().vectorize(x, 8);
    acc.update(0).vectorize(x, 8, TailStrategy::RoundUpAndBlend);
    acc.update(1).vectorize(x, 8, TailStrategy::ShiftInwardsAndBlend);
    bt.vectorize(x, 8, TailStrategy::GuardWithIf);
    d.pipeline = Pipeline(bt);
    // RoundUpAndBlend rounds the first update up to 64 columns, which read `in`.
    add_input(d, in, {64, 13}, {0, 0}, -1000, 1000);
    add_output(d, {61, 13});
    d.funcs = {"acc", "bt"};
    return d;
}

/** Storage hoisting and ring buffers: a producer computed per 8-row strip, its storage hoisted
 * to the root (hoist_storage_root) and given two slots (ring_buffer(2)) so that an async
 * producer can fill one strip while the consumer reads the other; a second producer whose
 * storage is hoisted to the consumer's strip loop (hoist_storage) with a bounded extent
 * (bound_storage). */
Def hoist_ring() {
    Def d;
    ImageParam in(UInt(8), 2, "in");
    Func cl = BoundaryConditions::repeat_edge(in);
    Func hp("hp"), hq("hq"), hr("hr");
    hp(x, y) = cast<uint16_t>(cl(x, y)) * 3;
    hq(x, y) = cast<uint16_t>(cl(x, y)) + 7;
    hr(x, y) = hp(x, y) + hp(x + 1, y) + hq(x, y);
    Var yo("yo"), yi("yi");
    hr.split(y, yo, yi, 8).vectorize(x, 8);
    hp.compute_at(hr, yo).hoist_storage_root().ring_buffer(2).async().vectorize(x, 8);
    hq.compute_at(hr, yi).hoist_storage(hr, yo).bound_storage(x, 64);
    d.pipeline = Pipeline(hr);
    add_input(d, in, {64, 48}, {0, 0}, 0, 255);
    add_output(d, {64, 48});
    d.funcs = {"hp", "hq", "hr"};
    return d;
}

/** Loop partitioning control: three 3-tap blurs of a boundary-conditioned input, one
 * partitioned never (partition(x, Never)), one always (always_partition), one with every loop
 * left whole (never_partition_all). */
Def partition_p() {
    Def d;
    ImageParam in(UInt(16), 2, "in");
    Func cl = BoundaryConditions::repeat_edge(in);
    FuncOutputs out(d, {64, 24}, 8);
    Expr blur = cast<uint32_t>(cl(x - 1, y)) + cl(x, y) * 2 + cl(x + 1, y) + cl(x, y + 1);
    out.add("pn", blur).partition(x, Partition::Never);
    out.add("pa", blur).always_partition(x, y);
    out.add("pz", blur).never_partition_all();
    d.pipeline = out.pipeline();
    add_input(d, in, {64, 24}, {0, 0}, 0, 65535);
    return d;
}

/** Vector reductions: updates over an RDom made atomic and vectorized along the RDom, which
 * Halide lowers to vector_reduce_* of a vector of partial results (a sum, a max, and a widening
 * uint8 dot product). */
Def vector_reduce() {
    Def d;
    ImageParam a(UInt(8), 2, "a"), b(UInt(8), 2, "b"), v(Int(32), 2, "v");
    Func vs("vs"), vm("vm"), vd("vd");
    RDom r(0, 64, "r");
    vs(y) = 0;
    vs(y) += v(r, y);
    vm(y) = v(0, y);
    vm(y) = max(vm(y), v(r, y));
    vd(y) = cast<uint32_t>(0);
    vd(y) += cast<uint32_t>(widening_mul(a(r, y), b(r, y)));
    vs.update().atomic().vectorize(r, 8);
    vm.update().atomic().vectorize(r, 16);
    vd.update().atomic().vectorize(r, 16);
    d.pipeline = Pipeline({vs, vm, vd});
    add_input(d, a, {64, 24}, {0, 0}, 0, 255);
    add_input(d, b, {64, 24}, {0, 0}, 0, 255);
    add_input(d, v, {64, 24}, {0, 0}, -100000, 100000);
    add_output(d, {24});
    add_output(d, {24});
    add_output(d, {24});
    d.funcs = {"vs", "vm", "vd"};
    return d;
}

/** Integer operators added since Halide 14 (or printed differently since): widen_right_add,
 * widen_right_mul and widen_right_sub, widening_shift_right, extract_bits and concat_bits,
 * div_round_to_zero and mod_round_to_zero of negatives, saturating_cast between signed and
 * unsigned, unsafe_promise_clamped; vectorized, so most print as vector intrinsics. */
Def int_ops21() {
    Def d;
    ImageParam a(Int(16), 2, "a"), b(Int(16), 2, "b"), u(UInt(8), 2, "u");
    FuncOutputs out(d, {32, 16}, 8);
    Expr ea = a(x, y), eb = b(x, y), eu = u(x, y);
    out.add("i_wradd", widen_right_add(cast<int32_t>(ea), eb));
    out.add("i_wrmul", widen_right_mul(cast<int32_t>(ea), eb));
    out.add("i_wrsub", widen_right_sub(cast<int32_t>(ea), eb));
    out.add("i_wshr", widening_shift_right(ea, 3));
    out.add("i_xbits", extract_bits(UInt(8), ea, 4));
    out.add("i_cbits", concat_bits({eu, cast<uint8_t>(eb)}));
    out.add("i_divz", div_round_to_zero(ea, eb));
    out.add("i_modz", mod_round_to_zero(ea, eb));
    out.add("i_scast", saturating_cast<uint8_t>(ea) + saturating_cast<int8_t>(eu));
    out.add("i_promise", unsafe_promise_clamped(eu, 0, 255) * 3 + cast<uint8_t>(ea));
    d.pipeline = out.pipeline();
    add_input(d, a, {32, 16}, {0, 0}, -3000, 3000);
    // b is never zero: div_round_to_zero and mod_round_to_zero of 0 are not defined alike.
    add_input(d, b, {32, 16}, {0, 0}, 1, 200);
    add_input(d, u, {32, 16}, {0, 0}, 0, 255);
    return d;
}

/** Float operators added since Halide 14: strict_float on one expression (its arithmetic stays
 * IEEE whatever the target says), fast_sin and fast_cos, erf, saturating_cast from float to
 * int16, and float16 and bfloat16 intermediates (stored as such; the buffers outside are
 * float32). */
Def float_ops21() {
    Def d;
    ImageParam f(Float(32), 2, "f"), g(Float(32), 2, "g");
    FuncOutputs out(d, {32, 16}, 8);
    Expr ef = f(x, y), eg = g(x, y);
    out.add("o_strict", strict_float(ef * eg + ef) - eg * 0.5f);
    out.add("o_fsin", fast_sin(ef) + fast_cos(eg));
    out.add("o_erf", erf(ef * 0.5f));
    out.add("o_scast", saturating_cast<int16_t>(ef * 16384.0f));
    Func h16("h16"), b16("b16");
    h16(x, y) = cast<float16_t>(ef) * cast<float16_t>(eg);
    b16(x, y) = cast(BFloat(16), ef) + cast(BFloat(16), eg);
    h16.compute_root().vectorize(x, 8);
    b16.compute_root().vectorize(x, 8);
    out.add("o_half", cast<float>(h16(x, y)) + cast<float>(b16(x, y)));
    d.pipeline = out.pipeline();
    add_input(d, f, {32, 16}, {0, 0}, -2, 2);
    add_input(d, g, {32, 16}, {0, 0}, -2, 2);
    d.funcs.insert(d.funcs.end(), {h16.name(), b16.name()});  // Halide renames them (`h16$0`)
    d.is_float = true;
    // fast_sin, fast_cos and erf are polynomials of Halide's; float16 and bfloat16 round coarsely.
    d.rtol = 1e-5;
    d.atol = 1e-5;
    return d;
}

// Pipelines with a GPU schedule: `gpu` false gives the host schedule (the host variants and the
// reference objects), true the GPU one (only its text is written).

/** Separable blur on the GPU: the horizontal pass computed per block in shared memory
 * (compute_at the block, threads over its tile), the vertical pass tiled 16x8. */
Def gpu_blur(bool gpu) {
    Def d;
    ImageParam in(UInt(16), 2, "in");
    Func cl = BoundaryConditions::repeat_edge(in);
    Func gx("gx"), gy("gy");
    gx(x, y) = cast<uint16_t>((cast<uint32_t>(cl(x - 1, y)) + cl(x, y) + cl(x + 1, y)) / 3);
    gy(x, y) = cast<uint16_t>((cast<uint32_t>(gx(x, y - 1)) + gx(x, y) + gx(x, y + 1)) / 3);
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    if (gpu) {
        gy.gpu_tile(x, y, xo, yo, xi, yi, 16, 8);
        gx.compute_at(gy, xo).gpu_threads(x, y);
    } else {
        gy.split(y, yo, yi, 16).parallel(yo).vectorize(x, 8);
        gx.compute_at(gy, yo).vectorize(x, 8);
    }
    d.pipeline = Pipeline(gy);
    add_input(d, in, {64, 48}, {0, 0}, 0, 65535);
    add_output(d, {64, 48});
    d.funcs = {"gx", "gy"};
    return d;
}

/** Matrix multiply on the GPU: each block computes a 16x16 tile, the reduction split by 4 and
 * unrolled per thread. */
Def gpu_matmul(bool gpu) {
    Def d;
    ImageParam ma(Float(32), 2, "ma"), mb(Float(32), 2, "mb");
    Func gp("gp"), gm("gm");
    RDom r(0, 32, "r");
    gp(x, y) = 0.0f;
    gp(x, y) += ma(r, y) * mb(x, r);
    gm(x, y) = gp(x, y) * 0.5f;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    RVar ro("ro"), ri("ri");
    if (gpu) {
        gm.gpu_tile(x, y, xo, yo, xi, yi, 16, 16);
        gp.compute_at(gm, xi);
        gp.update().split(r, ro, ri, 4).unroll(ri);
    } else {
        gm.tile(x, y, xo, yo, xi, yi, 16, 8).vectorize(xi, 8).parallel(yo);
        gp.compute_at(gm, xo).vectorize(x, 8);
        gp.update().split(r, ro, ri, 4).reorder(x, y, ri, ro).unroll(ri).vectorize(x, 8);
    }
    d.pipeline = Pipeline(gm);
    add_input(d, ma, {32, 32}, {0, 0}, -1, 1);
    add_input(d, mb, {48, 32}, {0, 0}, -1, 1);
    add_output(d, {48, 32});
    d.is_float = true;
    d.rtol = 1e-5;
    d.atol = 1e-5;
    d.funcs = {"gp", "gm"};
    return d;
}

/** A GPU-GPU-CPU chain: two stages on the device (compute_root, tiled) and a host stage that
 * reads both, so the text copies buffers to and from the device between them. */
Def gpu_chain(bool gpu) {
    Def d;
    ImageParam in(Float(32), 2, "in");
    Func c1("c1"), c2("c2"), c3("c3");
    c1(x, y) = in(x, y) * 0.5f + 0.25f;
    c2(x, y) = c1(x, y) * c1(x + 1, y) - 0.125f;
    c3(x, y) = max(c2(x, y), 0.0f) * 4.0f + c1(x, y);
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    c1.compute_root();
    c2.compute_root();
    if (gpu) {
        c1.gpu_tile(x, y, xo, yo, xi, yi, 16, 8);
        c2.gpu_tile(x, y, xo, yo, xi, yi, 16, 8);
    } else {
        c1.parallel(y).vectorize(x, 8);
        c2.parallel(y).vectorize(x, 8);
    }
    c3.parallel(y).vectorize(x, 8);
    d.pipeline = Pipeline(c3);
    add_input(d, in, {65, 32}, {0, 0}, -2, 2);
    add_output(d, {64, 32});
    d.is_float = true;
    d.rtol = 1e-6;
    d.atol = 1e-6;
    d.funcs = {c1.name(), c2.name(), c3.name()};  // Halide renames them (`c3$0`)
    return d;
}
/** The GPU truth pipeline: ga and gb on the device (gpu_tile), gc on the host reading both, so
 * the text copies both back. Each stage is a pure definition and an update that steps every
 * element ka, kb or kc times (RDoms over those scalars, innermost), so a benchmark sets each
 * stage's work and measures its time as the difference between fenced runs with and without it
 * (bench/truth_halide.cpp, BM_ConstructedGpu): a truth read from no profiler's clock. The host
 * schedule (for the references) runs all three on the CPU. Its Vulkan and OpenCL objects, plain
 * and -profile, go into Halide's library (GpuSchedule::objects). */
Def truth_gpu(bool gpu) {
    Def d;
    ImageParam in(Float(32), 2, "in");
    Param<int32_t> ka("ka"), kb("kb"), kc("kc");
    RDom ra(0, ka, "ra"), rb(0, kb, "rb"), rc(0, kc, "rc");
    Func ga("ga"), gb("gb"), gc("gc");
    // v * 0.75 + 0.125 or 0.0625 by step: bounded, and the step's RVar is used.
    ga(x, y) = in(x, y);
    ga(x, y) = ga(x, y) * 0.75f + select(ra.x % 2 == 0, 0.125f, 0.0625f);
    gb(x, y) = ga(x, y) * 0.5f + 0.25f;
    gb(x, y) = gb(x, y) * 0.75f + select(rb.x % 2 == 0, 0.0625f, 0.125f);
    gc(x, y) = gb(x, y) + ga(x, y);
    gc(x, y) = gc(x, y) * 0.75f + select(rc.x % 2 == 0, 0.125f, 0.0625f);
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    ga.compute_root();
    gb.compute_root();
    ga.update().reorder(ra.x, x, y);
    gb.update().reorder(rb.x, x, y);
    gc.update().reorder(rc.x, x, y);
    if (gpu) {
        // Large work groups: a device's cost per group (about 10 us each on lavapipe) is in
        // every profiler's stage time but not in the truth (the steps' time), so few of them.
        for (Func f : {ga, gb}) {
            f.gpu_tile(x, y, xo, yo, xi, yi, 32, 16);
            f.update().gpu_tile(x, y, xo, yo, xi, yi, 32, 16);
        }
    }
    d.pipeline = Pipeline(gc);
    add_input(d, in, {64, 32}, {0, 0}, -2, 2);
    add_scalar(d, ka, "3");
    add_scalar(d, kb, "5");
    add_scalar(d, kc, "2");
    add_output(d, {64, 32});
    d.is_float = true;
    d.rtol = 1e-6;
    d.atol = 1e-6;
    d.funcs = {ga.name(), gb.name(), gc.name()};
    return d;
}

/** A histogram with atomic updates on the GPU (one thread per input pixel, `atomic()` over a
 * gpu_tile of the RDom; host: parallel rows) and its lookup, 64 bins. CUDA and OpenCL only:
 * Halide 21 has no atomics in Vulkan kernels. */
Def gpu_hist(bool gpu) {
    Def d;
    ImageParam in(UInt(8), 2, "in");
    Func gh("gh"), gq("gq");
    RDom r(0, 64, 0, 48, "r");
    gh(x) = 0;
    gh(cast<int32_t>(in(r.x, r.y)) / 4) += 1;
    gq(x, y) = gh(cast<int32_t>(in(x, y)) / 4) * 2 + x;
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    RVar rxo("rxo"), ryo("ryo"), rxi("rxi"), ryi("ryi");
    gh.compute_root();
    if (gpu) {
        gh.gpu_tile(x, xo, xi, 16);
        gh.update().atomic().gpu_tile(r.x, r.y, rxo, ryo, rxi, ryi, 16, 16);
        gq.gpu_tile(x, y, xo, yo, xi, yi, 16, 8);
    } else {
        gh.update().atomic().parallel(r.y);
        gq.vectorize(x, 8).parallel(y);
    }
    d.pipeline = Pipeline(gq);
    add_input(d, in, {64, 48}, {0, 0}, 0, 255);
    add_output(d, {64, 48});
    d.funcs = {"gh", "gq"};
    return d;
}
#endif  // TALLY_HALIDE_VERSION >= 21

}  // namespace

const std::vector<std::pair<std::string, std::function<Def()>>> &all_defs() {
    static const std::vector<std::pair<std::string, std::function<Def()>>> defs = {
        {"sep_blur", sep_blur},
        {"blur3x3_halo", blur3x3_halo},
        {"split_tails", split_tails},
        {"vec_unroll", vec_unroll},
        {"rfactor_sum", rfactor_sum},
        {"rdom_scan", rdom_scan},
        {"tuple_argmax", tuple_argmax},
        {"specialize_p", specialize_p},
        {"async_fork", async_fork},
        {"async_store", async_store},
        {"atomic_hist", atomic_hist},
        {"prefetch_p", prefetch_p},
        {"boundary_modes", boundary_modes},
        {"fixed_point_u8", fixed_point_u8},
        {"fixed_point_s16", fixed_point_s16},
        {"bit_ops", bit_ops},
        {"types_int", types_int},
        {"types_float", types_float},
        {"math_funcs", math_funcs},
        {"types_bool", types_bool},
        {"scalar_params", scalar_params},
        {"bilateral_grid", bilateral_grid},
        {"local_laplacian", local_laplacian},
        {"matmul_tiled", matmul_tiled},
        {"demosaic", demosaic},
        {"hist_equalize", hist_equalize},
        {"float_chain", float_chain},
        {"wrapper_rdom", wrapper_rdom},
        {"conv4d", conv4d},
        {"escape_f64", escape_f64},
        {"extern_stage", extern_stage},
        {"extern_cpp", extern_cpp},
        {"memoize_p", memoize_p},
        {"trace_print", trace_print},
        {"print_vec", print_vec},
        {"storage_layout", storage_layout},
        {"param_checks", param_checks},
        {"compute_with_p", compute_with_p},
        {"embedded_lut", embedded_lut},
        {"fast_math", fast_math},
        {"debug_files", debug_files},
        {"truth_chain", truth_chain},
        {"truth_inner", truth_inner},
        {"truth_par", truth_par},
#if TALLY_HALIDE_VERSION >= 21
        {"blend_tails", blend_tails},
        {"hoist_ring", hoist_ring},
        {"partition_p", partition_p},
        {"vector_reduce", vector_reduce},
        {"int_ops21", int_ops21},
        {"float_ops21", float_ops21},
        {"gpu_blur", [] { return gpu_blur(false); }},
        {"gpu_matmul", [] { return gpu_matmul(false); }},
        {"gpu_chain", [] { return gpu_chain(false); }},
        {"gpu_hist", [] { return gpu_hist(false); }},
        {"truth_gpu", [] { return truth_gpu(false); }},
#endif
    };
    return defs;
}

const std::map<std::string, GpuSchedule> &gpu_defs() {
    static const std::map<std::string, GpuSchedule> defs = {
#if TALLY_HALIDE_VERSION >= 21
        {"gpu_blur", {[] { return gpu_blur(true); }, {}}},
        {"gpu_matmul", {[] { return gpu_matmul(true); }, {}}},
        {"gpu_chain", {[] { return gpu_chain(true); }, {}}},
        // "Atomic updates are not supported inside Vulkan kernels" (Halide 21).
        {"gpu_hist", {[] { return gpu_hist(true); }, {"vulkan"}}},
        {"truth_gpu", {[] { return truth_gpu(true); }, {}, true}},
#endif
    };
    return defs;
}

/** The output types of `d`'s pipeline (a Tuple gives one output per element), set on its
 * output shapes; false (after saying why) when the counts differ. */
bool set_output_types(const std::string &name, Def &d) {
    std::vector<Type> types;
    for (const Func &f : d.pipeline.outputs()) {
#if TALLY_HALIDE_VERSION >= 21
        const std::vector<Type> &fn_types = f.types();
#else
        const std::vector<Type> &fn_types = f.output_types();
#endif
        types.insert(types.end(), fn_types.begin(), fn_types.end());
    }
    if (types.size() != d.outputs.size()) {
        std::cerr << "corpus_generator: error: " << name << " lists " << d.outputs.size()
                  << " output shapes for " << types.size() << " outputs\n";
        return false;
    }
    for (size_t i = 0; i < types.size(); i++) {
        d.outputs[i].type = types[i];
    }
    return true;
}

Target base_target(const Def &d) {
    Target base(kBaseTarget);
    for (Target::Feature f : d.features) {
        base = base.with_feature(f);
    }
    return base;
}

}  // namespace corpus
