// Host code generation with LLVM 19.
//
// One LLVM function per LoweredFunc, `i32 name(args...)` with buffers as `halide_buffer_t *` and
// scalars by value, returning 0 or a negative error code. The generator keeps a scoped symbol
// table for variables and one for buffers (the memory a Load/Store name refers to: an enclosing
// Allocate, a handle variable of that name, or a buffer argument's host pointer, in that order).
//
// Exits: every function has one exit block with a phi of the return code. An assert that fails
// evaluates its message (which reports the error) and branches there. Destructors (Halide's
// register_destructor, and heap allocations) are recorded in entry-block slots with a flag, so
// the exit block runs exactly those that were registered and not yet released, on every path.
//
// Parallel loops are outlined into closures `i32 task(void *uc, i32 index, i8 *closure)` run by
// the runtime's halide_do_par_for; the closure is a struct of every value the body uses.
//
// Halide's semantics for integer division and modulo (Euclidean, x/0 == 0) are implemented
// with selects so that no input is undefined behaviour.

#include "codegen/CodeGen_Host.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "codegen/CodeGen_PTX.h"
#include "codegen/CodeGen_Vulkan.h"
#include "codegen/LLVMArith.h"
#include "ir/RuntimeCalls.h"
#include "tally/Error.h"
#include "tally/IRPrinter.h"
#include "tally/IRVisitor.h"
#include "tally_runtime.h"

namespace tally {

namespace {

static_assert(sizeof(halide_buffer_t) == 56, "halide_buffer_t layout");
constexpr int buffer_host_field = 2;  // index of `host` in halide_buffer_t

/** Names used in a statement: variables and the buffers of loads and stores. */
class UsedNames : public IRVisitor {
public:
    std::set<std::string> vars, buffers;
    using IRVisitor::visit;
    void visit(const Variable *op) override { vars.insert(op->name); }
    void visit(const Load *op) override {
        buffers.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        buffers.insert(op->name);
        IRVisitor::visit(op);
    }
};

class CodeGen : public IRVisitor {
public:
    CodeGen(const Module &m, llvm::LLVMContext &ctx, llvm::TargetMachine &tm,
            const std::vector<CompiledKernel> &kernels)
        : m(m), kernels(kernels), ctx(ctx), builder(ctx) {
        mod = std::make_unique<llvm::Module>(m.name.empty() ? "tally" : m.name, ctx);
        mod->setDataLayout(tm.createDataLayout());
        mod->setTargetTriple(tm.getTargetTriple().str());
        i1 = builder.getInt1Ty();
        i8 = builder.getInt8Ty();
        i32 = builder.getInt32Ty();
        i64 = builder.getInt64Ty();
        ptr = builder.getPtrTy();
        buffer_t = llvm::StructType::create(ctx, {i64, ptr, ptr, i64, i32, i32, ptr, ptr},
                                            "struct.halide_buffer_t");
    }

    std::unique_ptr<llvm::Module> run() {
        emit_kernel_table();
        // Declare every function first: closures and pipelines refer to each other.
        for (const LoweredFunc &f : m.functions) {
            declare_function(f);
        }
        for (const LoweredFunc &f : m.functions) {
            define_function(f);
        }
        for (const LoweredFunc *f : pipeline_functions(m)) {
            define_argv_wrapper(*f);
        }
        std::string err;
        llvm::raw_string_ostream os(err);
        internal_assert(!llvm::verifyModule(*mod, &os)) << "invalid LLVM IR generated: " << err;
        return std::move(mod);
    }

private:
    const Module &m;
    const std::vector<CompiledKernel> &kernels;
    llvm::LLVMContext &ctx;
    llvm::IRBuilder<> builder;
    std::unique_ptr<llvm::Module> mod;
    llvm::Type *i1, *i8, *i32, *i64, *ptr;
    llvm::StructType *buffer_t;

    struct BufferRef {
        llvm::Value *base;  // host pointer to element 0
        Type elem;          // element type if known (allocations)
    };
    struct Destructor {
        std::string function;
        llvm::AllocaInst *slot, *flag;
    };
    struct FnState {
        llvm::Function *fn = nullptr;
        llvm::BasicBlock *exit = nullptr;
        llvm::PHINode *ret = nullptr;
        llvm::Value *user_context = nullptr;
        std::vector<Destructor> destructors;
        std::map<std::string, std::vector<llvm::Value *>> vars;
        std::map<std::string, std::vector<BufferRef>> buffers;
        std::map<std::string, llvm::Value *> arg_buffers;  // name -> halide_buffer_t *
        // name -> its host pointer, loaded once after the argument checks: stores through the
        // data may alias the descriptor, so reloading it at every access would stay in loops.
        std::map<std::string, llvm::Value *> arg_hosts;
        std::map<std::string, std::vector<size_t>> heap;  // allocation -> destructor index
    };
    FnState *fs = nullptr;
    llvm::Value *value = nullptr;  // result of the last visited expression

    /** The module's tally_kernel_table (runtime/include/tally_runtime.h), when it has kernels. */
    void emit_kernel_table() {
        if (kernels.empty()) {
            return;
        }
        llvm::StructType *src_t = llvm::StructType::get(ctx, {ptr, ptr, i64, i32, i32, i32, i32});
        std::vector<llvm::Constant *> entries;
        for (const CompiledKernel &k : kernels) {
            std::string code = k.code;
            if (k.device_api == DeviceAPI::CUDA) {
                code.push_back('\0');
            }
            llvm::Constant *bytes = llvm::ConstantDataArray::getRaw(code, code.size(), i8);
            auto *code_g = new llvm::GlobalVariable(*mod, bytes->getType(), true,
                                                    llvm::GlobalValue::PrivateLinkage, bytes,
                                                    "kernel_code." + k.name);
            code_g->setAlignment(llvm::Align(8));
            llvm::Constant *name =
                builder.CreateGlobalStringPtr(k.name, "kernel_name", 0, mod.get());
            int api = k.device_api == DeviceAPI::CUDA     ? TALLY_DEVICE_API_CUDA
                      : k.device_api == DeviceAPI::Vulkan ? TALLY_DEVICE_API_VULKAN
                                                          : TALLY_DEVICE_API_NONE;
            entries.push_back(llvm::ConstantStruct::get(
                src_t,
                {name, code_g, llvm::ConstantInt::get(i64, k.code.size()),
                 llvm::ConstantInt::get(i32, api), llvm::ConstantInt::get(i32, k.num_args),
                 llvm::ConstantInt::get(i32, k.num_buffers), llvm::ConstantInt::get(i32, 0)}));
        }
        llvm::ArrayType *arr_t = llvm::ArrayType::get(src_t, entries.size());
        auto *arr =
            new llvm::GlobalVariable(*mod, arr_t, true, llvm::GlobalValue::PrivateLinkage,
                                     llvm::ConstantArray::get(arr_t, entries), "tally_kernels");
        llvm::StructType *table_t =
            llvm::StructType::get(ctx, {i32, i32, ptr, llvm::ArrayType::get(ptr, 4)});
        static_assert(sizeof(tally_kernel_table) == 48, "tally_kernel_table layout");
        new llvm::GlobalVariable(
            *mod, table_t, false, llvm::GlobalValue::InternalLinkage,
            llvm::ConstantStruct::get(
                table_t, {llvm::ConstantInt::get(i32, TALLY_RUNTIME_ABI_VERSION),
                          llvm::ConstantInt::get(i32, kernels.size()), arr,
                          llvm::ConstantAggregateZero::get(llvm::ArrayType::get(ptr, 4))}),
            "tally_kernel_table");
    }

