// Halide 21's IR in Tally's: one node for one node.
//
// Tally's IR is Halide's shape by design (include/tally/IR.h), so most nodes translate to the
// node of the same name with the same fields; what differs is said where it is done:
//   - Types: the same code, bits and lanes. A handle keeps the C spelling Halide's printer gives
//     it (`struct halide_buffer_t` for `(struct halide_buffer_t *)`), as the text reader does; a
//     function-pointer typedef (`halide_task_t`) is Tally's pointer typedef.
//   - Constants keep their values exactly: a FloatImm's double is its value, never printed.
//   - Halide's Loads and Stores carry an all-true predicate when unpredicated; Tally's leave it
//     undefined. Their Parameter and Buffer handles are dropped: Tally finds a buffer by name
//     (`<name>.buffer`), as in text.
//   - A padded allocation (Halide 21's `padding`) becomes one extent, the product of the extents
//     plus the padding, as the text reader reads `allocate f[T * (e1 * e2 + P)]`.
//   - VectorReduce is written out (make_vector_reduce), as for the text's `vector_reduce_add`.
//   - Halide's Block and Fork may nest to the left; Tally's nest to the right.
// Halide's Provide, Realize, Prefetch and HoistedStorage statements and its Image and Halide
// calls are gone by the conceptual stage; meeting one is an error naming it, as is an intrinsic
// Tally does not know. The switches below name every node type without a default, so a node type
// a later Halide adds fails to compile here (-Wswitch) instead of passing unnoticed.

#include "tally/halide/Bridge.h"

#include <sstream>

#include "Translate.h"

#include "tally/Error.h"
#include "tally/IR.h"

namespace tally {
namespace halide {

namespace HI = Halide::Internal;

namespace {

[[noreturn]] void unsupported(const std::string &what) {
    throw CompileError("the Halide bridge cannot translate " + what);
}

DeviceAPI device_api(Halide::DeviceAPI d) {
    switch (d) {
    case Halide::DeviceAPI::None:
        return DeviceAPI::None;
    case Halide::DeviceAPI::Host:
        return DeviceAPI::Host;
    case Halide::DeviceAPI::Default_GPU:
        return DeviceAPI::DefaultGPU;
    case Halide::DeviceAPI::CUDA:
        return DeviceAPI::CUDA;
    case Halide::DeviceAPI::OpenCL:
        return DeviceAPI::OpenCL;
    case Halide::DeviceAPI::Metal:
        return DeviceAPI::Metal;
    case Halide::DeviceAPI::Hexagon:
        return DeviceAPI::Hexagon;
    case Halide::DeviceAPI::HexagonDma:
        return DeviceAPI::HexagonDma;
    case Halide::DeviceAPI::D3D12Compute:
        return DeviceAPI::D3D12Compute;
    case Halide::DeviceAPI::Vulkan:
        return DeviceAPI::Vulkan;
    case Halide::DeviceAPI::WebGPU:
        return DeviceAPI::WebGPU;
    }
    unsupported("device API " + std::to_string(int(d)));
}

ForType for_type(HI::ForType t) {
    switch (t) {
    case HI::ForType::Serial:
        return ForType::Serial;
    case HI::ForType::Parallel:
        return ForType::Parallel;
    case HI::ForType::Vectorized:
        return ForType::Vectorized;
    case HI::ForType::Unrolled:
        return ForType::Unrolled;
    case HI::ForType::Extern:
        return ForType::Extern;
    case HI::ForType::GPUBlock:
        return ForType::GPUBlock;
    case HI::ForType::GPUThread:
        return ForType::GPUThread;
    case HI::ForType::GPULane:
        return ForType::GPULane;
    }
    unsupported("loop type " + std::to_string(int(t)));
}

MemoryType memory_type(Halide::MemoryType m) {
    switch (m) {
    case Halide::MemoryType::Auto:
        return MemoryType::Auto;
    case Halide::MemoryType::Heap:
        return MemoryType::Heap;
    case Halide::MemoryType::Stack:
        return MemoryType::Stack;
    case Halide::MemoryType::Register:
        return MemoryType::Register;
    case Halide::MemoryType::GPUShared:
        return MemoryType::GPUShared;
    case Halide::MemoryType::GPUTexture:
        return MemoryType::GPUTexture;
    case Halide::MemoryType::LockedCache:
        return MemoryType::LockedCache;
    case Halide::MemoryType::VTCM:
        return MemoryType::VTCM;
    case Halide::MemoryType::AMXTile:
        return MemoryType::AMXTile;
    }
    unsupported("memory type " + std::to_string(int(m)));
}

VectorReduceOp reduce_op(HI::VectorReduce::Operator op) {
    switch (op) {
    case HI::VectorReduce::Add:
        return VectorReduceOp::Add;
    case HI::VectorReduce::SaturatingAdd:
        return VectorReduceOp::SaturatingAdd;
    case HI::VectorReduce::Mul:
        return VectorReduceOp::Mul;
    case HI::VectorReduce::Min:
        return VectorReduceOp::Min;
    case HI::VectorReduce::Max:
        return VectorReduceOp::Max;
    case HI::VectorReduce::And:
        return VectorReduceOp::And;
    case HI::VectorReduce::Or:
        return VectorReduceOp::Or;
    }
    unsupported("vector reduction operator " + std::to_string(int(op)));
}

Call::CallType call_type(const HI::Call *op) {
    switch (op->call_type) {
    case HI::Call::Extern:
        return Call::Extern;
    case HI::Call::ExternCPlusPlus:
        return Call::ExternCPlusPlus;
    case HI::Call::PureExtern:
        return Call::PureExtern;
    case HI::Call::Intrinsic:
        return Call::Intrinsic;
    case HI::Call::PureIntrinsic:
        return Call::PureIntrinsic;
    case HI::Call::Image:
    case HI::Call::Halide:
        // Storage flattening turned every call of a Func or an image into a load.
        unsupported("the call of '" + op->name +
                    "' to a Func or image: Halide's lowering removes those before the "
                    "conceptual statement");
    }
    unsupported("call type " + std::to_string(int(op->call_type)));
}

std::string node_name(HI::IRNodeType t) {
    std::ostringstream s;
    s << t;
    return s.str();
}

/** The translator. Expressions recurse; statement chains that Halide builds long (blocks, lets,
 * forks) are walked in loops. */
class Translator {
public:
    explicit Translator(std::map<std::string, Halide::Buffer<>> *images = nullptr)
        : images(images) {}

