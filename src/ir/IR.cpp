// Node factories. Every factory checks the invariants of the node it builds with
// internal_assert: a violation is a bug in whoever called it (the parser checks user input
// before it gets here and reports located errors instead).

#include "tally/IR.h"

#include <unordered_map>

#include "tally/Error.h"

namespace tally {

const char *for_type_name(ForType t) {
    switch (t) {
    case ForType::Serial:
        return "for";
    case ForType::Parallel:
        return "parallel";
    case ForType::Vectorized:
        return "vectorized";
    case ForType::Unrolled:
        return "unrolled";
    case ForType::Extern:
        return "extern";
    case ForType::GPUBlock:
        return "gpu_block";
    case ForType::GPUThread:
        return "gpu_thread";
    case ForType::GPULane:
        return "gpu_lane";
    }
    return "?";
}

const char *device_api_name(DeviceAPI d) {
    switch (d) {
    case DeviceAPI::None:
        return "";
    case DeviceAPI::Host:
        return "Host";
    case DeviceAPI::DefaultGPU:
        return "Default_GPU";
    case DeviceAPI::CUDA:
        return "CUDA";
    case DeviceAPI::OpenCL:
        return "OpenCL";
    case DeviceAPI::OpenGLCompute:
        return "OpenGLCompute";
    case DeviceAPI::Metal:
        return "Metal";
    case DeviceAPI::Hexagon:
        return "Hexagon";
    case DeviceAPI::HexagonDma:
        return "HexagonDma";
    case DeviceAPI::D3D12Compute:
        return "D3D12Compute";
    case DeviceAPI::Vulkan:
        return "Vulkan";
    case DeviceAPI::WebGPU:
        return "WebGPU";
    }
    return "?";
}

const char *memory_type_name(MemoryType m) {
    switch (m) {
    case MemoryType::Auto:
        return "Auto";
    case MemoryType::Heap:
        return "Heap";
    case MemoryType::Stack:
        return "Stack";
    case MemoryType::Register:
        return "Register";
    case MemoryType::GPUShared:
        return "GPUShared";
    case MemoryType::GPUTexture:
        return "GPUTexture";
    case MemoryType::LockedCache:
        return "LockedCache";
    case MemoryType::VTCM:
        return "VTCM";
    case MemoryType::AMXTile:
        return "AMXTile";
    }
    return "?";
}

bool is_gpu_for_type(ForType t) {
    return t == ForType::GPUBlock || t == ForType::GPUThread || t == ForType::GPULane;
}

const char *call_type_name(Call::CallType t) {
    switch (t) {
    case Call::Image:
        return "image";
    case Call::Extern:
        return "extern";
    case Call::ExternCPlusPlus:
        return "extern_cplusplus";
    case Call::PureExtern:
        return "pure_extern";
    case Call::Halide:
        return "halide";
    case Call::Intrinsic:
        return "intrinsic";
    case Call::PureIntrinsic:
        return "pure_intrinsic";
    }
    return "?";
}

void destroy_ir_node(const IRNode *n) {
    thread_local std::vector<const IRNode *> *pending = nullptr;
    if (pending) {
        pending->push_back(n);
        return;
    }
    std::vector<const IRNode *> queue;
    pending = &queue;
    delete n;
    while (!queue.empty()) {
        const IRNode *x = queue.back();
        queue.pop_back();
        delete x;
    }
    pending = nullptr;
}

// ---------------------------------------------------------------------------------------------

Expr IntImm::make(Type t, int64_t value) {
    internal_assert(t.is_int() && t.is_scalar()) << "IntImm of type " << t.to_string();
    internal_assert(t.can_represent(value)) << value << " does not fit in " << t.to_string();
    return new IntImm(t, value);
}

Expr UIntImm::make(Type t, uint64_t value) {
    internal_assert(t.is_uint() && t.is_scalar()) << "UIntImm of type " << t.to_string();
    internal_assert(value <= t.max_uint()) << value << " does not fit in " << t.to_string();
    return new UIntImm(t, value);
}

Expr FloatImm::make(Type t, double value) {
    internal_assert(t.is_float() && t.is_scalar()) << "FloatImm of type " << t.to_string();
    if (t.bits() == 32) {
        value = double(float(value));
    }
    return new FloatImm(t, value);
}

Expr StringImm::make(const std::string &value) {
    return new StringImm(value);
}

Expr Cast::make(Type t, Expr value) {
    internal_assert(value.defined()) << "Cast of undefined";
    internal_assert(t.lanes() == value.type().lanes())
        << "Cast from " << value.type().to_string() << " to " << t.to_string();
    return new Cast(t, std::move(value));
}

Expr Reinterpret::make(Type t, Expr value) {
    internal_assert(value.defined()) << "Reinterpret of undefined";
    return new Reinterpret(t, std::move(value));
}

Expr Variable::make(Type t, const std::string &name) {
    internal_assert(!name.empty()) << "Variable with an empty name";
    internal_assert(t.is_valid()) << "Variable " << name << " of unknown type";
    return new Variable(t, name);
}

namespace {

template <typename T>
Expr make_arith(Expr a, Expr b) {
    internal_assert(a.defined() && b.defined()) << "binary operator with undefined operand";
    internal_assert(types_compatible(a.type(), b.type()))
        << "operand types differ: " << a.type().to_string() << " vs " << b.type().to_string();
    Type t = a.type();
    return new T(t, std::move(a), std::move(b));
}

template <typename T>
Expr make_cmp(Expr a, Expr b) {
    internal_assert(a.defined() && b.defined()) << "comparison with undefined operand";
    internal_assert(types_compatible(a.type(), b.type()))
        << "operand types differ: " << a.type().to_string() << " vs " << b.type().to_string();
    Type t = Bool(a.type().lanes());
    return new T(t, std::move(a), std::move(b));
}

template <typename T>
Expr make_logical(Expr a, Expr b) {
    internal_assert(a.defined() && b.defined()) << "logical operator with undefined operand";
    internal_assert(a.type().is_bool() && b.type().is_bool() &&
                    a.type().lanes() == b.type().lanes())
        << "logical operands must be bool of equal lanes: " << a.type().to_string() << ", "
        << b.type().to_string();
    Type t = a.type();
    return new T(t, std::move(a), std::move(b));
}

}  // namespace

Expr Add::make(Expr a, Expr b) {
    return make_arith<Add>(std::move(a), std::move(b));
}
Expr Sub::make(Expr a, Expr b) {
    return make_arith<Sub>(std::move(a), std::move(b));
}
Expr Mul::make(Expr a, Expr b) {
    return make_arith<Mul>(std::move(a), std::move(b));
}
Expr Div::make(Expr a, Expr b) {
    return make_arith<Div>(std::move(a), std::move(b));
}
Expr Mod::make(Expr a, Expr b) {
    return make_arith<Mod>(std::move(a), std::move(b));
}
Expr Min::make(Expr a, Expr b) {
    return make_arith<Min>(std::move(a), std::move(b));
}
Expr Max::make(Expr a, Expr b) {
    return make_arith<Max>(std::move(a), std::move(b));
}
Expr EQ::make(Expr a, Expr b) {
    return make_cmp<EQ>(std::move(a), std::move(b));
}
Expr NE::make(Expr a, Expr b) {
    return make_cmp<NE>(std::move(a), std::move(b));
}
Expr LT::make(Expr a, Expr b) {
    return make_cmp<LT>(std::move(a), std::move(b));
}
Expr LE::make(Expr a, Expr b) {
    return make_cmp<LE>(std::move(a), std::move(b));
}
Expr GT::make(Expr a, Expr b) {
    return make_cmp<GT>(std::move(a), std::move(b));
}
Expr GE::make(Expr a, Expr b) {
    return make_cmp<GE>(std::move(a), std::move(b));
}
Expr And::make(Expr a, Expr b) {
    return make_logical<And>(std::move(a), std::move(b));
}
Expr Or::make(Expr a, Expr b) {
    return make_logical<Or>(std::move(a), std::move(b));
}

Expr Not::make(Expr a) {
    internal_assert(a.defined() && a.type().is_bool()) << "Not of a non-bool";
    Type t = a.type();
    return new Not(t, std::move(a));
}

Expr Select::make(Expr c, Expr t, Expr f) {
    internal_assert(c.defined() && t.defined() && f.defined()) << "Select with undefined operand";
    internal_assert(c.type().is_bool()) << "Select condition is not bool";
    internal_assert(types_compatible(t.type(), f.type())) << "Select values differ in type";
    internal_assert(c.type().lanes() == 1 || c.type().lanes() == t.type().lanes())
        << "Select condition lanes";
    Type ty = t.type();
    return new Select(ty, std::move(c), std::move(t), std::move(f));
}

Expr Load::make(Type t, const std::string &name, Expr index, Expr predicate,
                ModulusRemainder alignment) {
    internal_assert(!name.empty()) << "Load from an unnamed buffer";
    internal_assert(index.defined()) << "Load without index";
    internal_assert(index.type().lanes() == t.lanes()) << "Load lanes differ from index lanes";
    internal_assert(!predicate.defined() || predicate.type().lanes() == t.lanes())
        << "Load predicate lanes";
    return new Load(t, name, std::move(index), std::move(predicate), alignment);
}

Expr Ramp::make(Expr base, Expr stride, int lanes) {
    internal_assert(base.defined() && stride.defined()) << "Ramp with undefined operand";
    internal_assert(lanes > 1) << "Ramp of " << lanes << " lanes";
    internal_assert(types_compatible(base.type(), stride.type())) << "Ramp base/stride types";
    Type t = base.type().with_lanes(base.type().lanes() * lanes);
    return new Ramp(t, std::move(base), std::move(stride), lanes);
}

Expr Broadcast::make(Expr value, int lanes) {
    internal_assert(value.defined()) << "Broadcast of undefined";
    internal_assert(lanes > 1) << "Broadcast of " << lanes << " lanes";
    Type t = value.type().with_lanes(value.type().lanes() * lanes);
    return new Broadcast(t, std::move(value), lanes);
}

Expr Let::make(const std::string &name, Expr value, Expr body) {
    internal_assert(value.defined() && body.defined()) << "Let " << name << " undefined part";
    Type t = body.type();
    return new Let(t, name, std::move(value), std::move(body));
}

Expr Call::make(Type t, const std::string &name, std::vector<Expr> args, CallType call_type) {
    internal_assert(!name.empty()) << "Call with an empty name";
    for (const Expr &a : args) {
        internal_assert(a.defined()) << "Call " << name << " with an undefined argument";
    }
    return new Call(t, name, std::move(args), call_type);
}

namespace {

struct IntrinsicInfo {
    const char *name;
    bool pure;
    unsigned dialects;
};

constexpr bool Pure = true, Impure = false;
constexpr unsigned H14 = Dialects::H14, H21 = Dialects::H21, Tally = Dialects::Tally;
const IntrinsicInfo intrinsic_infos[] = {
#define TALLY_INTRINSIC(NAME, PURITY, DIALECTS) {#NAME, PURITY, DIALECTS},
#include "tally/Intrinsics.def"
};
static_assert(sizeof(intrinsic_infos) / sizeof(intrinsic_infos[0]) == Call::IntrinsicOpCount,
              "one IntrinsicInfo per Call::IntrinsicOp");

const IntrinsicInfo &intrinsic_info(Call::IntrinsicOp op) {
    internal_assert(op < Call::IntrinsicOpCount) << "intrinsic " << int(op) << " out of range";
    return intrinsic_infos[op];
}

}  // namespace

const char *Call::intrinsic_name(IntrinsicOp op) {
    return intrinsic_info(op).name;
}
bool Call::is_pure_intrinsic(IntrinsicOp op) {
    return intrinsic_info(op).pure;
}
unsigned Call::intrinsic_dialects(IntrinsicOp op) {
    return intrinsic_info(op).dialects;
}

Call::IntrinsicOp Call::find_intrinsic(const std::string &name) {
    static const std::unordered_map<std::string, IntrinsicOp> by_name = [] {
        std::unordered_map<std::string, IntrinsicOp> m;
        for (int i = 0; i < IntrinsicOpCount; i++) {
            m.emplace(intrinsic_infos[i].name, IntrinsicOp(i));
        }
        return m;
    }();
    auto it = by_name.find(name);
    return it == by_name.end() ? IntrinsicOpCount : it->second;
}

Expr Call::make(Type t, IntrinsicOp op, std::vector<Expr> args) {
    return make(std::move(t), intrinsic_name(op), std::move(args), Intrinsic);
}

Call::CallType Call::default_call_type(const std::string &name) {
    // Halide's intrinsics that appear in lowered statements; everything else is extern.
    return find_intrinsic(name) != IntrinsicOpCount ? Intrinsic : Extern;
}

Expr Shuffle::make(std::vector<Expr> vectors, std::vector<int> indices) {
    internal_assert(!vectors.empty()) << "Shuffle of no vectors";
    internal_assert(!indices.empty()) << "Shuffle with no indices";
    int total = 0;
    for (const Expr &v : vectors) {
        internal_assert(v.defined()) << "Shuffle of undefined vector";
        internal_assert(types_compatible(v.type().element_of(), vectors[0].type().element_of()))
            << "Shuffle vectors differ in element type";
        total += v.type().lanes();
    }
    for (int i : indices) {
        internal_assert(i >= 0 && i < total) << "Shuffle index " << i << " out of range";
    }
    Type t = vectors[0].type().with_lanes(int(indices.size()));
    return new Shuffle(t, std::move(vectors), std::move(indices));
}

Expr Shuffle::make_interleave(std::vector<Expr> vectors) {
    internal_assert(!vectors.empty()) << "interleave of nothing";
    int n = vectors.size(), lanes = vectors[0].type().lanes();
    std::vector<int> idx;
    for (int i = 0; i < lanes; i++) {
        for (int j = 0; j < n; j++) {
            idx.push_back(j * lanes + i);
        }
    }
    return make(std::move(vectors), idx);
}

Expr Shuffle::make_concat(std::vector<Expr> vectors) {
    int total = 0;
    for (const Expr &v : vectors) {
        total += v.type().lanes();
    }
    std::vector<int> idx(total);
    for (int i = 0; i < total; i++) {
        idx[i] = i;
    }
    return make(std::move(vectors), idx);
}

Expr Shuffle::make_slice(Expr vector, int begin, int stride, int size) {
    std::vector<int> idx;
    for (int i = 0; i < size; i++) {
        idx.push_back(begin + i * stride);
    }
    return make({std::move(vector)}, idx);
}

Expr Shuffle::make_extract_element(Expr vector, int i) {
    return make({std::move(vector)}, {i});
}

bool Shuffle::is_interleave() const {
    int n = vectors.size();
    if (n < 2) {
        return false;
    }
    int lanes = vectors[0].type().lanes();
    for (const Expr &v : vectors) {
        if (v.type().lanes() != lanes) {
            return false;
        }
    }
    if (int(indices.size()) != n * lanes) {
        return false;
    }
    for (int i = 0; i < lanes; i++) {
        for (int j = 0; j < n; j++) {
            if (indices[i * n + j] != j * lanes + i) {
                return false;
            }
        }
    }
    return true;
}

bool Shuffle::is_concat() const {
    int total = 0;
    for (const Expr &v : vectors) {
        total += v.type().lanes();
    }
    if (int(indices.size()) != total || vectors.size() < 2) {
        return false;
    }
    for (int i = 0; i < total; i++) {
        if (indices[i] != i) {
            return false;
        }
    }
    return true;
}

bool Shuffle::is_slice() const {
    if (vectors.size() != 1 || indices.size() < 2) {
        return false;
    }
    int stride = indices[1] - indices[0];
    if (stride <= 0) {
        return false;
    }
    for (size_t i = 1; i < indices.size(); i++) {
        if (indices[i] != indices[0] + int(i) * stride) {
            return false;
        }
    }
    return true;
}

bool Shuffle::is_extract_element() const {
    return vectors.size() == 1 && indices.size() == 1;
}

// ---------------------------------------------------------------------------------------------

Stmt LetStmt::make(const std::string &name, Expr value, Stmt body) {
    internal_assert(value.defined() && body.defined()) << "LetStmt " << name << " undefined part";
    LetStmt *n = new LetStmt;
    n->name = name;
    n->value = std::move(value);
    n->body = std::move(body);
    return n;
}

Stmt AssertStmt::make(Expr condition, Expr message) {
    internal_assert(condition.defined() && message.defined()) << "AssertStmt undefined part";
    internal_assert(condition.type().is_bool() && condition.type().is_scalar())
        << "AssertStmt condition must be a scalar bool";
    AssertStmt *n = new AssertStmt;
    n->condition = std::move(condition);
    n->message = std::move(message);
    return n;
}

bool atomic_mutex_producer(const std::string &name, std::string *producer) {
    static const std::string suffix = ".mutex";
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
        return false;
    }
    *producer = name.substr(0, name.size() - suffix.size());
    return true;
}