    // --- types ----------------------------------------------------------------------------

    llvm::Type *scalar_type(const Type &t) {
        if (t.is_handle()) {
            return ptr;
        }
        if (t.is_float()) {
            if (t.code() == Type::BFloat) {
                return builder.getBFloatTy();
            }
            return t.bits() == 16   ? builder.getHalfTy()
                   : t.bits() == 32 ? builder.getFloatTy()
                                    : builder.getDoubleTy();
        }
        return builder.getIntNTy(t.bits());
    }
    llvm::Type *llvm_type(const Type &t) {
        llvm::Type *s = scalar_type(t.element_of());
        return t.is_vector() ? llvm::FixedVectorType::get(s, t.lanes()) : s;
    }
    /** In memory, bools take a byte. */
    llvm::Type *memory_type(const Type &t) {
        return t.is_bool() ? (t.is_vector() ? llvm::FixedVectorType::get(i8, t.lanes()) : i8)
                           : llvm_type(t);
    }

    // --- scopes ---------------------------------------------------------------------------

    void push_var(const std::string &n, llvm::Value *v) { fs->vars[n].push_back(v); }
    void pop_var(const std::string &n) {
        auto it = fs->vars.find(n);
        it->second.pop_back();
        if (it->second.empty()) {
            fs->vars.erase(it);
        }
    }
    llvm::Value *lookup_var(const std::string &n) {
        auto it = fs->vars.find(n);
        if (it != fs->vars.end()) {
            return it->second.back();
        }
        if (n.compare(0, 2, "::") == 0) {
            if (llvm::Function *f = mod->getFunction(n.substr(2))) {
                return f;
            }
        }
        if (n == "__user_context") {
            return fs->user_context;
        }
        user_error << "codegen: variable '" << n << "' is not bound";
        return nullptr;
    }
    void push_buffer(const std::string &n, BufferRef b) { fs->buffers[n].push_back(b); }
    void pop_buffer(const std::string &n) {
        auto it = fs->buffers.find(n);
        it->second.pop_back();
        if (it->second.empty()) {
            fs->buffers.erase(it);
        }
    }
    /** The host memory a Load/Store name refers to. */
    llvm::Value *buffer_base(const std::string &n) {
        auto b = fs->buffers.find(n);
        if (b != fs->buffers.end()) {
            return b->second.back().base;
        }
        auto v = fs->vars.find(n);
        if (v != fs->vars.end() && v->second.back()->getType()->isPointerTy()) {
            return v->second.back();
        }
        auto a = fs->arg_hosts.find(n);
        if (a != fs->arg_hosts.end()) {
            return a->second;
        }
        user_error << "codegen: '" << n << "' names no buffer in scope";
        return nullptr;
    }

    llvm::AllocaInst *entry_alloca(llvm::Type *t, const std::string &name,
                                   llvm::Value *count = nullptr) {
        llvm::IRBuilder<> b(&fs->fn->getEntryBlock(), fs->fn->getEntryBlock().begin());
        return b.CreateAlloca(t, count, name);
    }

    // --- expressions ----------------------------------------------------------------------

    llvm::Value *codegen(const Expr &e) {
        internal_assert(e.defined()) << "codegen of undefined expression";
        value = nullptr;
        e.accept(this);
        internal_assert(value) << "no value for " << e;
        return value;
    }

    void visit(const IntImm *op) override {
        value = llvm::ConstantInt::getSigned(llvm_type(op->type), op->value);
    }
    void visit(const UIntImm *op) override {
        value = llvm::ConstantInt::get(llvm_type(op->type), op->value);
    }
    void visit(const FloatImm *op) override {
        value = llvm::ConstantFP::get(llvm_type(op->type), op->value);
    }
    void visit(const StringImm *op) override {
        value = builder.CreateGlobalStringPtr(op->value, "str", 0, mod.get());
    }

    llvm::Value *cast_value(llvm::Value *v, const Type &from, const Type &to) {
        return emit_cast(builder, v, from, to, llvm_type(to));
    }

    void visit(const Cast *op) override {
        value = cast_value(codegen(op->value), op->value.type(), op->type);
    }
    void visit(const Reinterpret *op) override {
        llvm::Value *v = codegen(op->value);
        const Type &from = op->value.type(), &to = op->type;
        if (to.is_handle() && !from.is_handle()) {
            value = builder.CreateIntToPtr(v, ptr);
        } else if (from.is_handle() && !to.is_handle()) {
            value = builder.CreatePtrToInt(v, llvm_type(to));
        } else {
            value = builder.CreateBitCast(v, llvm_type(to));
        }
    }
    void visit(const Variable *op) override {
        value = lookup_var(op->name);
        if (!value) {
            return;
        }
        if (op->type.is_handle() || value->getType()->isPointerTy()) {
            return;
        }
        internal_assert(value->getType() == llvm_type(op->type))
            << "variable " << op->name << " used with another type";
    }

    void visit(const Add *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = op->type.is_float() ? builder.CreateFAdd(a, b) : builder.CreateAdd(a, b);
    }
    void visit(const Sub *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = op->type.is_float() ? builder.CreateFSub(a, b) : builder.CreateSub(a, b);
    }
    void visit(const Mul *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = op->type.is_float() ? builder.CreateFMul(a, b) : builder.CreateMul(a, b);
    }

    void visit(const Div *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        if (op->type.is_float()) {
            value = builder.CreateFDiv(a, b);
            return;
        }
        llvm::Value *q, *r;
        emit_div_mod(builder, op->type, a, b, &q, &r);
        value = q;
    }
    void visit(const Mod *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        if (op->type.is_float()) {
            value = emit_float_mod(builder, a, b);
            return;
        }
        llvm::Value *q, *r;
        emit_div_mod(builder, op->type, a, b, &q, &r);
        value = r;
    }

    llvm::Value *compare(IRNodeType k, const Type &t, llvm::Value *a, llvm::Value *b) {
        return emit_compare(builder, k, t, a, b);
    }