    Expr expr(const Halide::Expr &e) {
        if (!e.defined()) {
            return Expr();
        }
        switch (e->node_type) {
        case HI::IRNodeType::IntImm:
            return IntImm::make(translate(e.type()), e.as<HI::IntImm>()->value);
        case HI::IRNodeType::UIntImm:
            return UIntImm::make(translate(e.type()), e.as<HI::UIntImm>()->value);
        case HI::IRNodeType::FloatImm:
            return FloatImm::make(translate(e.type()), e.as<HI::FloatImm>()->value);
        case HI::IRNodeType::StringImm:
            return StringImm::make(e.as<HI::StringImm>()->value);
        case HI::IRNodeType::Broadcast: {
            const auto *op = e.as<HI::Broadcast>();
            return Broadcast::make(expr(op->value), op->lanes);
        }
        case HI::IRNodeType::Cast:
            return Cast::make(translate(e.type()), expr(e.as<HI::Cast>()->value));
        case HI::IRNodeType::Reinterpret:
            return Reinterpret::make(translate(e.type()), expr(e.as<HI::Reinterpret>()->value));
        case HI::IRNodeType::Variable: {
            const auto *op = e.as<HI::Variable>();
            note_image(op->image);
            return Variable::make(translate(e.type()), op->name);
        }
        case HI::IRNodeType::Add:
            return binary<Add, HI::Add>(e);
        case HI::IRNodeType::Sub:
            return binary<Sub, HI::Sub>(e);
        case HI::IRNodeType::Mod:
            return binary<Mod, HI::Mod>(e);
        case HI::IRNodeType::Mul:
            return binary<Mul, HI::Mul>(e);
        case HI::IRNodeType::Div:
            return binary<Div, HI::Div>(e);
        case HI::IRNodeType::Min:
            return binary<Min, HI::Min>(e);
        case HI::IRNodeType::Max:
            return binary<Max, HI::Max>(e);
        case HI::IRNodeType::EQ:
            return binary<EQ, HI::EQ>(e);
        case HI::IRNodeType::NE:
            return binary<NE, HI::NE>(e);
        case HI::IRNodeType::LT:
            return binary<LT, HI::LT>(e);
        case HI::IRNodeType::LE:
            return binary<LE, HI::LE>(e);
        case HI::IRNodeType::GT:
            return binary<GT, HI::GT>(e);
        case HI::IRNodeType::GE:
            return binary<GE, HI::GE>(e);
        case HI::IRNodeType::And:
            return binary<And, HI::And>(e);
        case HI::IRNodeType::Or:
            return binary<Or, HI::Or>(e);
        case HI::IRNodeType::Not:
            return Not::make(expr(e.as<HI::Not>()->a));
        case HI::IRNodeType::Select: {
            const auto *op = e.as<HI::Select>();
            return Select::make(expr(op->condition), expr(op->true_value), expr(op->false_value));
        }
        case HI::IRNodeType::Load: {
            const auto *op = e.as<HI::Load>();
            note_image(op->image);
            return Load::make(translate(op->type), op->name, expr(op->index),
                              predicate(op->predicate), alignment(op->alignment));
        }
        case HI::IRNodeType::Ramp: {
            const auto *op = e.as<HI::Ramp>();
            return Ramp::make(expr(op->base), expr(op->stride), op->lanes);
        }
        case HI::IRNodeType::Call:
            return call(e.as<HI::Call>());
        case HI::IRNodeType::Let: {
            const auto *op = e.as<HI::Let>();
            return Let::make(op->name, expr(op->value), expr(op->body));
        }
        case HI::IRNodeType::Shuffle: {
            const auto *op = e.as<HI::Shuffle>();
            std::vector<Expr> vectors;
            for (const Halide::Expr &v : op->vectors) {
                vectors.push_back(expr(v));
            }
            return Shuffle::make(vectors, op->indices);
        }
        case HI::IRNodeType::VectorReduce: {
            const auto *op = e.as<HI::VectorReduce>();
            return make_vector_reduce(reduce_op(op->op), expr(op->value), op->type.lanes());
        }
        case HI::IRNodeType::LetStmt:
        case HI::IRNodeType::AssertStmt:
        case HI::IRNodeType::ProducerConsumer:
        case HI::IRNodeType::For:
        case HI::IRNodeType::Acquire:
        case HI::IRNodeType::Store:
        case HI::IRNodeType::Provide:
        case HI::IRNodeType::Allocate:
        case HI::IRNodeType::Free:
        case HI::IRNodeType::Realize:
        case HI::IRNodeType::Block:
        case HI::IRNodeType::Fork:
        case HI::IRNodeType::IfThenElse:
        case HI::IRNodeType::Evaluate:
        case HI::IRNodeType::Prefetch:
        case HI::IRNodeType::Atomic:
        case HI::IRNodeType::HoistedStorage:
            break;
        }
        unsupported("an expression node of type " + node_name(e->node_type));
    }

