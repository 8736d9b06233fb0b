


def forward(self, x):
    add = 1 + x;  x = None
    mul = 2 * add;  add = None
    pow_1 = 3 ** mul;  mul = None
    rshift = 1 >> pow_1;  pow_1 = None
    truediv = rshift / 3;  rshift = None
    getitem = truediv[0];  truediv = None
    getitem_1 = getitem['k'];  getitem = None
    getitem_2 = getitem_1[(0, 0)];  getitem_1 = None
    sub = 2.5 - getitem_2;  getitem_2 = None
    eq = sub == None;  sub = None
    return eq
    