    void visit(const Min *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = builder.CreateSelect(compare(IRNodeType::LT, op->type, a, b), a, b);
    }
    void visit(const Max *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = builder.CreateSelect(compare(IRNodeType::GT, op->type, a, b), a, b);
    }
#define TALLY_CMP(N)                                                                               \
    void visit(const N *op) override {                                                             \
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);                                      \
        value = compare(IRNodeType::N, op->a.type(), a, b);                                        \
    }
    TALLY_CMP(EQ)
    TALLY_CMP(NE)
    TALLY_CMP(LT)
    TALLY_CMP(LE)
    TALLY_CMP(GT)
    TALLY_CMP(GE)
#undef TALLY_CMP
    void visit(const And *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = builder.CreateAnd(a, b);
    }
    void visit(const Or *op) override {
        llvm::Value *a = codegen(op->a), *b = codegen(op->b);
        value = builder.CreateOr(a, b);
    }
    void visit(const Not *op) override {
        value = builder.CreateNot(codegen(op->a));
    }
    void visit(const Select *op) override {
        llvm::Value *c = codegen(op->condition);
        llvm::Value *t = codegen(op->true_value), *f = codegen(op->false_value);
        value = builder.CreateSelect(c, t, f);
    }

    /** Address of element `index` (scalar) of buffer `name`. */
    llvm::Value *element_address(const std::string &name, const Type &elem, llvm::Value *index) {
        llvm::Value *base = buffer_base(name);
        return builder.CreateInBoundsGEP(memory_type(elem), base,
                                         builder.CreateSExtOrTrunc(index, i64));
    }

    llvm::Value *load_scalar(const std::string &name, const Type &t, llvm::Value *index) {
        llvm::Value *addr = element_address(name, t, index);
        llvm::Value *v = builder.CreateLoad(memory_type(t), addr);
        return t.is_bool() ? builder.CreateTrunc(v, i1) : v;
    }

    /** A dense vector access `ramp(base, 1, lanes)`: its base, else nullptr. */
    const Expr *dense_base(const Expr &index) {
        const Ramp *r = index.as<Ramp>();
        if (r && is_const_one(r->stride) && r->base.type().is_scalar()) {
            return &r->base;
        }
        return nullptr;
    }

    void visit(const Load *op) override {
        const Type &t = op->type;
        if (t.is_scalar() && !op->predicate.defined()) {
            value = load_scalar(op->name, t, codegen(op->index));
            return;
        }
        const Expr *dense = op->predicate.defined() ? nullptr : dense_base(op->index);
        if (dense) {
            llvm::Value *addr = element_address(op->name, t.element_of(), codegen(*dense));
            llvm::Value *v = builder.CreateAlignedLoad(memory_type(t), addr,
                                                       llvm::Align(t.element_of().bytes()));
            value = t.is_bool() ? builder.CreateTrunc(v, llvm_type(t)) : v;
            return;
        }
        // Gather lane by lane (only lanes whose predicate holds are read).
        llvm::Value *idx = codegen(op->index);
        llvm::Value *pred = op->predicate.defined() ? codegen(op->predicate) : nullptr;
        llvm::Value *result = llvm::UndefValue::get(llvm_type(t));
        for (int i = 0; i < t.lanes(); i++) {
            llvm::Value *li = builder.CreateExtractElement(idx, builder.getInt32(i));
            llvm::Value *lane;
            if (pred) {
                llvm::Value *p = builder.CreateExtractElement(pred, builder.getInt32(i));
                llvm::BasicBlock *cur = builder.GetInsertBlock();
                llvm::BasicBlock *yes = llvm::BasicBlock::Create(ctx, "lane", fs->fn);
                llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx, "lane_done", fs->fn);
                builder.CreateCondBr(p, yes, done);
                builder.SetInsertPoint(yes);
                llvm::Value *lv = load_scalar(op->name, t.element_of(), li);
                llvm::BasicBlock *yes_end = builder.GetInsertBlock();
                builder.CreateBr(done);
                builder.SetInsertPoint(done);
                llvm::PHINode *phi = builder.CreatePHI(scalar_type(t.element_of()), 2);
                phi->addIncoming(llvm::Constant::getNullValue(phi->getType()), cur);
                phi->addIncoming(lv, yes_end);
                lane = phi;
            } else {
                lane = load_scalar(op->name, t.element_of(), li);
            }
            result = builder.CreateInsertElement(result, lane, builder.getInt32(i));
        }
        value = result;
    }

    void visit(const Ramp *op) override {
        llvm::Value *base = codegen(op->base), *stride = codegen(op->stride);
        const Type &et = op->base.type();
        internal_assert(et.is_scalar()) << "ramp of vectors is not supported";
        llvm::Value *b = builder.CreateVectorSplat(op->lanes, base);
        llvm::Value *s = builder.CreateVectorSplat(op->lanes, stride);
        std::vector<llvm::Constant *> steps;
        for (int i = 0; i < op->lanes; i++) {
            steps.push_back(et.is_float() ? llvm::ConstantFP::get(scalar_type(et), double(i))
                                          : llvm::ConstantInt::get(scalar_type(et), i));
        }
        llvm::Value *k = llvm::ConstantVector::get(steps);
        value = et.is_float() ? builder.CreateFAdd(b, builder.CreateFMul(s, k))
                              : builder.CreateAdd(b, builder.CreateMul(s, k));
    }
    void visit(const Broadcast *op) override {
        llvm::Value *v = codegen(op->value);
        internal_assert(op->value.type().is_scalar()) << "broadcast of a vector";
        value = builder.CreateVectorSplat(op->lanes, v);
    }
    void visit(const Let *op) override {
        llvm::Value *v = codegen(op->value);
        push_var(op->name, v);
        value = codegen(op->body);
        pop_var(op->name);
    }
    void visit(const Shuffle *op) override {
        std::vector<llvm::Value *> vs;
        for (const Expr &v : op->vectors) {
            llvm::Value *x = codegen(v);
            if (!x->getType()->isVectorTy()) {
                x = builder.CreateVectorSplat(1, x);
            }
            vs.push_back(x);
        }
        // Concatenate everything into one vector, then pick the lanes.
        llvm::Value *all = vs[0];
        for (size_t i = 1; i < vs.size(); i++) {
            int na = llvm::cast<llvm::FixedVectorType>(all->getType())->getNumElements();
            int nb = llvm::cast<llvm::FixedVectorType>(vs[i]->getType())->getNumElements();
            int n = std::max(na, nb);
            auto widen = [&](llvm::Value *x, int from) {
                if (from == n) {
                    return x;
                }
                std::vector<int> mask;
                for (int j = 0; j < n; j++) {
                    mask.push_back(j < from ? j : -1);
                }
                return builder.CreateShuffleVector(x, mask);
            };
            llvm::Value *a = widen(all, na), *b = widen(vs[i], nb);
            std::vector<int> mask;
            for (int j = 0; j < na; j++) {
                mask.push_back(j);
            }
            for (int j = 0; j < nb; j++) {
                mask.push_back(n + j);
            }
            all = builder.CreateShuffleVector(a, b, mask);
        }
        if (op->type.is_scalar()) {
            value = builder.CreateExtractElement(all, builder.getInt32(op->indices[0]));
        } else {
            value = builder.CreateShuffleVector(all, op->indices);
        }
    }

