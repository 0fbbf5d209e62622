// Halide 21's intrinsics as other IR (IntrinsicLowering.h).
//
// Each lowering is the expression Halide 21.0.0 itself generates, so that values agree bit for
// bit; the functions of Halide's it mirrors are named at each. Halide evaluates these with its
// usual fast-math flags except strict_*; here a back end evaluates them with none, which is
// what the expression means (a NaN in saturating_cast's clamp goes where the comparisons send
// it, instead of where an optimizer that assumed no NaN left it).
//
// Two of Halide's conventions the lowerings depend on: its float Min(a, b) is
// select(a < b, a, b) and Max(a, b) is select(a > b, a, b) (CodeGen_LLVM::visit(Min/Max)), as
// Tally's; and a float type's min() and max() are minus and plus infinity (Type.cpp), not the
// largest finite values.

#include "ir/IntrinsicLowering.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tally/Error.h"

namespace tally {

namespace {

/** A float constant of type t (scalar, or broadcast to t's lanes). */
Expr float_const(const Type &t, double v) {
    Expr e = FloatImm::make(t.element_of(), v);
    return t.is_vector() ? Broadcast::make(e, t.lanes()) : e;
}

/** Halide's Min and Max, spelled out for floats as its CodeGen_LLVM generates them
 * (select(a < b, a, b), select(a > b, a, b)), so that a NaN goes where those comparisons send it
 * on every back end, GLSL's min and max (undefined for NaN) included. */
Expr float_select_min_max(bool is_min, const Expr &a, const Expr &b) {
    // `a` is used twice: bound by a Let unless it is a variable or constant (the name is one no
    // text can spell; an inner one shadows an outer only inside its own value's scope).
    if (!a.as<Variable>() && !is_const(a)) {
        const std::string n = "<clamped value>";
        Expr v = Variable::make(a.type(), n);
        return Let::make(n, a, float_select_min_max(is_min, v, b));
    }
    return Select::make(is_min ? LT::make(a, b) : GT::make(a, b), a, b);
}
Expr min_of(const Expr &a, const Expr &b) {
    return a.type().is_float() ? float_select_min_max(true, a, b) : Min::make(a, b);
}
Expr max_of(const Expr &a, const Expr &b) {
    return a.type().is_float() ? float_select_min_max(false, a, b) : Max::make(a, b);
}

/** An unsigned constant of type t, any value up to 2^64 - 1. */
Expr uint_const(const Type &t, uint64_t v) {
    Expr e = UIntImm::make(t.element_of(), v);
    return t.is_vector() ? Broadcast::make(e, t.lanes()) : e;
}

/** t's largest value as a constant of type t (integers only). */
Expr int_max(const Type &t) {
    return t.is_uint() ? uint_const(t, t.max_uint()) : make_const(t, int64_t(t.max_uint()));
}

/** The largest value of integer type t as a double (rounded as a C++ conversion rounds, to
 * nearest: 2^31 - 1 becomes 2^31 in float32, which Halide's lowering relies on). */
double int_max_as_double(const Type &t) {
    return double(t.max_uint());
}

/** Halide's lower_saturating_cast (FindIntrinsics.cpp). */
Expr saturating_cast(const Type &t, const Expr &a) {
    const Type &at = a.type();
    const double inf = std::numeric_limits<double>::infinity();
    if (t.is_float() && at.is_float()) {
        // Clamped to [-inf, inf]: only NaN changes (Min(NaN, inf) is inf), then converted.
        if (t.bits() < at.bits()) {
            return Cast::make(t, max_of(min_of(a, float_const(at, inf)), float_const(at, -inf)));
        }
        Expr c = at == t ? a : Cast::make(t, a);
        return max_of(min_of(c, float_const(t, inf)), float_const(t, -inf));
    }
    if (at == t) {
        return a;
    }
    if (at.is_float() && t.bits() >= at.bits()) {
        // To an integer at least as wide: t's limits need not be exact in the float type. The
        // low one is (a power of two or zero); the high one rounds up to the next power of
        // two, so a value at or above it saturates, and every value below it converts.
        // (The clamped value is used twice: a Let, named as no text can name a variable.)
        const std::string n = "<saturating_cast value>";
        Expr e = Variable::make(at, n);
        return Let::make(n, max_of(a, float_const(at, double(t.min_int()))),
                         Select::make(GE::make(e, float_const(at, int_max_as_double(t))),
                                      int_max(t), Cast::make(t, e)));
    }
    if (at.is_float() && t.is_bool()) {
        // Halide converts a float to bool as to any unsigned type, truncating (fptoui to i1),
        // so of the clamped value in [0, 1] only 1 is true.
        return GE::make(max_of(min_of(a, float_const(at, 1.0)), float_const(at, 0.0)),
                        float_const(at, 1.0));
    }
    // Clamped to t's limits where the source type has them (Halide's lossless_cast of each
    // limit to the source type), then converted. A float source is here only for a narrower
    // integer, whose limits are exact in it; an integer source bound for a float has none.
    Expr lo, hi;
    if (at.is_float()) {
        lo = float_const(at, double(t.min_int()));
        hi = float_const(at, int_max_as_double(t));
    } else if (!t.is_float()) {
        if (!at.is_uint() && at.can_represent(t.min_int())) {
            lo = make_const(at, t.min_int());
        }
        if (t.max_uint() <= at.max_uint()) {
            hi =
                at.is_uint() ? uint_const(at, t.max_uint()) : make_const(at, int64_t(t.max_uint()));
        }
    }
    Expr e = a;
    if (hi.defined()) {
        e = min_of(e, hi);
    }
    if (lo.defined()) {
        e = max_of(e, lo);
    }
    return Cast::make(t, e);
}

/** concat_bits as Halide 21 computes it: the arguments' bits side by side, the first in the
 * lowest bits, nothing extended. Halide's lowering rewrites every concat_bits into a reinterpret
 * of the interleaved arguments (Lower.cpp: flatten_nested_ramps, FlattenNestedRamps.cpp
 * LowerConcatBits) before it prints any statement, so that is its meaning; CodeGen_LLVM's own
 * lower_concat_bits, which converts each argument to the result type first (sign-extending a
 * negative one over the bits above it), is never reached. Here: each argument's bits as an
 * unsigned integer of the total width, shifted into place, or-ed, reinterpreted. */
Expr concat_bits(const Call *op, const std::vector<Expr> &args) {
    const Type &t = op->type;
    user_assert(!args.empty()) << "concat_bits needs at least one argument";
    const Type &et = args[0].type();
    for (const Expr &e : args) {
        user_assert(e.type() == et) << "concat_bits: every argument must have one type, not "
                                    << et.to_string() << " and " << e.type().to_string();
    }
    const int total = et.bits() * int(args.size());
    user_assert(!et.is_handle() && total <= 64 && t.bits() == total && t.lanes() == et.lanes())
        << "concat_bits of " << args.size() << " " << et.to_string() << " is typed "
        << t.to_string() << "; Halide types it with their total width";
    Type ut = UInt(total, t.lanes()), part_type = UInt(et.bits(), et.lanes());
    Expr result;
    int shift = 0;
    for (const Expr &e : args) {
        Expr bits = et == part_type ? e : Reinterpret::make(part_type, e);
        Expr part = Call::make(ut, Call::shift_left, {Cast::make(ut, bits), make_const(ut, shift)});
        result = result.defined() ? Call::make(ut, Call::bitwise_or, {result, part}) : part;
        shift += et.bits();
    }
    return ut == t ? result : Reinterpret::make(t, result);
}

/** Halide's extract_bits lowering (CodeGen_Internal.cpp lower_extract_bits): the bits from
 * `lsb` up, as many as the result type has, zero-filled above the source's top bit. The shift
 * is Halide's `>>`: both operands at the wider of their widths, and a negative signed amount
 * shifts the other way. */
Expr extract_bits(const Call *op, const std::vector<Expr> &args) {
    user_assert(args.size() == 2) << "extract_bits takes a value and a bit position";
    Expr e = args[0], lsb = args[1];
    const Type &t = op->type;
    user_assert(!e.type().is_handle() && (lsb.type().is_int() || lsb.type().is_uint()))
        << "extract_bits needs a value and an integer bit position";
    if (!e.type().is_uint()) {
        e = Reinterpret::make(UInt(e.type().bits(), e.type().lanes()), e);
    }
    if (lsb.type().lanes() != e.type().lanes()) {
        user_assert(lsb.type().is_scalar())
            << "extract_bits: the bit position has " << lsb.type().lanes() << " lanes";
        lsb = Broadcast::make(lsb, e.type().lanes());
    }
    int bits = std::max(e.type().bits(), lsb.type().bits());
    if (e.type().bits() < bits) {
        e = Cast::make(UInt(bits, e.type().lanes()), e);
    }
    if (lsb.type().bits() < bits) {
        lsb = Cast::make(Type(lsb.type().code(), bits, lsb.type().lanes()), lsb);
    }
    e = Call::make(e.type(), Call::shift_right, {e, lsb});
    Type ut = UInt(t.bits(), t.lanes());
    user_assert(ut.lanes() == e.type().lanes())
        << "extract_bits of " << e.type().lanes() << " lanes typed " << t.to_string();
    e = Cast::make(ut, e);
    return ut == t ? e : Reinterpret::make(t, e);
}

/** Halide's unstrictify_float (StrictifyFloat.cpp): the plain operation. */
Expr unstrict(const Call *op, const std::vector<Expr> &args) {
    user_assert(args.size() == 2 && args[0].type() == args[1].type() && args[0].type().is_float())
        << op->name << " takes two floats of one type";
    const Expr &a = args[0], &b = args[1];
    switch (op->intrinsic_op) {
    case Call::strict_add:
        return Add::make(a, b);
    case Call::strict_sub:
        return Sub::make(a, b);
    case Call::strict_mul:
        return Mul::make(a, b);
    case Call::strict_div:
        return Div::make(a, b);
    case Call::strict_min:
        return min_of(a, b);
    case Call::strict_max:
        return max_of(a, b);
    case Call::strict_lt:
        return LT::make(a, b);
    case Call::strict_le:
        return LE::make(a, b);
    case Call::strict_eq:
        return EQ::make(a, b);
    default:
        internal_error << "not a strict float intrinsic: " << op->name;
    }
}

}  // namespace

Expr lower_halide21_intrinsic(const Call *op, const std::vector<Expr> &args) {
    auto need_args = [&](size_t k) {
        user_assert(args.size() == k) << op->name << " takes " << k << " argument"
                                      << (k == 1 ? "" : "s") << ", not " << args.size();
    };
    switch (op->intrinsic_op) {
    case Call::saturating_cast:
        need_args(1);
        user_assert(!op->type.is_handle() && !args[0].type().is_handle() &&
                    op->type.lanes() == args[0].type().lanes())
            << "saturating_cast from " << args[0].type().to_string() << " to "
            << op->type.to_string();
        return saturating_cast(op->type, args[0]);
    case Call::round: {
        // Round to nearest, ties to even (IR.h's comment on Call::round). Halide's x86 back end
        // uses the instruction for it (llvm.roundeven), not its integer-conversion fallback,
        // which is wrong beyond 2^31; every Tally back end already has Halide 14's round_f32.
        need_args(1);
        const Type &t = args[0].type();
        user_assert(t.is_float() && t.code() == Type::Float && op->type == t)
            << "round of " << t.to_string() << " typed " << op->type.to_string()
            << "; Halide rounds floats to their own type";
        return Call::make(t, "round_f" + std::to_string(t.bits()), {args[0]}, Call::PureExtern);
    }
    case Call::widen_right_add:
    case Call::widen_right_sub:
    case Call::widen_right_mul: {
        // Halide's lower_widen_right_*: a op widen(b), in a's (the wide) type.
        need_args(2);
        const Type &a = args[0].type(), &b = args[1].type();
        user_assert((b.is_int() || b.is_uint()) && b.bits() <= 32 &&
                    a == Type(b.code(), b.bits() * 2, b.lanes()) && op->type == a)
            << op->name << " of " << a.to_string() << " and " << b.to_string()
            << ": the first must be the second's kind of integer at twice its width";
        Expr wb = Cast::make(a, args[1]);
        return op->is_intrinsic(Call::widen_right_add)   ? Add::make(args[0], wb)
               : op->is_intrinsic(Call::widen_right_sub) ? Sub::make(args[0], wb)
                                                         : Mul::make(args[0], wb);
    }
    case Call::concat_bits:
        return concat_bits(op, args);
    case Call::extract_bits:
        return extract_bits(op, args);
    case Call::strict_add:
    case Call::strict_sub:
    case Call::strict_mul:
    case Call::strict_div:
    case Call::strict_min:
    case Call::strict_max:
    case Call::strict_lt:
    case Call::strict_le:
    case Call::strict_eq:
        return unstrict(op, args);
    default:
        return Expr();
    }
}

std::string intrinsic_removed_before_printing(const Call *op) {
    switch (op->intrinsic_op) {
    case Call::target_arch_is:
    case Call::target_bits:
    case Call::target_has_feature:
    case Call::target_natural_vector_size:
    case Call::target_os_is:
        return "Halide answers target queries from the target it compiles for, at the start of "
               "lowering (Lower.cpp: lower_target_query_ops), so they never reach its printed "
               "statements";
    case Call::skip_stages_marker:
        return "it is a marker that Halide's skip_stages pass removes (SkipStages.cpp), before "
               "it prints statements";
    case Call::sliding_window_marker:
        return "it is a marker that Halide's storage folding removes (StorageFolding.cpp), before "
               "it prints statements";
    case Call::profiling_enable_instance_marker:
        return "it is a marker that Halide's profiling pass replaces by "
               "halide_profiler_enable_instance (Profiling.cpp), before it prints statements";
    case Call::get_runtime_vscale:
        return "Halide's ARM back end creates it while generating SVE code (CodeGen_ARM.cpp); it "
               "is never in printed statements";
    default:
        return "";
    }
}

}  // namespace tally
