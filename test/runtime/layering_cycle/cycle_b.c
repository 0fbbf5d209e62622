// The other half of the runtime.LayeringCatchesCycle fixture (see cycle_a.c).

int cycle_a(int n);

int cycle_b(int n) {
    return n > 0 ? cycle_a(n - 1) : 1;
}