    // --- calls ----------------------------------------------------------------------------

    llvm::FunctionCallee declare_extern(const std::string &name, llvm::Type *ret,
                                        const std::vector<llvm::Type *> &params) {
        llvm::FunctionType *ft = llvm::FunctionType::get(ret, params, false);
        if (llvm::Function *f = mod->getFunction(name)) {
            return llvm::FunctionCallee(f->getFunctionType(), f);
        }
        llvm::Function *f =
            llvm::Function::Create(ft, llvm::Function::ExternalLinkage, name, mod.get());
        for (unsigned i = 0; i < params.size(); i++) {
            if (params[i] == i1) {
                f->addParamAttr(i, llvm::Attribute::ZExt);
            }
        }
        if (ret == i1) {
            f->addRetAttr(llvm::Attribute::ZExt);
        }
        return llvm::FunctionCallee(ft, f);
    }

    llvm::Type *signature_type(char c) {
        switch (c) {
        case 'v':
            return builder.getVoidTy();
        case 'b':
            return i1;
        case 'i':
        case 'u':
            return i32;
        case 'l':
        case 'q':
            return i64;
        case 'f':
            return builder.getFloatTy();
        case 'd':
            return builder.getDoubleTy();
        default:
            return ptr;
        }
    }

    /** Calls an extern function: runtime symbols by their signature (adding user_context),
     * Halide's error helpers with user_context, anything else as the IR types say. */
    llvm::Value *call_extern(const Call *op) {
        std::vector<llvm::Value *> args;
        std::vector<llvm::Type *> params;
        const RuntimeSymbol *sym = find_runtime_symbol(op->name.c_str());
        bool takes_uc = sym ? std::strchr(sym->signature, 'U') != nullptr
                            : op->name.compare(0, 13, "halide_error_") == 0;
        if (takes_uc) {
            args.push_back(fs->user_context);
            params.push_back(ptr);
        }
        for (size_t i = 0; i < op->args.size(); i++) {
            llvm::Value *a = codegen(op->args[i]);
            if (sym) {
                const char *p = std::strchr(sym->signature, ':') + 1 + (takes_uc ? 1 : 0);
                if (i < std::strlen(p)) {
                    llvm::Type *want = signature_type(p[i]);
                    if (want != a->getType()) {
                        if (want->isPointerTy() || a->getType()->isPointerTy()) {
                            a = want->isPointerTy() ? builder.CreateIntToPtr(a, want)
                                                    : builder.CreatePtrToInt(a, want);
                        } else if (want->isIntegerTy() && a->getType()->isIntegerTy()) {
                            a = builder.CreateIntCast(a, want, op->args[i].type().is_int());
                        }
                    }
                }
            }
            args.push_back(a);
            params.push_back(a->getType());
        }
        llvm::Type *ret = llvm_type(op->type);
        if (sym) {
            ret = signature_type(sym->signature[0]);
        }
        llvm::FunctionCallee callee = declare_extern(op->name, ret, params);
        llvm::Value *r = builder.CreateCall(callee, args);
        llvm::Type *want = llvm_type(op->type);
        if (ret->isVoidTy()) {
            return llvm::Constant::getNullValue(want);
        }
        if (r->getType() != want) {
            if (want->isPointerTy() || r->getType()->isPointerTy()) {
                r = want->isPointerTy() ? builder.CreateIntToPtr(r, want)
                                        : builder.CreatePtrToInt(r, want);
            } else if (want->isIntegerTy() && r->getType()->isIntegerTy()) {
                r = builder.CreateIntCast(r, want, false);
            }
        }
        return r;
    }