Stmt Atomic::make(const std::string &producer_name, const std::string &mutex_name, Stmt body) {
    internal_assert(body.defined()) << "Atomic without body";
    Atomic *n = new Atomic;
    n->producer_name = producer_name;
    n->mutex_name = mutex_name;
    n->body = std::move(body);
    return n;
}

Stmt Fork::make(Stmt first, Stmt rest) {
    internal_assert(first.defined() && rest.defined()) << "Fork without two branches";
    Fork *n = new Fork;
    n->first = std::move(first);
    n->rest = std::move(rest);
    return n;
}

Stmt Fork::make(const std::vector<Stmt> &branches) {
    internal_assert(branches.size() >= 2) << "Fork of fewer than two branches";
    Stmt s = branches.back();
    for (size_t i = branches.size() - 1; i-- > 0;) {
        s = Fork::make(branches[i], s);
    }
    return s;
}

std::vector<Stmt> fork_branches(const Fork *op) {
    std::vector<Stmt> out;
    while (true) {
        out.push_back(op->first);
        const Fork *next = op->rest.as<Fork>();
        if (!next) {
            out.push_back(op->rest);
            return out;
        }
        op = next;
    }
}

Stmt Acquire::make(Expr semaphore, Expr count, Stmt body) {
    internal_assert(semaphore.defined() && count.defined() && body.defined())
        << "Acquire without semaphore, count or body";
    Acquire *n = new Acquire;
    n->semaphore = std::move(semaphore);
    n->count = std::move(count);
    n->body = std::move(body);
    return n;
}

