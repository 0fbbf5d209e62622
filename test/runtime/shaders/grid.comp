#version 450
// out[x + nx * (y + ny * z)] = x + 1000 * y + 1000000 * z over a 3-D grid of nx * ny * nz.
// Buffer 0 = out (int32); push constants nx (0), ny (4), nz (8).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0, std430) buffer Out { int data[]; } outp;
layout(push_constant, std430) uniform Args { int nx; int ny; int nz; } args;
void main() {
    uvec3 p = gl_GlobalInvocationID;
    if (p.x < uint(args.nx) && p.y < uint(args.ny) && p.z < uint(args.nz)) {
        uint i = p.x + uint(args.nx) * (p.y + uint(args.ny) * p.z);
        outp.data[i] = int(p.x) + 1000 * int(p.y) + 1000000 * int(p.z);
    }
}