    /** Halide's math functions (sqrt_f32, floor_f64, ...) and their libm names. */
    bool call_math(const Call *op) {
        static const std::map<std::string, llvm::Intrinsic::ID> unary = {
            {"sqrt", llvm::Intrinsic::sqrt},   {"sin", llvm::Intrinsic::sin},
            {"cos", llvm::Intrinsic::cos},     {"exp", llvm::Intrinsic::exp},
            {"log", llvm::Intrinsic::log},     {"floor", llvm::Intrinsic::floor},
            {"ceil", llvm::Intrinsic::ceil},   {"round", llvm::Intrinsic::roundeven},
            {"trunc", llvm::Intrinsic::trunc}, {"fabs", llvm::Intrinsic::fabs},
        };
        std::string n = op->name;
        for (const char *suffix : {"_f16", "_f32", "_f64"}) {
            if (n.size() > 4 && n.compare(n.size() - 4, 4, suffix) == 0) {
                n = n.substr(0, n.size() - 4);
            }
        }
        if (n.size() > 1 && (n.back() == 'f') && unary.count(n.substr(0, n.size() - 1)) &&
            op->type.bits() == 32) {
            n.pop_back();
        }
        if (!op->type.is_float()) {
            return false;
        }
        auto it = unary.find(n);
        if (it != unary.end() && op->args.size() == 1) {
            value = builder.CreateUnaryIntrinsic(it->second, codegen(op->args[0]));
            return true;
        }
        if (n == "pow" && op->args.size() == 2) {
            llvm::Value *a = codegen(op->args[0]), *b = codegen(op->args[1]);
            value = builder.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a, b);
            return true;
        }
        return false;
    }

    void visit(const Call *op) override {
        const std::string &n = op->name;
        if (op->is_extern()) {
            if (call_math(op)) {
                return;
            }
            value = call_extern(op);
            return;
        }
        // Intrinsics.
        if (n == "make_struct") {
            if (op->args.empty()) {
                value = llvm::ConstantPointerNull::get(builder.getPtrTy());
                return;
            }
            std::vector<llvm::Value *> vals;
            std::vector<llvm::Type *> types;
            for (const Expr &a : op->args) {
                vals.push_back(codegen(a));
                types.push_back(vals.back()->getType());
            }
            llvm::StructType *st = llvm::StructType::get(ctx, types);
            llvm::AllocaInst *s = entry_alloca(st, "struct");
            for (size_t i = 0; i < vals.size(); i++) {
                builder.CreateStore(vals[i], builder.CreateStructGEP(st, s, i));
            }
            value = s;
        } else if (n == "load_typed_struct_member") {
            llvm::Value *p = codegen(op->args[0]);
            llvm::Value *proto = codegen(op->args[1]);
            int64_t idx;
            user_assert(const_int_value(op->args[2], &idx))
                << "load_typed_struct_member needs a constant index";
            auto *a = llvm::dyn_cast<llvm::AllocaInst>(proto);
            user_assert(a && a->getAllocatedType()->isStructTy())
                << "load_typed_struct_member: the prototype must be a make_struct";
            auto *st = llvm::cast<llvm::StructType>(a->getAllocatedType());
            llvm::Value *v =
                builder.CreateLoad(st->getElementType(idx), builder.CreateStructGEP(st, p, idx));
            value = v;
        } else if (n == "alloca") {
            int64_t bytes;
            const Call *size_call = op->args[0].as<Call>();
            if (size_call && size_call->name == "size_of_halide_buffer_t") {
                bytes = sizeof(halide_buffer_t);  // Halide's `alloca(size_of_halide_buffer_t())`
            } else {
                user_assert(const_int_value(op->args[0], &bytes) && bytes >= 0 && bytes < (1 << 20))
                    << "alloca needs a constant size";
            }
            value = entry_alloca(llvm::ArrayType::get(i8, bytes), "alloca");
        } else if (n == "size_of_halide_buffer_t") {
            value = llvm::ConstantInt::get(llvm_type(op->type), sizeof(halide_buffer_t));
        } else if (n == "register_destructor") {
            const StringImm *fname = op->args[0].as<StringImm>();
            user_assert(fname) << "register_destructor needs the destructor's name";
            llvm::Value *obj = codegen(op->args[1]);
            register_destructor(fname->value, obj);
            value = llvm::ConstantPointerNull::get(builder.getPtrTy());
        } else if (n == "return_second") {
            codegen(op->args[0]);
            value = codegen(op->args[1]);
        } else if (n == "likely" || n == "likely_if_innermost" || n == "promise_clamped" ||
                   n == "unsafe_promise_clamped" || n == "strict_float") {
            value = codegen(op->args[0]);
        } else if (n == "abs") {
            llvm::Value *a = codegen(op->args[0]);
            const Type &t = op->args[0].type();
            if (t.is_float()) {
                value = builder.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a);
            } else if (t.is_int()) {
                llvm::Value *neg =
                    builder.CreateICmpSLT(a, llvm::Constant::getNullValue(a->getType()));
                value = builder.CreateSelect(neg, builder.CreateNeg(a), a);
            } else {
                value = a;
            }
        } else if (n == "bitwise_and" || n == "bitwise_or" || n == "bitwise_xor") {
            llvm::Value *a = codegen(op->args[0]), *b = codegen(op->args[1]);
            value = n == "bitwise_and"  ? builder.CreateAnd(a, b)
                    : n == "bitwise_or" ? builder.CreateOr(a, b)
                                        : builder.CreateXor(a, b);
        } else if (n == "bitwise_not") {
            value = builder.CreateNot(codegen(op->args[0]));
        } else if (n == "shift_left" || n == "shift_right") {
            llvm::Value *a = codegen(op->args[0]), *b = codegen(op->args[1]);
            b = builder.CreateIntCast(b, a->getType(), false);
            value = n == "shift_left"             ? builder.CreateShl(a, b)
                    : op->args[0].type().is_int() ? builder.CreateAShr(a, b)
                                                  : builder.CreateLShr(a, b);
        } else if (n == "if_then_else") {
            llvm::Value *c = codegen(op->args[0]);
            llvm::Value *t = codegen(op->args[1]), *f = codegen(op->args[2]);
            value = builder.CreateSelect(c, t, f);
        } else if (n == "div_round_to_zero" || n == "mod_round_to_zero") {
            llvm::Value *a = codegen(op->args[0]), *b = codegen(op->args[1]);
            bool s = op->type.is_int();
            value = n == "div_round_to_zero"
                        ? (s ? builder.CreateSDiv(a, b) : builder.CreateUDiv(a, b))
                        : (s ? builder.CreateSRem(a, b) : builder.CreateURem(a, b));
        } else if (n == "tally_kernel_table") {
            llvm::GlobalVariable *g = mod->getGlobalVariable("tally_kernel_table", true);
            value = g ? static_cast<llvm::Value *>(g)
                      : llvm::ConstantPointerNull::get(builder.getPtrTy());
        } else if (n == "stringify") {
            value = stringify(op);
        } else {
            user_error << "codegen: unsupported intrinsic '" << n << "'";
        }
        if (value->getType() != llvm_type(op->type) && !op->type.is_handle() &&
            value->getType()->isIntegerTy() && llvm_type(op->type)->isIntegerTy()) {
            value = builder.CreateIntCast(value, llvm_type(op->type), op->type.is_int());
        }
    }

    /** Halide's stringify: formats its arguments into a stack buffer with snprintf. */
    llvm::Value *stringify(const Call *op) {
        std::string fmt;
        std::vector<llvm::Value *> args;
        for (const Expr &a : op->args) {
            llvm::Value *v = codegen(a);
            const Type &t = a.type();
            if (a.as<StringImm>() || (t.is_handle() && t.handle_name() == "char")) {
                fmt += "%s";
            } else if (t.is_handle()) {
                fmt += "%p";
            } else if (t.is_float()) {
                fmt += "%f";
                v = builder.CreateFPExt(v, builder.getDoubleTy());
            } else if (t.is_vector()) {
                fmt += "<vector>";
                continue;
            } else {
                fmt += t.is_int() ? "%lld" : "%llu";
                v = builder.CreateIntCast(v, i64, t.is_int());
            }
            args.push_back(v);
        }
        const int size = 1024;
        llvm::Value *buf = entry_alloca(llvm::ArrayType::get(i8, size), "stringify");
        std::vector<llvm::Value *> call_args = {buf, builder.getInt64(size),
                                                builder.CreateGlobalStringPtr(fmt)};
        call_args.insert(call_args.end(), args.begin(), args.end());
        llvm::FunctionType *ft = llvm::FunctionType::get(i32, {ptr, i64, ptr}, true);
        builder.CreateCall(mod->getOrInsertFunction("snprintf", ft), call_args);
        return buf;
    }

    void register_destructor(const std::string &function, llvm::Value *obj) {
        Destructor d;
        d.function = function;
        d.slot = entry_alloca(ptr, function + ".obj");
        d.flag = entry_alloca(i1, function + ".live");
        {
            // Not live until this point is reached: cleared right after its alloca, which is
            // at the top of the entry block and so dominates every exit.
            llvm::IRBuilder<> b(ctx);
            if (llvm::Instruction *next = d.flag->getNextNode()) {
                b.SetInsertPoint(next);
            } else {
                b.SetInsertPoint(d.flag->getParent());
            }
            b.CreateStore(builder.getFalse(), d.flag);
        }
        if (!obj->getType()->isPointerTy()) {
            obj = builder.CreateIntToPtr(obj, ptr);
        }
        builder.CreateStore(obj, d.slot);
        builder.CreateStore(builder.getTrue(), d.flag);
        fs->destructors.push_back(d);
    }

    // --- statements -----------------------------------------------------------------------

    void codegen(const Stmt &s) {
        if (s.defined()) {
            s.accept(this);
        }
    }

    /** Branches to the exit with `code` when `ok` is false. */
    void fail_unless(llvm::Value *ok, const std::function<llvm::Value *()> &code) {
        llvm::BasicBlock *fail = llvm::BasicBlock::Create(ctx, "assert_failed", fs->fn);
        llvm::BasicBlock *pass = llvm::BasicBlock::Create(ctx, "assert_ok", fs->fn);
        builder.CreateCondBr(ok, pass, fail, llvm::MDBuilder(ctx).createBranchWeights(1 << 20, 1));
        builder.SetInsertPoint(fail);
        llvm::Value *c = code();
        c = builder.CreateIntCast(c, i32, true);
        // An assert whose message evaluates to 0 still fails.
        llvm::Value *is_zero = builder.CreateICmpEQ(c, builder.getInt32(0));
        c = builder.CreateSelect(is_zero, builder.getInt32(-1), c);
        fs->ret->addIncoming(c, builder.GetInsertBlock());
        builder.CreateBr(fs->exit);
        builder.SetInsertPoint(pass);
    }

    void visit(const AssertStmt *op) override {
        llvm::Value *ok = codegen(op->condition);
        const Expr msg = op->message;
        fail_unless(ok, [&]() { return codegen(msg); });
    }
    void visit(const LetStmt *op) override {
        llvm::Value *v = codegen(op->value);
        if (!v->hasName() && !llvm::isa<llvm::Constant>(v)) {
            v->setName(op->name);
        }
        push_var(op->name, v);
        codegen(op->body);
        pop_var(op->name);
    }
    void visit(const ProducerConsumer *op) override {
        codegen(op->body);
    }
    void visit(const Block *op) override {
        Stmt s = op;
        while (const Block *b = s.as<Block>()) {
            codegen(b->first);
            s = b->rest;
        }
        codegen(s);
    }
    void visit(const Evaluate *op) override {
        codegen(op->value);
    }
    void visit(const IfThenElse *op) override {
        llvm::Value *c = codegen(op->condition);
        llvm::BasicBlock *then_bb = llvm::BasicBlock::Create(ctx, "then", fs->fn);
        llvm::BasicBlock *else_bb = llvm::BasicBlock::Create(ctx, "else", fs->fn);
        llvm::BasicBlock *after = llvm::BasicBlock::Create(ctx, "after_if", fs->fn);
        builder.CreateCondBr(c, then_bb, else_bb);
        builder.SetInsertPoint(then_bb);
        codegen(op->then_case);
        builder.CreateBr(after);
        builder.SetInsertPoint(else_bb);
        codegen(op->else_case);
        builder.CreateBr(after);
        builder.SetInsertPoint(after);
    }

    void visit(const Store *op) override {
        const Type &t = op->value.type();
        llvm::Value *v = codegen(op->value);
        if (t.is_bool()) {
            v = builder.CreateZExt(v, memory_type(t));
        }
        if (t.is_scalar() && !op->predicate.defined()) {
            builder.CreateStore(v, element_address(op->name, t, codegen(op->index)));
            return;
        }
        const Expr *dense = op->predicate.defined() ? nullptr : dense_base(op->index);
        if (dense) {
            llvm::Value *addr = element_address(op->name, t.element_of(), codegen(*dense));
            builder.CreateAlignedStore(v, addr, llvm::Align(t.element_of().bytes()));
            return;
        }
        llvm::Value *idx = codegen(op->index);
        llvm::Value *pred = op->predicate.defined() ? codegen(op->predicate) : nullptr;
        for (int i = 0; i < t.lanes(); i++) {
            llvm::Value *lane = builder.CreateExtractElement(v, builder.getInt32(i));
            llvm::Value *li = builder.CreateExtractElement(idx, builder.getInt32(i));
            if (pred) {
                llvm::Value *p = builder.CreateExtractElement(pred, builder.getInt32(i));
                llvm::BasicBlock *yes = llvm::BasicBlock::Create(ctx, "lane", fs->fn);
                llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx, "lane_done", fs->fn);
                builder.CreateCondBr(p, yes, done);
                builder.SetInsertPoint(yes);
                builder.CreateStore(lane, element_address(op->name, t.element_of(), li));
                builder.CreateBr(done);
                builder.SetInsertPoint(done);
            } else {
                builder.CreateStore(lane, element_address(op->name, t.element_of(), li));
            }
        }
    }

    void visit(const Allocate *op) override {
        llvm::Type *et = memory_type(op->type);
        llvm::Value *base;
        bool heap = allocation_uses_heap(op);
        if (op->new_expr.defined()) {
            base = codegen(op->new_expr);
            heap = false;
        } else if (op->condition.defined() && is_const_zero(op->condition)) {
            base = llvm::ConstantPointerNull::get(builder.getPtrTy());
            heap = false;
        } else if (!heap) {
            int64_t bytes = constant_allocation_bytes(op);
            int64_t n = bytes < 0 ? 0 : bytes / std::max(1, op->type.bytes() * op->type.lanes());
            base = entry_alloca(llvm::ArrayType::get(et, std::max<int64_t>(n, 1)), op->name);
        } else {
            llvm::Value *count = builder.getInt64(op->type.lanes());
            for (const Expr &e : op->extents) {
                count = builder.CreateMul(count, builder.CreateSExtOrTrunc(codegen(e), i64));
            }
            llvm::Value *bytes = builder.CreateMul(count, builder.getInt64(op->type.bytes()));
            llvm::Value *cond = op->condition.defined() ? codegen(op->condition) : nullptr;
            llvm::FunctionCallee malloc_fn = declare_extern("halide_malloc", ptr, {ptr, i64});
            llvm::Value *p = builder.CreateCall(malloc_fn, {fs->user_context, bytes}, op->name);
            if (cond) {
                // A false condition means no allocation.
                p = builder.CreateSelect(cond, p,
                                         llvm::ConstantPointerNull::get(builder.getPtrTy()));
            }
            llvm::Value *ok =
                builder.CreateICmpNE(p, llvm::ConstantPointerNull::get(builder.getPtrTy()));
            if (cond) {
                ok = builder.CreateOr(ok, builder.CreateNot(cond));
            }
            fail_unless(ok, [&]() {
                return builder.CreateCall(declare_extern("halide_error_out_of_memory", i32, {ptr}),
                                          {fs->user_context});
            });
            register_destructor("halide_free", p);
            fs->heap[op->name].push_back(fs->destructors.size() - 1);
            base = p;
        }
        push_buffer(op->name, {base, op->type});
        push_var(op->name, base);
        codegen(op->body);
        pop_var(op->name);
        pop_buffer(op->name);
        if (heap) {
            auto it = fs->heap.find(op->name);
            size_t d = it->second.back();
            it->second.pop_back();
            if (it->second.empty()) {
                fs->heap.erase(it);
            }
            release_heap(d);
        }
    }

    /** Frees a heap allocation now if it is still live, and disarms its destructor. */
    void release_heap(size_t d) {
        const Destructor &dt = fs->destructors[d];
        llvm::Value *live = builder.CreateLoad(i1, dt.flag);
        llvm::BasicBlock *yes = llvm::BasicBlock::Create(ctx, "free", fs->fn);
        llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx, "freed", fs->fn);
        builder.CreateCondBr(live, yes, done);
        builder.SetInsertPoint(yes);
        llvm::FunctionCallee free_fn =
            declare_extern("halide_free", builder.getVoidTy(), {ptr, ptr});
        builder.CreateCall(free_fn, {fs->user_context, builder.CreateLoad(ptr, dt.slot)});
        builder.CreateStore(builder.getFalse(), dt.flag);
        builder.CreateBr(done);
        builder.SetInsertPoint(done);
    }

    void visit(const Free *op) override {
        auto it = fs->heap.find(op->name);
        if (it != fs->heap.end()) {
            release_heap(it->second.back());
        }
    }

    void visit(const For *op) override {
        user_assert(!is_gpu_for_type(op->for_type))
            << "codegen: GPU loop '" << op->name
            << "' reached host code generation; run offload-gpu-loops first";
        llvm::Value *min = codegen(op->min), *extent = codegen(op->extent);
        if (op->for_type == ForType::Parallel) {
            parallel_loop(op, min, extent);
            return;
        }
        llvm::Value *end = builder.CreateAdd(min, extent);
        llvm::BasicBlock *pre = builder.GetInsertBlock();
        llvm::BasicBlock *loop = llvm::BasicBlock::Create(ctx, op->name + "_loop", fs->fn);
        llvm::BasicBlock *after = llvm::BasicBlock::Create(ctx, op->name + "_end", fs->fn);
        builder.CreateCondBr(builder.CreateICmpSLT(min, end), loop, after);
        builder.SetInsertPoint(loop);
        llvm::PHINode *i = builder.CreatePHI(min->getType(), 2, op->name);
        i->addIncoming(min, pre);
        push_var(op->name, i);
        codegen(op->body);
        pop_var(op->name);
        llvm::Value *next = builder.CreateAdd(i, llvm::ConstantInt::get(min->getType(), 1));
        i->addIncoming(next, builder.GetInsertBlock());
        builder.CreateCondBr(builder.CreateICmpSLT(next, end), loop, after);
        builder.SetInsertPoint(after);
    }

    /** Outlines the body into a task and runs it with halide_do_par_for. */
    void parallel_loop(const For *op, llvm::Value *min, llvm::Value *extent) {
        UsedNames used;
        op->body.accept(&used);
        // Capture every variable and buffer the body names that is visible here.
        std::vector<std::string> var_names, buf_names;
        std::vector<llvm::Value *> vals;
        std::vector<llvm::Type *> types;
        std::vector<Type> buf_types;
        for (const std::string &n : used.vars) {
            if (n == op->name || n.compare(0, 2, "::") == 0 || !fs->vars.count(n)) {
                continue;
            }
            var_names.push_back(n);
            vals.push_back(fs->vars[n].back());
        }
        for (const std::string &n : used.buffers) {
            if (!fs->buffers.count(n) && fs->vars.count(n)) {
                // The memory is named by a handle variable: capture the variable.
                if (std::find(var_names.begin(), var_names.end(), n) == var_names.end()) {
                    var_names.push_back(n);
                    vals.insert(vals.begin() + (var_names.size() - 1), fs->vars[n].back());
                }
                continue;
            }
            if (!fs->buffers.count(n) && !fs->arg_hosts.count(n)) {
                continue;  // not visible here: the body must bind it itself
            }
            buf_names.push_back(n);
            vals.push_back(buffer_base(n));
            buf_types.push_back(fs->buffers.count(n) ? fs->buffers[n].back().elem : Type());
        }
        for (llvm::Value *v : vals) {
            types.push_back(v->getType());
        }
        llvm::StructType *st = llvm::StructType::get(ctx, types);
        llvm::Value *closure = entry_alloca(st, op->name + ".closure");
        for (size_t i = 0; i < vals.size(); i++) {
            builder.CreateStore(vals[i], builder.CreateStructGEP(st, closure, i));
        }

        llvm::FunctionType *task_t = llvm::FunctionType::get(i32, {ptr, i32, ptr}, false);
        llvm::Function *task =
            llvm::Function::Create(task_t, llvm::Function::InternalLinkage,
                                   fs->fn->getName() + "_par_for_" + op->name, mod.get());
        llvm::IRBuilderBase::InsertPoint saved_ip = builder.saveIP();
        FnState *outer = fs;
        FnState inner;
        begin_function(task, &inner, task->getArg(0));
        llvm::Value *cl = task->getArg(2);
        for (size_t i = 0; i < var_names.size(); i++) {
            llvm::Value *v =
                builder.CreateLoad(types[i], builder.CreateStructGEP(st, cl, i), var_names[i]);
            push_var(var_names[i], v);
        }
        for (size_t j = 0; j < buf_names.size(); j++) {
            size_t i = var_names.size() + j;
            llvm::Value *v =
                builder.CreateLoad(types[i], builder.CreateStructGEP(st, cl, i), buf_names[j]);
            push_buffer(buf_names[j], {v, buf_types[j]});
        }
        llvm::Value *idx = task->getArg(1);
        if (idx->getType() != min->getType()) {
            idx = builder.CreateIntCast(idx, min->getType(), true);
        }
        push_var(op->name, idx);
        codegen(op->body);
        end_function();
        fs = outer;
        builder.restoreIP(saved_ip);

        llvm::FunctionCallee par_for =
            declare_extern("halide_do_par_for", i32, {ptr, ptr, i32, i32, ptr});
        llvm::Value *r = builder.CreateCall(
            par_for, {fs->user_context, task, builder.CreateIntCast(min, i32, true),
                      builder.CreateIntCast(extent, i32, true), closure});
        fail_unless(builder.CreateICmpEQ(r, builder.getInt32(0)), [&]() { return r; });
    }

    // --- functions ------------------------------------------------------------------------

    void declare_function(const LoweredFunc &f) {
        std::vector<llvm::Type *> params;
        for (const Argument &a : f.args) {
            params.push_back(a.is_buffer() ? ptr : llvm_type(a.type.is_valid() ? a.type : Int(32)));
        }
        llvm::FunctionType *ft = llvm::FunctionType::get(i32, params, false);
        llvm::Function *fn = llvm::Function::Create(ft,
                                                    f.linkage == LinkageType::Internal
                                                        ? llvm::Function::InternalLinkage
                                                        : llvm::Function::ExternalLinkage,
                                                    f.name, mod.get());
        for (size_t i = 0; i < f.args.size(); i++) {
            fn->getArg(i)->setName(f.args[i].is_buffer() ? f.args[i].name + ".buffer"
                                                         : f.args[i].name);
        }
    }

    void begin_function(llvm::Function *fn, FnState *state, llvm::Value *user_context) {
        fs = state;
        fs->fn = fn;
        llvm::BasicBlock *entry = llvm::BasicBlock::Create(ctx, "entry", fn);
        fs->exit = llvm::BasicBlock::Create(ctx, "exit", fn);
        builder.SetInsertPoint(fs->exit);
        fs->ret = builder.CreatePHI(i32, 4, "result");
        builder.SetInsertPoint(entry);
        fs->user_context =
            user_context ? user_context : llvm::ConstantPointerNull::get(builder.getPtrTy());
    }

    /** Closes the body (success: 0), then runs live destructors in reverse and returns. */
    void end_function() {
        fs->ret->addIncoming(builder.getInt32(0), builder.GetInsertBlock());
        builder.CreateBr(fs->exit);
        llvm::Instruction *first = fs->exit->getFirstNonPHI();
        if (first) {
            builder.SetInsertPoint(first);
        } else {
            builder.SetInsertPoint(fs->exit);
        }
        for (auto it = fs->destructors.rbegin(); it != fs->destructors.rend(); ++it) {
            llvm::Value *live = builder.CreateLoad(i1, it->flag);
            llvm::BasicBlock *cur = builder.GetInsertBlock();
            llvm::BasicBlock *yes = llvm::BasicBlock::Create(ctx, "destroy", fs->fn);
            llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx, "destroyed", fs->fn);
            builder.CreateCondBr(live, yes, done);
            builder.SetInsertPoint(yes);
            llvm::Type *ret = it->function == "halide_free" ? builder.getVoidTy() : i32;
            const RuntimeSymbol *sym = find_runtime_symbol(it->function.c_str());
            if (sym) {
                ret = signature_type(sym->signature[0]);
            }
            llvm::FunctionCallee d = declare_extern(it->function, ret, {ptr, ptr});
            builder.CreateCall(d, {fs->user_context, builder.CreateLoad(ptr, it->slot)});
            builder.CreateBr(done);
            builder.SetInsertPoint(done);
            (void)cur;
        }
        builder.CreateRet(fs->ret);
    }

    void define_function(const LoweredFunc &f) {
        llvm::Function *fn = mod->getFunction(f.name);
        FnState state;
        llvm::Value *uc = nullptr;
        for (size_t i = 0; i < f.args.size(); i++) {
            if (f.args[i].name == "__user_context") {
                uc = fn->getArg(i);
            }
        }
        begin_function(fn, &state, uc);
        for (size_t i = 0; i < f.args.size(); i++) {
            const Argument &a = f.args[i];
            llvm::Value *v = fn->getArg(i);
            if (a.is_buffer()) {
                push_var(a.name + ".buffer", v);
                state.arg_buffers[a.name] = v;
                // A null buffer is an error the caller can act on, not a crash.
                llvm::Value *ok =
                    builder.CreateICmpNE(v, llvm::ConstantPointerNull::get(builder.getPtrTy()));
                std::string name = a.name;
                fail_unless(ok, [&, name]() {
                    return builder.CreateCall(
                        declare_extern("halide_error_buffer_argument_is_null", i32, {ptr, ptr}),
                        {fs->user_context, builder.CreateGlobalStringPtr(name)});
                });
            } else {
                push_var(a.name, v);
            }
        }
        for (const auto &kv : state.arg_buffers) {
            llvm::Value *field = builder.CreateStructGEP(buffer_t, kv.second, buffer_host_field);
            state.arg_hosts[kv.first] = builder.CreateLoad(ptr, field, kv.first + ".host");
        }
        codegen(f.body);
        end_function();
        fs = nullptr;
    }

    void define_argv_wrapper(const LoweredFunc &f) {
        llvm::Function *target = mod->getFunction(f.name);
        llvm::FunctionType *ft = llvm::FunctionType::get(i32, {ptr}, false);
        llvm::Function *w = llvm::Function::Create(ft, llvm::Function::ExternalLinkage,
                                                   f.name + "_argv", mod.get());
        llvm::BasicBlock *entry = llvm::BasicBlock::Create(ctx, "entry", w);
        builder.SetInsertPoint(entry);
        std::vector<llvm::Value *> args;
        for (size_t i = 0; i < f.args.size(); i++) {
            llvm::Value *slot =
                builder.CreateLoad(ptr, builder.CreateConstInBoundsGEP1_64(ptr, w->getArg(0), i));
            if (f.args[i].is_buffer()) {
                args.push_back(slot);
            } else {
                args.push_back(builder.CreateLoad(target->getArg(i)->getType(), slot));
            }
        }
        builder.CreateRet(builder.CreateCall(target, args));
    }
};

}  // namespace