Stmt ProducerConsumer::make(const std::string &name, bool is_producer, Stmt body) {
    internal_assert(body.defined()) << "ProducerConsumer " << name << " without body";
    ProducerConsumer *n = new ProducerConsumer;
    n->name = name;
    n->is_producer = is_producer;
    n->body = std::move(body);
    return n;
}

Stmt For::make(const std::string &name, Expr min, Expr extent, ForType for_type,
               DeviceAPI device_api, Stmt body) {
    internal_assert(min.defined() && extent.defined() && body.defined()) << "For undefined part";
    internal_assert(min.type().is_scalar() && extent.type().is_scalar()) << "For bounds lanes";
    For *n = new For;
    n->name = name;
    n->min = std::move(min);
    n->extent = std::move(extent);
    n->for_type = for_type;
    n->device_api = device_api;
    n->body = std::move(body);
    return n;
}

Stmt Store::make(const std::string &name, Expr value, Expr index, Expr predicate,
                 ModulusRemainder alignment) {
    internal_assert(value.defined() && index.defined()) << "Store undefined part";
    internal_assert(value.type().lanes() == index.type().lanes()) << "Store lanes mismatch";
    Store *n = new Store;
    n->name = name;
    n->value = std::move(value);
    n->index = std::move(index);
    n->predicate = std::move(predicate);
    n->alignment = alignment;
    return n;
}

