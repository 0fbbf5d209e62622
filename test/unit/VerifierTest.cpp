// Unit tests of the IR verifier: each kind of problem it exists to catch, with the message a
// user sees, and the well-formed modules it must accept.

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tally/Error.h"
#include "tally/IR.h"
#include "tally/Module.h"
#include "tally/Parser.h"
#include "tally/Verifier.h"

namespace tally {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

Expr i32(int64_t v) {
    return IntImm::make(Int(32), v);
}
Expr var(const std::string &n, Type t = Int(32)) {
    return Variable::make(t, n);
}
Stmt eval(Expr e) {
    return Evaluate::make(std::move(e));
}
Expr ctx() {
    return var("__user_context", Handle());
}

Argument buffer_arg(const std::string &name, Type elem, int dims) {
    Argument a;
    a.name = name;
    a.kind = Argument::Buffer;
    a.type = elem;
    a.dimensions = dims;
    return a;
}

Argument scalar_arg(const std::string &name, Type t) {
    Argument a;
    a.name = name;
    a.type = t;
    return a;
}

/** A module with one function `f(out: buffer<int32, 1>, n: int32)` whose body is `body`. */
Module module_with(Stmt body) {
    Module m;
    m.name = "f";
    m.target = Target::parse("host");
    LoweredFunc f;
    f.name = "f";
    f.args = {buffer_arg("out", Int(32), 1), scalar_arg("n", Int(32))};
    f.body = std::move(body);
    m.functions.push_back(f);
    return m;
}

/** Expects verify(m) to throw a CompileError whose message contains every fragment. */
void expect_rejected(const Module &m, const std::vector<std::string> &fragments) {
    try {
        verify(m);
        ADD_FAILURE() << "verify accepted the module";
    } catch (const CompileError &e) {
        for (const std::string &f : fragments) {
            EXPECT_THAT(e.what(), HasSubstr(f));
        }
    }
}

TEST(Verifier, AcceptsAWellFormedFunction) {
    // for (x, 0, n) { out[x] = x + n }
    Stmt body = For::make("x", i32(0), var("n"), ForType::Serial, DeviceAPI::None,
                          Store::make("out", Add::make(var("x"), var("n")), var("x")));
    EXPECT_NO_THROW(verify(module_with(body)));
}

TEST(Verifier, RejectsAnUnboundVariable) {
    Stmt body = Store::make("out", var("y"), i32(0));
    expect_rejected(module_with(body), {"variable 'y' is not bound", "in function 'f'"});
}

TEST(Verifier, RejectsAVariableUsedOutsideItsLoop) {
    Stmt loop = For::make("x", i32(0), i32(4), ForType::Serial, DeviceAPI::None,
                          Store::make("out", i32(0), var("x")));
    Stmt body = Block::make(loop, Store::make("out", var("x"), i32(0)));
    expect_rejected(module_with(body), {"variable 'x' is not bound"});
}

TEST(Verifier, RejectsABoundVariableUsedWithAnotherType) {
    Stmt body = LetStmt::make("a", i32(1), eval(Cast::make(Int(32), var("a", Int(64)))));
    expect_rejected(module_with(body), {"variable 'a' used as int64 but bound as int32"});
}

TEST(Verifier, AcceptsShadowingWithANewType) {
    Stmt inner =
        LetStmt::make("a", IntImm::make(Int(64), 2), eval(Cast::make(Int(32), var("a", Int(64)))));
    Stmt body =
        LetStmt::make("a", i32(1), Block::make(inner, Store::make("out", var("a"), i32(0))));
    EXPECT_NO_THROW(verify(module_with(body)));
}

TEST(Verifier, RejectsALoadFromAnUndeclaredBuffer) {
    Stmt body = Store::make("out", Load::make(Int(32), "nowhere", i32(0)), i32(0));
    expect_rejected(module_with(body),
                    {"load names 'nowhere', which is not a declared buffer", "in statement:"});
}

TEST(Verifier, RejectsAStoreToAnUndeclaredBuffer) {
    expect_rejected(module_with(Store::make("nowhere", i32(0), i32(0))),
                    {"store names 'nowhere', which is not a declared buffer"});
}

TEST(Verifier, RejectsAStoreOfTheWrongElementType) {
    Stmt body = Store::make("out", IntImm::make(Int(16), 1), i32(0));
    expect_rejected(module_with(body), {"store of int16", "buffer 'out'", "element type int32"});
}

TEST(Verifier, AcceptsStoresOfAnyTypeIntoAByteAllocation) {
    // Halide's memoize packs its cache key so: a string's pointer at element 0 of a uint8
    // allocation, then int32 Params at element 2 and 3 (bytes 8 and 12), each store addressed in
    // units of its own type.
    Stmt key = Block::make({Store::make("key", StringImm::make("1:f1:g"), i32(0)),
                            Store::make("key", var("n", Int(32)), i32(2)),
                            Store::make("key", IntImm::make(Int(32), 0), i32(3))});
    Stmt alloc = Allocate::make("key", UInt(8), MemoryType::Stack, {i32(16)}, Expr(), key);
    EXPECT_NO_THROW(verify(module_with(alloc)));
    // Loads keep the rule: a uint8 allocation is read as uint8 (below), and other element
    // types still take only their own stores.
    Stmt wrong = Allocate::make("tmp", Int(16), MemoryType::Heap, {i32(4)}, Expr(),
                                Store::make("tmp", var("n", Int(32)), i32(0)));
    expect_rejected(module_with(wrong), {"store of int32", "buffer 'tmp'", "element type int16"});
}

TEST(Verifier, AcceptsLoadsFromAnAllocationOrAPointerInScope) {
    Stmt use = Store::make("out", Load::make(Int(32), "tmp", i32(0)), i32(0));
    Stmt alloc = Allocate::make("tmp", Int(32), MemoryType::Heap, {i32(16)}, Expr(),
                                Block::make(Store::make("tmp", i32(1), i32(0)), use));
    EXPECT_NO_THROW(verify(module_with(alloc)));

    Stmt via_pointer = LetStmt::make("p", Call::make(Handle(), "get_pointer", {}, Call::Extern),
                                     Store::make("out", Load::make(Int(32), "p", i32(0)), i32(0)));
    EXPECT_NO_THROW(verify(module_with(via_pointer)));
}

TEST(Verifier, RejectsALoadOfTheWrongTypeFromAnAllocation) {
    Stmt use =
        Store::make("out", Cast::make(Int(32), Load::make(Float(32), "tmp", i32(0))), i32(0));
    Stmt alloc = Allocate::make("tmp", UInt(8), MemoryType::Heap, {i32(16)}, Expr(), use);
    expect_rejected(module_with(alloc), {"load of float32", "buffer 'tmp'", "element type uint8"});
}

// Halide keeps bools as bytes and its lowering writes `lg[i] = uint8(...)` into bool buffers.
TEST(Verifier, BoolBuffersTakeUint8AccessesOnly) {
    auto with_bool_tmp = [](const Expr &stored) {
        Stmt use =
            Store::make("out", Cast::make(Int(32), Load::make(UInt(8), "tmp", i32(0))), i32(0));
        return module_with(Allocate::make("tmp", Bool(), MemoryType::Heap, {i32(16)}, Expr(),
                                          Block::make(Store::make("tmp", stored, i32(0)), use)));
    };
    EXPECT_NO_THROW(verify(with_bool_tmp(UIntImm::make(UInt(8), uint64_t(1)))));
    expect_rejected(with_bool_tmp(UIntImm::make(UInt(16), uint64_t(1))),
                    {"store of uint16", "buffer 'tmp'", "element type uint1"});
}

TEST(Verifier, RejectsAFreeWithoutAnAllocation) {
    expect_rejected(module_with(Free::make("tmp")),
                    {"free of 'tmp', which is not an allocation in scope", "free tmp"});
}

TEST(Verifier, RejectsAFreeAfterTheAllocationEnded) {
    Stmt alloc = Allocate::make("tmp", Int(32), MemoryType::Heap, {i32(16)}, Expr(),
                                Store::make("tmp", i32(1), i32(0)));
    expect_rejected(module_with(Block::make(alloc, Free::make("tmp"))), {"free of 'tmp'"});
    Stmt ok = Allocate::make("tmp", Int(32), MemoryType::Heap, {i32(16)}, Expr(),
                             Block::make(Store::make("tmp", i32(1), i32(0)), Free::make("tmp")));
    EXPECT_NO_THROW(verify(module_with(ok)));
}

TEST(Verifier, RejectsAFunctionReferenceNamingAMissingFunction) {
    Expr closure = var("::missing", Handle());
    Stmt body = eval(Call::make(Int(32), "halide_do_par_for",
                                {ctx(), closure, i32(0), i32(4), ctx()}, Call::Extern));
    expect_rejected(module_with(body), {"'::missing' names no function of this module"});
}

TEST(Verifier, AcceptsAFunctionReferenceNamingAFunctionOfTheModule) {
    Module m = module_with(
        eval(Call::make(Int(32), "halide_do_par_for",
                        {ctx(), var("::task", Handle()), i32(0), i32(4), ctx()}, Call::Extern)));
    LoweredFunc task;
    task.name = "task";
    task.linkage = LinkageType::Internal;
    task.args = {scalar_arg("__user_context", Handle()), scalar_arg("i", Int(32))};
    task.body = eval(var("i"));
    m.functions.push_back(task);
    EXPECT_NO_THROW(verify(m));
}

/** A module holding kernel `k0` and a function that launches `launched`. */
Module module_launching(const std::string &launched) {
    Kernel k;
    k.name = "k0";
    k.device_api = DeviceAPI::CUDA;
    k.args = {buffer_arg("out", Int(32), 1)};
    k.body = For::make("t", i32(0), i32(32), ForType::GPUThread, DeviceAPI::CUDA,
                       Store::make("out", var("t"), var("t")));
    k.geometry.threads = {{{"t"}, i32(32)}};
    Expr launch = Call::make(
        Int(32), "halide_cuda_run",
        {ctx(), StringImm::make(launched), i32(1), i32(1), i32(1), i32(32), i32(1), i32(1), i32(0)},
        Call::Extern);
    Module m = module_with(
        LetStmt::make("r", launch, AssertStmt::make(EQ::make(var("r"), i32(0)), var("r"))));
    m.kernels.push_back(k);
    return m;
}

TEST(Verifier, RejectsALaunchOfAKernelTheModuleDoesNotHold) {
    EXPECT_NO_THROW(verify(module_launching("k0")));
    expect_rejected(module_launching("k1"),
                    {"launch of kernel 'k1', which the module does not hold"});
}

TEST(Verifier, ChecksKernelBodies) {
    Module m = module_launching("k0");
    m.kernels[0].body = Store::make("out", var("undeclared"), i32(0));
    expect_rejected(m, {"in kernel 'k0'", "variable 'undeclared' is not bound"});
}

TEST(Verifier, RejectsDuplicateDefinitions) {
    Module m = module_with(eval(i32(0)));
    m.functions.push_back(m.functions[0]);
    EXPECT_THAT([&] { verify(m); },
                ThrowsMessage<CompileError>(HasSubstr("function 'f' defined twice")));
}

TEST(Verifier, RejectsANonIntegerAssertMessage) {
    Stmt body = AssertStmt::make(LT::make(var("n"), i32(4)), StringImm::make("oops"));
    expect_rejected(module_with(body), {"assert message must be an integer error code"});
}

TEST(Verifier, RejectsLoopBoundsOfDifferentTypes) {
    Stmt body = For::make("x", i32(0), IntImm::make(Int(64), 4), ForType::Serial, DeviceAPI::None,
                          eval(i32(0)));
    expect_rejected(module_with(body), {"loop 'x' has bounds of different types"});
}

TEST(Verifier, ErrorsAreCompileErrorsNotInternalErrors) {
    EXPECT_THAT([] { verify(module_with(Free::make("tmp"))); },
                ThrowsMessage<CompileError>(AllOf(HasSubstr("verify:"), HasSubstr("free"))));
}

TEST(Verifier, AcceptsBufferArgumentsAndTheirHalideBufferHandles) {
    // Halide's lowered code reads `out.buffer` (a halide_buffer_t *) next to `out` itself.
    Stmt body =
        LetStmt::make("h",
                      Call::make(Handle(), "_halide_buffer_get_host",
                                 {var("out.buffer", Handle("halide_buffer_t"))}, Call::Extern),
                      Store::make("out", i32(0), i32(0)));
    EXPECT_NO_THROW(verify(module_with(body)));
}

TEST(Verifier, AcceptsParsedTextWithTypedHeaders) {
    Module m = parse_module("module name=f, target=host\n"
                            "external func f (out: buffer<uint8, 1>, n: int32) {\n"
                            "  allocate tmp[uint8 * n]\n"
                            "  for (x, 0, n) {\n"
                            "    tmp[x] = (uint8)3\n"
                            "  }\n"
                            "  for (x, 0, n) {\n"
                            "    out[x] = tmp[x]\n"
                            "  }\n"
                            "  free tmp\n"
                            "}\n");
    EXPECT_NO_THROW(verify(m));
    Module bad = parse_module("module name=f, target=host\n"
                              "external func f (out: buffer<uint8, 1>) {\n"
                              "  out[0] = (uint8)k\n"
                              "}\n");
    expect_rejected(bad, {"variable 'k' is not bound"});
}

}  // namespace
}  // namespace tally
