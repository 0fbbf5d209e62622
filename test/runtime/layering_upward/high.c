// The highest file of the layering_upward fixture (see low.c): calls only base.c, below it.

int upward_base(int n);

int upward_high(int n) {
    return upward_base(n) * 2;
}
