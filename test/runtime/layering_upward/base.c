// A fixture for runtime.LayeringCatchesUpwardCall and runtime.LayeringCatchesUnlistedFile: the
// lowest file, which low.c and high.c both call. Never linked into anything.

int upward_base(int n) {
    return n + 1;
}
