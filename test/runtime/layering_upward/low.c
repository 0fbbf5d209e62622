// A fixture for runtime.LayeringCatchesUpwardCall: low.c, declared below high.c (layers.txt),
// calls it, the upward call runtime/check_layering.py must report. Its call to base.c, in a layer
// below, is allowed. Never linked into anything.

int upward_base(int n);
int upward_high(int n);

int upward_low(int n) {
    return upward_high(upward_base(n));
}
