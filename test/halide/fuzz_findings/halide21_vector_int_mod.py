W, H = 32, 38
IN_TYPE = 'f32'
x, y = hl.Var('x'), hl.Var('y')
inp = hl.ImageParam(hl.Float(32), 2, 'inp')
src = hl.BoundaryConditions.constant_exterior(inp, -0.847)
f0 = hl.Func('f0')
f0[x, y] = (((hl.cast(hl.UInt(16), hl.clamp(src[x + -1, y + 2], 0.0, 65535.0)) >> 1) % (hl.cast(hl.UInt(16), hl.clamp(src[x + 2, y + 0], 0.0, 65535.0)) & hl.cast(hl.UInt(16), hl.clamp(src[x + 0, y + -1], 0.0, 65535.0)))) | hl.cast(hl.UInt(16), hl.absd(hl.cast(hl.UInt(16), hl.clamp(src[x + 0, y + -2], 0.0, 65535.0)), (hl.cast(hl.UInt(16), hl.clamp(src[x + 0, y + 0], 0.0, 65535.0)) - hl.cast(hl.UInt(16), hl.clamp(src[x + 1, y + -1], 0.0, 65535.0))))))
r0 = hl.RDom([hl.Range(0, 2)])
f0[x, y] = f0[x, y] + hl.cast(hl.UInt(16), hl.clamp(src[x + r0.x, y], 0.0, 65535.0))
f1 = hl.Func('f1')
f1[x, y] = hl.cast(hl.UInt(8), hl.absd(((hl.cast(hl.UInt(8), y) & hl.cast(hl.UInt(8), f0[x + -1, y + -2])) ^ hl.cast(hl.UInt(8), f0[x + 2, y + 1])), hl.cast(hl.UInt(8), hl.clamp(src[x + -2, y + 1], 0.0, 255.0))))
f2 = hl.Func('f2')
f2[x, y] = (hl.cast(hl.Int(32), (hl.cast(hl.Int(64), (hl.cast(hl.Int(32), hl.clamp(src[x + 2, y + 1], -1048576.0, 1048576.0)) + hl.cast(hl.Int(32), f0[x + -2, y + 0]))) + hl.cast(hl.Int(64), (hl.cast(hl.Int(32), hl.clamp(src[x + 2, y + -1], -1048576.0, 1048576.0)) * 4)) + 1) // 2) % hl.cast(hl.Int(32), f0[x + 2, y + -1]))
out = f2
OUT_TYPE = 'i32'
xo, yo, xi, yi, t = hl.Var('xo'), hl.Var('yo'), hl.Var('xi'), hl.Var('yi'), hl.Var('t')
f0.compute_root().vectorize(x, 2)
f0.update().unscheduled()
out.vectorize(x, 16)
