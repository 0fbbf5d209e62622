W, H = 35, 38
IN_TYPE = 'i32'
x, y = hl.Var('x'), hl.Var('y')
inp = hl.ImageParam(hl.Int(32), 2, 'inp')
src = hl.BoundaryConditions.mirror_interior(inp)
f0 = hl.Func('f0')
f0[x, y] = (hl.cast(hl.UInt(8), src[x + 2, y + 0]) + hl.cast(hl.UInt(8), src[x + 2, y + -2]))
f1 = hl.Func('f1')
f1[x, y] = hl.select((hl.select(hl.Expr(src[x + -1, y + 2]) <= hl.cast(hl.Int(32), f0[x + 1, y + -2]), hl.cast(hl.Int(32), f0[x + -1, y + 2]), hl.Expr(src[x + -1, y + 0])) % (hl.cast(hl.Int(32), f0[x + -2, y + 1]) - hl.Expr(src[x + -2, y + 1]))) != hl.Expr(src[x + 0, y + 0]), hl.max((hl.cast(hl.Int(32), f0[x + 1, y + -1]) % hl.cast(hl.Int(32), f0[x + -2, y + -2])), hl.cast(hl.Int(32), hl.absd(hl.cast(hl.Int(32), f0[x + 0, y + -1]), hl.cast(hl.Int(32), f0[x + -1, y + 1])))), (hl.Expr(src[x + 2, y + 0]) - (hl.Expr(src[x + 0, y + 0]) // hl.cast(hl.Int(32), f0[x + 1, y + -2]))))
f2 = hl.Func('f2')
f2[x, y] = (((hl.cast(hl.UInt(8), src[x + -2, y + 2]) // hl.cast(hl.UInt(8), f1[x + 0, y + 1])) * 0) & ((hl.cast(hl.UInt(8), 121) | hl.cast(hl.UInt(8), src[x + -2, y + 1])) * hl.Expr(f0[x + 1, y + -1])))
out = f2
OUT_TYPE = 'u8'
xo, yo, xi, yi, t = hl.Var('xo'), hl.Var('yo'), hl.Var('xi'), hl.Var('yi'), hl.Var('t')
f0.compute_at(out, x)
f1.compute_root().unroll(x, 2).parallel(y)
out.unroll(x, 4)
out.specialize(inp.width() >= 32)