Stmt Allocate::make(const std::string &name, Type type, MemoryType memory_type,
                    std::vector<Expr> extents, Expr condition, Stmt body, Expr new_expr,
                    const std::string &free_function) {
    internal_assert(body.defined()) << "Allocate " << name << " without body";
    for (const Expr &e : extents) {
        internal_assert(e.defined() && e.type().is_scalar()) << "Allocate extent";
    }
    Allocate *n = new Allocate;
    n->name = name;
    n->type = std::move(type);
    n->memory_type = memory_type;
    n->extents = std::move(extents);
    n->condition = std::move(condition);
    n->new_expr = std::move(new_expr);
    n->free_function = free_function;
    n->body = std::move(body);
    return n;
}

Stmt Free::make(const std::string &name) {
    Free *n = new Free;
    n->name = name;
    return n;
}

Stmt Block::make(Stmt first, Stmt rest) {
    internal_assert(first.defined() && rest.defined()) << "Block of undefined";
    // Keep blocks right-nested: a Block as first is split up.
    if (const Block *b = first.as<Block>()) {
        return Block::make(b->first, Block::make(b->rest, std::move(rest)));
    }
    Block *n = new Block;
    n->first = std::move(first);
    n->rest = std::move(rest);
    return n;
}

Stmt Block::make(const std::vector<Stmt> &stmts) {
    Stmt result;
    for (auto it = stmts.rbegin(); it != stmts.rend(); ++it) {
        if (!it->defined()) {
            continue;
        }
        result = result.defined() ? Block::make(*it, result) : *it;
    }
    return result;
}