    Stmt stmt(const HI::Stmt &s) {
        if (!s.defined()) {
            return Stmt();
        }
        switch (s->node_type) {
        case HI::IRNodeType::LetStmt: {
            // Long chains of lets: translated in a loop, rebuilt inside out.
            std::vector<const HI::LetStmt *> lets;
            HI::Stmt cur = s;
            while (const auto *op = cur.as<HI::LetStmt>()) {
                lets.push_back(op);
                cur = op->body;
            }
            std::vector<Expr> values;
            for (const HI::LetStmt *op : lets) {
                values.push_back(expr(op->value));
            }
            Stmt body = stmt(cur);
            for (size_t i = lets.size(); i-- > 0;) {
                body = LetStmt::make(lets[i]->name, values[i], body);
            }
            return body;
        }
        case HI::IRNodeType::AssertStmt: {
            const auto *op = s.as<HI::AssertStmt>();
            return AssertStmt::make(expr(op->condition), expr(op->message));
        }
        case HI::IRNodeType::ProducerConsumer: {
            const auto *op = s.as<HI::ProducerConsumer>();
            return ProducerConsumer::make(op->name, op->is_producer, stmt(op->body));
        }
        case HI::IRNodeType::For: {
            // Halide 21's partition policy is spent by the conceptual stage (loops are
            // partitioned already); Tally's For has none.
            const auto *op = s.as<HI::For>();
            return For::make(op->name, expr(op->min), expr(op->extent), for_type(op->for_type),
                             device_api(op->device_api), stmt(op->body));
        }
        case HI::IRNodeType::Acquire: {
            const auto *op = s.as<HI::Acquire>();
            return Acquire::make(expr(op->semaphore), expr(op->count), stmt(op->body));
        }
        case HI::IRNodeType::Store: {
            const auto *op = s.as<HI::Store>();
            return Store::make(op->name, expr(op->value), expr(op->index), predicate(op->predicate),
                               alignment(op->alignment));
        }
        case HI::IRNodeType::Allocate: {
            const auto *op = s.as<HI::Allocate>();
            std::vector<Expr> extents;
            for (const Halide::Expr &x : op->extents) {
                extents.push_back(expr(x));
            }
            if (op->padding > 0) {
                Expr size = extents.empty() ? Expr(IntImm::make(Int(32), 1)) : extents[0];
                for (size_t i = 1; i < extents.size(); i++) {
                    size = Mul::make(size, extents[i]);
                }
                extents = {Add::make(size, IntImm::make(Int(32), op->padding))};
            }
            return Allocate::make(op->name, translate(op->type), memory_type(op->memory_type),
                                  extents, predicate(op->condition), stmt(op->body),
                                  expr(op->new_expr), op->free_function);
        }
        case HI::IRNodeType::Free:
            return Free::make(s.as<HI::Free>()->name);
        case HI::IRNodeType::Block: {
            // Flattened, whichever way Halide nested it, then nested to the right.
            std::vector<HI::Stmt> parts;
            flatten<HI::Block>(s, &parts);
            std::vector<Stmt> out;
            for (const HI::Stmt &p : parts) {
                out.push_back(stmt(p));
            }
            return Block::make(out);
        }
        case HI::IRNodeType::Fork: {
            std::vector<HI::Stmt> parts;
            flatten<HI::Fork>(s, &parts);
            std::vector<Stmt> out;
            for (const HI::Stmt &p : parts) {
                out.push_back(stmt(p));
            }
            return Fork::make(out);
        }
        case HI::IRNodeType::IfThenElse: {
            const auto *op = s.as<HI::IfThenElse>();
            return IfThenElse::make(expr(op->condition), stmt(op->then_case), stmt(op->else_case));
        }
        case HI::IRNodeType::Evaluate:
            return Evaluate::make(expr(s.as<HI::Evaluate>()->value));
        case HI::IRNodeType::Atomic: {
            const auto *op = s.as<HI::Atomic>();
            return Atomic::make(op->producer_name, op->mutex_name, stmt(op->body));
        }
        case HI::IRNodeType::Provide:
            unsupported("the Provide statement to '" + s.as<HI::Provide>()->name +
                        "': Halide's storage flattening removes those before the conceptual "
                        "statement");
        case HI::IRNodeType::Realize:
            unsupported("the Realize statement of '" + s.as<HI::Realize>()->name +
                        "': Halide's storage flattening removes those before the conceptual "
                        "statement");
        case HI::IRNodeType::Prefetch:
            unsupported("the Prefetch statement of '" + s.as<HI::Prefetch>()->name +
                        "': Halide's lowering turns those into prefetch calls before the "
                        "conceptual statement");
        case HI::IRNodeType::HoistedStorage:
            unsupported("the HoistedStorage statement of '" + s.as<HI::HoistedStorage>()->name +
                        "': Halide's lowering removes those before the conceptual statement");
        case HI::IRNodeType::IntImm:
        case HI::IRNodeType::UIntImm:
        case HI::IRNodeType::FloatImm:
        case HI::IRNodeType::StringImm:
        case HI::IRNodeType::Broadcast:
        case HI::IRNodeType::Cast:
        case HI::IRNodeType::Reinterpret:
        case HI::IRNodeType::Variable:
        case HI::IRNodeType::Add:
        case HI::IRNodeType::Sub:
        case HI::IRNodeType::Mod:
        case HI::IRNodeType::Mul:
        case HI::IRNodeType::Div:
        case HI::IRNodeType::Min:
        case HI::IRNodeType::Max:
        case HI::IRNodeType::EQ:
        case HI::IRNodeType::NE:
        case HI::IRNodeType::LT:
        case HI::IRNodeType::LE:
        case HI::IRNodeType::GT:
        case HI::IRNodeType::GE:
        case HI::IRNodeType::And:
        case HI::IRNodeType::Or:
        case HI::IRNodeType::Not:
        case HI::IRNodeType::Select:
        case HI::IRNodeType::Load:
        case HI::IRNodeType::Ramp:
        case HI::IRNodeType::Call:
        case HI::IRNodeType::Let:
        case HI::IRNodeType::Shuffle:
        case HI::IRNodeType::VectorReduce:
            break;
        }
        unsupported("a statement node of type " + node_name(s->node_type));
    }

private:
    std::map<std::string, Halide::Buffer<>> *images;

