


def forward(self, x, y):
    x += y;  iadd = x;  x = None
    iadd &= y;  iand = iadd;  iadd = None
    iand //= y;  ifloordiv = iand;  iand = None
    ifloordiv <<= y;  ilshift = ifloordiv;  ifloordiv = None
    ilshift %= y;  imod = ilshift;  ilshift = None
    imod *= y;  imul = imod;  imod = None
    imul @= y;  imatmul = imul;  imul = None
    imatmul |= y;  ior = imatmul;  imatmul = None
    ior **= y;  ipow = ior;  ior = None
    ipow >>= y;  irshift = ipow;  ipow = None
    irshift -= y;  isub = irshift;  irshift = None
    isub /= y;  itruediv = isub;  isub = None
    itruediv ^= y;  ixor = itruediv;  itruediv = None
    ixor[0] = y;  setitem = ixor;  ixor = y = None
    return setitem
    