std::vector<CompiledKernel> compile_kernels(const Module &m) {
    std::vector<CompiledKernel> out;
    for (const Kernel &k : m.kernels) {
        switch (k.device_api) {
        case DeviceAPI::Vulkan:
            out.push_back(compile_vulkan_kernel(k, m.target));
            break;
        case DeviceAPI::CUDA:
            out.push_back(compile_ptx_kernel(k, m.target));
            break;
        default:
            user_error << "kernel '" << k.name << "': Tally has no back end for device API "
                       << device_api_name(k.device_api);
        }
    }
    return out;
}

std::unique_ptr<llvm::Module> codegen_host(const Module &m, llvm::LLVMContext &ctx,
                                           llvm::TargetMachine &tm,
                                           const std::vector<CompiledKernel> &kernels) {
    return CodeGen(m, ctx, tm, kernels).run();
}

void optimize_module(llvm::Module &m, llvm::TargetMachine &tm, int level) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = level >= 2;
    pto.SLPVectorization = level >= 2;
    llvm::PassBuilder pb(&tm, pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::OptimizationLevel ol = level <= 0   ? llvm::OptimizationLevel::O0
                                 : level == 1 ? llvm::OptimizationLevel::O1
                                 : level == 2 ? llvm::OptimizationLevel::O2
                                              : llvm::OptimizationLevel::O3;
    llvm::ModulePassManager mpm =
        level <= 0 ? pb.buildO0DefaultPipeline(ol) : pb.buildPerModuleDefaultPipeline(ol);
    mpm.run(m, mam);
}

}  // namespace tally
