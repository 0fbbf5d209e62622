// Unit tests of IRMutator's defaults: a mutator that changes nothing returns the very same tree,
// and one that changes a single leaf rebuilds exactly the nodes on the path to it.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tally/IR.h"
#include "tally/IREquality.h"
#include "tally/IRMutator.h"
#include "tally/IRVisitor.h"
#include "tally/Parser.h"

namespace tally {
namespace {

std::string corpus(const std::string &name) {
    return std::string(TALLY_CORPUS_DIR) + "/" + name;
}

Expr i32(int64_t v) {
    return IntImm::make(Int(32), v);
}
Expr var(const std::string &n) {
    return Variable::make(Int(32), n);
}

/** The immediate children of a node, in IRMutator's visiting order. It overrides mutate() so
 * that below the root nothing is entered: each child is recorded and returned unchanged. */
class ImmediateChildren : public IRMutator {
public:
    std::vector<Expr> exprs;
    std::vector<Stmt> stmts;

    static ImmediateChildren of(const Stmt &s) {
        ImmediateChildren c;
        if (const Block *b = s.as<Block>()) {
            // A Block's children are its two parts, whatever order the mutator walks them in.
            c.stmts = {b->first, b->rest};
            return c;
        }
        c.root = true;
        c.mutate(s);
        return c;
    }
    static ImmediateChildren of(const Expr &e) {
        ImmediateChildren c;
        c.root = true;
        c.mutate(e);
        return c;
    }

    Expr mutate(const Expr &e) override {
        if (root) {
            root = false;
            return IRMutator::mutate(e);
        }
        exprs.push_back(e);
        return e;
    }
    Stmt mutate(const Stmt &s) override {
        if (root) {
            root = false;
            return IRMutator::mutate(s);
        }
        stmts.push_back(s);
        return s;
    }

private:
    bool root = false;
};

/** Compares an original tree with a rebuilt one. Each rebuilt node must differ from its original
 * in exactly one child (the one on the path); all other children must be the original nodes.
 * Returns the number of rebuilt nodes, leaf included. */
class PathChecker {
public:
    int rebuilt = 0;

    template <typename T>
    void check(const T &before, const T &after) {
        if (before.same_as(after)) {
            return;
        }
        rebuilt++;
        ASSERT_TRUE(before.defined() && after.defined());
        ASSERT_EQ(before.node_type(), after.node_type());
        ImmediateChildren b = ImmediateChildren::of(before), a = ImmediateChildren::of(after);
        ASSERT_EQ(b.exprs.size(), a.exprs.size());
        ASSERT_EQ(b.stmts.size(), a.stmts.size());
        int differing = 0;
        for (size_t i = 0; i < b.exprs.size(); i++) {
            differing += !b.exprs[i].same_as(a.exprs[i]);
        }
        for (size_t i = 0; i < b.stmts.size(); i++) {
            differing += !b.stmts[i].same_as(a.stmts[i]);
        }
        bool leaf = b.exprs.empty() && b.stmts.empty();
        ASSERT_EQ(differing, leaf ? 0 : 1) << "a rebuilt node must differ in exactly one child";
        for (size_t i = 0; i < b.exprs.size(); i++) {
            check(b.exprs[i], a.exprs[i]);
        }
        for (size_t i = 0; i < b.stmts.size(); i++) {
            check(b.stmts[i], a.stmts[i]);
        }
    }
};

/** Counts the nodes between the root and the first StringImm with the given value, inclusive;
 * 0 if there is none. */
class DepthOfString : public IRVisitor {
public:
    explicit DepthOfString(std::string value) : value(std::move(value)) {}
    int found_depth = 0;

    void count(const Stmt &s) {
        depth = 0;
        s.accept(this);
    }

private:
    using IRVisitor::visit;
    std::string value;
    int depth = 0;