Stmt IfThenElse::make(Expr condition, Stmt then_case, Stmt else_case) {
    internal_assert(condition.defined() && then_case.defined()) << "IfThenElse undefined part";
    internal_assert(condition.type().is_bool() && condition.type().is_scalar())
        << "IfThenElse condition must be a scalar bool";
    IfThenElse *n = new IfThenElse;
    n->condition = std::move(condition);
    n->then_case = std::move(then_case);
    n->else_case = std::move(else_case);
    return n;
}

Stmt Evaluate::make(Expr value) {
    internal_assert(value.defined()) << "Evaluate of undefined";
    Evaluate *n = new Evaluate;
    n->value = std::move(value);
    return n;
}

// ---------------------------------------------------------------------------------------------

Expr make_const(Type t, int64_t v) {
    if (t.is_vector()) {
        return Broadcast::make(make_const(t.element_of(), v), t.lanes());
    }
    if (t.is_int()) {
        return IntImm::make(t, v);
    }
    if (t.is_uint()) {
        return UIntImm::make(t, uint64_t(v));
    }
    if (t.is_float()) {
        return FloatImm::make(t, double(v));
    }
    internal_error << "make_const of type " << t.to_string();
}

Expr make_zero(Type t) {
    return make_const(t, 0);
}
Expr make_one(Type t) {
    return make_const(t, 1);
}