    /** A Buffer the statement names directly (not through a parameter): one the pipeline
     * embeds. */
    void note_image(const Halide::Buffer<> &b) {
        if (images && b.defined()) {
            images->emplace(b.name(), b);
        }
    }

    template <typename T, typename H>
    Expr binary(const Halide::Expr &e) {
        const H *op = e.as<H>();
        return T::make(expr(op->a), expr(op->b));
    }

    /** The parts of a chain of Blocks (or Forks), in order, however they nest. */
    template <typename H>
    static void flatten(const HI::Stmt &s, std::vector<HI::Stmt> *out) {
        std::vector<HI::Stmt> todo = {s};
        while (!todo.empty()) {
            HI::Stmt cur = todo.back();
            todo.pop_back();
            if (const H *op = cur.as<H>()) {
                todo.push_back(op->rest);
                todo.push_back(op->first);
            } else if (cur.defined()) {
                out->push_back(cur);
            }
        }
    }

    /** A predicate or condition: undefined when always true, as Tally's nodes say it. */
    Expr predicate(const Halide::Expr &p) {
        return !p.defined() || HI::is_const_one(p) ? Expr() : expr(p);
    }

    static ModulusRemainder alignment(const HI::ModulusRemainder &a) {
        return ModulusRemainder{a.modulus, a.remainder};
    }