    // Every node passes through one of the visit overloads; tracking depth on each kind we
    // descend through is enough since the path is what matters.
#define TALLY_TRACK(N)                                                                             \
    void visit(const N *op) override {                                                             \
        depth++;                                                                                   \
        IRVisitor::visit(op);                                                                      \
        depth--;                                                                                   \
    }
    TALLY_TRACK(Cast)
    TALLY_TRACK(Reinterpret)
    TALLY_TRACK(Add)
    TALLY_TRACK(Sub)
    TALLY_TRACK(Mul)
    TALLY_TRACK(Div)
    TALLY_TRACK(Mod)
    TALLY_TRACK(Min)
    TALLY_TRACK(Max)
    TALLY_TRACK(EQ)
    TALLY_TRACK(NE)
    TALLY_TRACK(LT)
    TALLY_TRACK(LE)
    TALLY_TRACK(GT)
    TALLY_TRACK(GE)
    TALLY_TRACK(And)
    TALLY_TRACK(Or)
    TALLY_TRACK(Not)
    TALLY_TRACK(Select)
    TALLY_TRACK(Load)
    TALLY_TRACK(Ramp)
    TALLY_TRACK(Broadcast)
    TALLY_TRACK(Let)
    TALLY_TRACK(Call)
    TALLY_TRACK(Shuffle)
    TALLY_TRACK(LetStmt)
    TALLY_TRACK(AssertStmt)
    TALLY_TRACK(ProducerConsumer)
    TALLY_TRACK(For)
    TALLY_TRACK(Store)
    TALLY_TRACK(Allocate)
    TALLY_TRACK(IfThenElse)
    TALLY_TRACK(Evaluate)
#undef TALLY_TRACK

    // Spell out the Block recursion: each Block of a spine is a node on the path, while the
    // default visit walks a spine without visiting its inner Blocks.
    void visit(const Block *op) override {
        depth++;
        op->first.accept(this);
        op->rest.accept(this);
        depth--;
    }

