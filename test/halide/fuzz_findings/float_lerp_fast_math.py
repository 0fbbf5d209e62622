W, H = 55, 31
IN_TYPE = 'u8'
x, y = hl.Var('x'), hl.Var('y')
inp = hl.ImageParam(hl.UInt(8), 2, 'inp')
src = hl.BoundaryConditions.mirror_interior(inp)
f0 = hl.Func('f0')
f0[x, y] = hl.cast(hl.Float(32), src[x + 2, y + -1])
f1 = hl.Func('f1')
f1[x, y] = hl.lerp(hl.max(hl.lerp(hl.cast(hl.Float(32), -2.524), hl.Expr(f0[x + -2, y + -1]), hl.clamp(hl.cast(hl.Float(32), src[x + -2, y + 1]), 0.0, 1.0)), hl.max(hl.cast(hl.Float(32), src[x + -1, y + -2]), hl.cast(hl.Float(32), y))), hl.sqrt(hl.abs(hl.Expr(f0[x + 1, y + 0]))), hl.clamp((hl.Expr(f0[x + 0, y + -1]) / -1.845), 0.0, 1.0))
f2 = hl.Func('f2')
f2[x, y] = (hl.select(hl.cast(hl.UInt(16), (hl.cast(hl.UInt(32), hl.cast(hl.UInt(16), hl.clamp(f0[x + 1, y + 1], 0.0, 65535.0))) + hl.cast(hl.UInt(32), hl.cast(hl.UInt(16), x * 3 - y)) + 1) // 2) <= hl.cast(hl.UInt(16), hl.absd(hl.cast(hl.UInt(16), src[x + -2, y + 0]), hl.cast(hl.UInt(16), 225))), (hl.cast(hl.UInt(16), src[x + -1, y + 0]) * 2), (hl.cast(hl.UInt(16), src[x + -1, y + 0]) + hl.cast(hl.UInt(16), src[x + 2, y + -2]))) * hl.cast(hl.UInt(16), hl.absd((hl.cast(hl.UInt(16), src[x + 2, y + 0]) * hl.cast(hl.UInt(16), x)), (hl.cast(hl.UInt(16), hl.clamp(f1[x + -1, y + 2], 0.0, 65535.0)) * 2))))
out = f2
OUT_TYPE = 'u16'
xo, yo, xi, yi, t = hl.Var('xo'), hl.Var('yo'), hl.Var('xi'), hl.Var('yi'), hl.Var('t')
f0.compute_at(out, x).vectorize(x, 16)
f1.compute_at(out, x).vectorize(x, 8)
out
