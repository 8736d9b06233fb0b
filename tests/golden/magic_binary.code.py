


def forward(self, x, y):
    add = x + y
    sub = x - y
    mul = x * y
    floordiv = x // y
    truediv = x / y
    mod = x % y
    pow_1 = x ** y
    lshift = x << y
    rshift = x >> y
    and_ = x & y
    or_ = x | y
    xor = x ^ y
    getitem = x[y]
    matmul = x @ y
    eq = x == y
    ne = x != y
    lt = x < y
    gt = x > y
    le = x <= y
    ge = x >= y;  x = y = None
    return (add, sub, mul, floordiv, truediv, mod, pow_1, lshift, rshift, and_, or_, xor, getitem, matmul, eq, ne, lt, gt, le, ge)
    