    void visit(const StringImm *op) override {
        if (!found_depth && op->value == value) {
            found_depth = depth + 1;  // the StringImm itself is on the path too
        }
    }
};

/** Replaces the first StringImm with value `from` (in visiting order) by `to`. */
class ReplaceFirstString : public IRMutator {
public:
    ReplaceFirstString(std::string from, std::string to)
        : from(std::move(from)), to(std::move(to)) {}
    int replaced = 0;

protected:
    using IRMutator::visit;
    Expr visit(const StringImm *op) override {
        if (!replaced && op->value == from) {
            replaced++;
            return StringImm::make(to);
        }
        return op;
    }

private:
    std::string from, to;
};

/** Rewrites IntImm 42 to 43 wherever it appears. */
class BumpFortyTwo : public IRMutator {
protected:
    using IRMutator::visit;
    Expr visit(const IntImm *op) override { return op->value == 42 ? i32(43) : Expr(op); }
};

// ---------------------------------------------------------------------------------------------

TEST(IRMutator, NoOpMutatorReturnsThePointerIdenticalCorpusModule) {
    for (const char *file : {"conv_chain.profile.stmt", "gpu_gpu_cpu.cuda-profile.stmt",
                             "preoffload/histogram_equalize.profile.stmt"}) {
        Module m = parse_module_file(corpus(file));
        ASSERT_FALSE(m.functions.empty()) << file;
        for (const LoweredFunc &f : m.functions) {
            IRMutator noop;
            Stmt out = noop.mutate(f.body);
            EXPECT_TRUE(out.same_as(f.body)) << file << ": " << f.name;
        }
    }
}

TEST(IRMutator, UndefinedInputsComeBackUndefined) {
    IRMutator noop;
    EXPECT_FALSE(noop.mutate(Expr()).defined());
    EXPECT_FALSE(noop.mutate(Stmt()).defined());
}

TEST(IRMutator, ChangingOneLeafRebuildsOnlyThePathToIt) {
    // Block(store a, Block(for i { store b[i] = i + 42 }, evaluate f()))
    Stmt store_a = Store::make("a", i32(1), i32(0));
    Expr i = var("i");
    Expr lhs = i;
    Stmt inner = Store::make("b", Add::make(lhs, i32(42)), i);
    Expr mn = i32(0), ex = i32(10);
    Stmt loop = For::make("i", mn, ex, ForType::Serial, DeviceAPI::None, inner);
    Stmt call = Evaluate::make(Call::make(Int(32), "f", {}, Call::Extern));
    Stmt root = Block::make({store_a, loop, call});

    BumpFortyTwo bump;
    Stmt out = bump.mutate(root);
    ASSERT_FALSE(out.same_as(root));

    const Block *top = out.as<Block>();
    ASSERT_NE(top, nullptr);
    EXPECT_TRUE(top->first.same_as(store_a)) << "sibling before the path is kept";
    const Block *rest = top->rest.as<Block>();
    ASSERT_NE(rest, nullptr);
    EXPECT_TRUE(rest->rest.same_as(call)) << "sibling after the path is kept";
    const For *f = rest->first.as<For>();
    ASSERT_NE(f, nullptr);
    EXPECT_FALSE(rest->first.same_as(loop));
    EXPECT_TRUE(f->min.same_as(mn));
    EXPECT_TRUE(f->extent.same_as(ex));
    const Store *st = f->body.as<Store>();
    ASSERT_NE(st, nullptr);
    EXPECT_TRUE(st->index.same_as(i));
    const Add *add = st->value.as<Add>();
    ASSERT_NE(add, nullptr);
    EXPECT_TRUE(add->a.same_as(lhs));
    ASSERT_NE(add->b.as<IntImm>(), nullptr);
    EXPECT_EQ(add->b.as<IntImm>()->value, 43);

    PathChecker pc;
    pc.check(root, out);
    // Block, Block, For, Store, Add, IntImm.
    EXPECT_EQ(pc.rebuilt, 6);
}

TEST(IRMutator, ChangingOneLeafOfACorpusFunctionRebuildsOnlyThePath) {
    Module m = parse_module_file(corpus("blur3x3.profile.stmt"));
    const LoweredFunc *f = m.find_function("blur_y");
    ASSERT_NE(f, nullptr);

    DepthOfString depth("blur_x");
    depth.count(f->body);
    ASSERT_GT(depth.found_depth, 3) << "the profiler's func-name table names blur_x";

    ReplaceFirstString rename("blur_x", "renamed");
    Stmt out = rename.mutate(f->body);
    ASSERT_EQ(rename.replaced, 1);
    EXPECT_FALSE(equal(out, f->body));

    PathChecker pc;
    pc.check(f->body, out);
    EXPECT_EQ(pc.rebuilt, depth.found_depth);
}

TEST(IRMutator, ChangingTheFirstStatementOfALongBlockKeepsTheRestOfTheBlock) {
    std::vector<Stmt> stmts = {Store::make("a", i32(42), i32(0))};
    for (int k = 1; k < 10; k++) {
        stmts.push_back(Store::make("a", i32(k), i32(k)));
    }
    Stmt root = Block::make(stmts);
    BumpFortyTwo bump;
    Stmt out = bump.mutate(root);
    const Block *before = root.as<Block>(), *after = out.as<Block>();
    ASSERT_NE(before, nullptr);
    ASSERT_NE(after, nullptr);
    EXPECT_FALSE(after->first.same_as(before->first));
    // An iterative visit(Block) that rebuilds the whole spine with Block::make(list) (as one did
    // at db662c6) makes the unchanged rest of the block a new node.
    EXPECT_TRUE(after->rest.same_as(before->rest)) << "the unchanged rest must be kept";
    PathChecker pc;
    pc.check(root, out);
    EXPECT_EQ(pc.rebuilt, 3);  // the top Block, the Store and the IntImm: nothing of the rest
}

TEST(IRMutator, DroppingTheFirstStatementOfABlockReturnsTheRest) {
    class DropFrees : public IRMutator {
    protected:
        using IRMutator::visit;
        Stmt visit(const Free *) override { return Stmt(); }
    };
    Stmt a = Free::make("buf");
    Stmt b = Evaluate::make(i32(0));
    Stmt c = Evaluate::make(i32(1));
    DropFrees drop;
    EXPECT_TRUE(drop.mutate(Block::make(a, b)).same_as(b));
    EXPECT_TRUE(drop.mutate(Block::make(b, a)).same_as(b));
    Stmt out = drop.mutate(Block::make({b, a, c}));
    std::vector<Stmt> flat = flatten_block(out);
    ASSERT_EQ(flat.size(), 2u);
    EXPECT_TRUE(flat[0].same_as(b));
    EXPECT_TRUE(flat[1].same_as(c));
}

TEST(IRMutator, RebuiltNodesKeepTheirNonChildFields) {
    Expr idx = Ramp::make(var("x"), i32(1), 4);
    Expr pred = Broadcast::make(LT::make(var("x"), i32(42)), 4);
    Stmt s = Store::make("out", Load::make(UInt(8, 4), "in", idx, pred, {4, 2}), idx, pred, {8, 0});
    Stmt loop = For::make("x", i32(0), i32(42), ForType::Vectorized, DeviceAPI::Host, s);
    BumpFortyTwo bump;
    Stmt out = bump.mutate(loop);
    const For *f = out.as<For>();
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->for_type, ForType::Vectorized);
    EXPECT_EQ(f->device_api, DeviceAPI::Host);
    EXPECT_EQ(f->extent.as<IntImm>()->value, 43);
    const Store *st = f->body.as<Store>();
    ASSERT_NE(st, nullptr);
    EXPECT_EQ(st->alignment, (ModulusRemainder{8, 0}));
    const Load *ld = st->value.as<Load>();
    ASSERT_NE(ld, nullptr);
    EXPECT_EQ(ld->alignment, (ModulusRemainder{4, 2}));
    EXPECT_EQ(ld->type, UInt(8, 4));
    EXPECT_EQ(ld->name, "in");
}

}  // namespace
}  // namespace tally
