W, H = 44, 36
IN_TYPE = 'i32'
x, y = hl.Var('x'), hl.Var('y')
inp = hl.ImageParam(hl.Int(32), 2, 'inp')
src = hl.BoundaryConditions.mirror_interior(inp)
f0 = hl.Func('f0')
f0[x, y] = (hl.cast(hl.UInt(8), src[x + -2, y + -1]) & hl.cast(hl.UInt(8), src[x + 0, y + 2]))
f1 = hl.Func('f1')
f1[x, y] = hl.min(hl.cast(hl.UInt(16), hl.absd((hl.cast(hl.UInt(16), f0[x + 0, y + 1]) * 3), (hl.cast(hl.UInt(16), f0[x + 2, y + 1]) + hl.cast(hl.UInt(16), f0[x + 2, y + -1])))), (hl.select(hl.cast(hl.UInt(16), src[x + 2, y + 2]) != hl.cast(hl.UInt(16), 64), hl.cast(hl.UInt(16), f0[x + -1, y + -2]), hl.cast(hl.UInt(16), f0[x + 1, y + -1])) - (hl.cast(hl.UInt(16), f0[x + 2, y + -1]) | hl.cast(hl.UInt(16), src[x + 0, y + 2]))))
f2 = hl.Func('f2')
f2[x, y] = (hl.min(hl.cast(hl.Float(32), f1[x + -2, y + -2]), hl.cast(hl.Float(32), y)) - hl.max(hl.cast(hl.Float(32), src[x + -1, y + -2]), hl.cast(hl.Float(32), src[x + 1, y + -1])))
r2 = hl.RDom([hl.Range(0, 1)])
f2[x, y] = f2[x, y] + hl.cast(hl.Float(32), src[x + r2.x, y])
f3 = hl.Func('f3')
f3[x, y] = hl.min(hl.cast(hl.Int(32), (hl.cast(hl.Int(64), (hl.Expr(src[x + 0, y + -1]) - hl.cast(hl.Int(32), f0[x + 0, y + -1]))) + hl.cast(hl.Int(64), (hl.Expr(src[x + 1, y + -1]) >> 1)) + 1) // 2), (hl.select(hl.cast(hl.Int(32), x * 3 - y) <= hl.cast(hl.Int(32), -96), hl.Expr(src[x + -1, y + 1]), hl.cast(hl.Int(32), f1[x + -2, y + 1])) * 0))
out = f3
OUT_TYPE = 'i32'
xo, yo, xi, yi, t = hl.Var('xo'), hl.Var('yo'), hl.Var('xi'), hl.Var('yi'), hl.Var('t')
f0.compute_root().vectorize(x, 8).parallel(y)
f1.compute_root()
f2.compute_at(out, x)
f2.update().unscheduled()
out.tile(x, y, xo, yo, xi, yi, 8, 8, hl.TailStrategy.GuardWithIf)
out.specialize(inp.width() >= 32)
