// A fixture for runtime.LayeringCatchesCycle: cycle_a.c and cycle_b.c call each other, the
// file-level cycle runtime/check_layering.py must report. Never linked into anything.

int cycle_b(int n);

int cycle_a(int n) {
    return n > 0 ? cycle_b(n - 1) : 0;
}