bool is_const(const Expr &e) {
    return e.as<IntImm>() || e.as<UIntImm>() || e.as<FloatImm>() || e.as<StringImm>() ||
           (e.as<Broadcast>() && is_const(e.as<Broadcast>()->value));
}

bool const_int_value(const Expr &e, int64_t *v) {
    if (const IntImm *i = e.as<IntImm>()) {
        *v = i->value;
        return true;
    }
    if (const UIntImm *u = e.as<UIntImm>()) {
        if (u->value <= uint64_t(INT64_MAX)) {
            *v = int64_t(u->value);
            return true;
        }
        return false;
    }
    if (const Broadcast *b = e.as<Broadcast>()) {
        return const_int_value(b->value, v);
    }
    return false;
}

bool is_const_one(const Expr &e) {
    int64_t v;
    return const_int_value(e, &v) && v == 1;
}

bool is_const_zero(const Expr &e) {
    int64_t v;
    return const_int_value(e, &v) && v == 0;
}

int64_t constant_allocation_bytes(const Allocate *op) {
    int64_t bytes = op->type.bytes() * op->type.lanes();
    for (const Expr &e : op->extents) {
        int64_t v;
        if (!const_int_value(e, &v) || v < 0) {
            return -1;
        }
        if (v != 0 && bytes > INT64_MAX / v) {
            return -1;
        }
        bytes *= v;
    }
    return bytes;
}

bool allocation_uses_heap(const Allocate *op, int64_t stack_limit_bytes) {
    if (op->new_expr.defined() || (op->condition.defined() && is_const_zero(op->condition))) {
        return false;
    }
    switch (op->memory_type) {
    case MemoryType::Heap:
        return true;
    case MemoryType::Auto: {
        int64_t bytes = constant_allocation_bytes(op);
        return bytes < 0 || bytes > stack_limit_bytes;
    }
    default:
        return false;
    }
}

Expr make_vector_reduce(VectorReduceOp op, const Expr &value, int lanes) {
    const int n = value.type().lanes();
    user_assert(lanes > 0 && lanes <= n && n % lanes == 0)
        << "vector reduction of " << value.type().to_string() << " to " << lanes
        << " lanes: the lanes must divide evenly";
    const int f = n / lanes;
    if (f == 1) {
        return value;
    }
    Expr r = Shuffle::make_slice(value, 0, f, lanes);
    for (int k = 1; k < f; k++) {
        Expr x = Shuffle::make_slice(value, k, f, lanes);
        switch (op) {
        case VectorReduceOp::Add:
            r = Add::make(r, x);
            break;
        case VectorReduceOp::SaturatingAdd:
            r = Call::make(r.type(), Call::saturating_add, {r, x});
            break;
        case VectorReduceOp::Mul:
            r = Mul::make(r, x);
            break;
        case VectorReduceOp::Min:
            r = Min::make(r, x);
            break;
        case VectorReduceOp::Max:
            r = Max::make(r, x);
            break;
        case VectorReduceOp::And:
            r = And::make(r, x);
            break;
        case VectorReduceOp::Or:
            r = Or::make(r, x);
            break;
        }
    }
    return r;
}

std::vector<Stmt> flatten_block(const Stmt &s) {
    std::vector<Stmt> out;
    Stmt cur = s;
    while (const Block *b = cur.as<Block>()) {
        out.push_back(b->first);
        cur = b->rest;
    }
    if (cur.defined()) {
        out.push_back(cur);
    }
    return out;
}

}  // namespace tally
