


def forward(self, x):
    add = 1 + x
    mul = 2.0 * add;  add = None
    truediv = 1 / x
    sub = mul - truediv;  mul = truediv = None
    neg = -sub;  sub = None
    pow_1 = neg ** 2;  neg = None
    pow_2 = 2 ** x
    add_1 = pow_1 + pow_2;  pow_1 = pow_2 = None
    _tensor_constant0 = self._tensor_constant0
    add_2 = _tensor_constant0.add(add_1);  _tensor_constant0 = add_1 = None
    b = self.b
    mul_1 = b.mul(add_2);  b = add_2 = None
    w = self.w
    mul_2 = w * mul_1;  mul_1 = None
    matmul = mul_2 @ w;  mul_2 = w = None
    transpose = matmul.transpose(0, 1);  matmul = None
    gt = transpose > 0
    lt = transpose < -1
    or_ = gt | lt;  gt = lt = None
    mod = x % 3;  x = None
    floordiv = mod // 2;  mod = None
    where = torch.where(or_, transpose, floordiv);  or_ = floordiv = None
    sum_1 = transpose.sum(dim = 0, keepdim = True);  transpose = None
    return (where, sum_1)
    