    Expr call(const HI::Call *op) {
        Call::CallType ct = call_type(op);
        if (ct == Call::Intrinsic || ct == Call::PureIntrinsic) {
            if (Call::find_intrinsic(op->name) == Call::IntrinsicOpCount) {
                unsupported("the intrinsic '" + op->name + "': Tally does not know it");
            }
        }
        std::vector<Expr> args;
        for (const Halide::Expr &a : op->args) {
            args.push_back(expr(a));
        }
        return Call::make(translate(op->type), op->name, args, ct);
    }
};

}  // namespace

Type translate(const Halide::Type &t) {
    switch (t.code()) {
    case Halide::Type::Int:
        return Type(Type::Int, t.bits(), t.lanes());
    case Halide::Type::UInt:
        return Type(Type::UInt, t.bits(), t.lanes());
    case Halide::Type::Float:
        return Type(Type::Float, t.bits(), t.lanes());
    case Halide::Type::BFloat:
        return Type(Type::BFloat, t.bits(), t.lanes());
    case Halide::Type::Handle: {
        // The C type Halide's printer writes inside `(...)`: a pointer to the pointee Tally
        // keeps, or a function-pointer typedef.
        std::string c = Halide::type_to_c_type(t.with_lanes(1), false);
        const std::string star = " *";
        if (c.size() > star.size() && c.compare(c.size() - star.size(), star.size(), star) == 0) {
            return Handle(c.substr(0, c.size() - star.size()), t.lanes());
        }
        if (t.handle_type && !t.handle_type->cpp_type_modifiers.empty() &&
            (t.handle_type->cpp_type_modifiers.back() &
             halide_handle_cplusplus_type::FunctionTypedef)) {
            return Type::pointer_typedef(c, t.lanes());
        }
        unsupported("the handle type '" + c + "', which is not a pointer");
    }
    }
    unsupported("type code " + std::to_string(int(t.code())));
}

Expr translate(const Halide::Expr &e) {
    return Translator().expr(e);
}

Stmt translate(const HI::Stmt &s) {
    return Translator().stmt(s);
}

Stmt translate(const HI::Stmt &s, std::map<std::string, Halide::Buffer<>> *images) {
    return Translator(images).stmt(s);
}

}  // namespace halide
}  // namespace tally
