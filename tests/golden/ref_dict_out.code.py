


def forward(self, x, y = None, alpha : float = 2.0):
    mul = x * alpha;  alpha = None
    cat = torch.cat([x, mul], dim = 0);  mul = None
    to = cat.to(torch.float64)
    clamp = torch.clamp(x, min = -inf, max = inf)
    scale = self.scale
    mul_1 = x * scale;  x = scale = None
    _tensor_constant0 = self._tensor_constant0
    _tensor_constant1 = self._tensor_constant1
    return {'cat': cat, 'zeros': _tensor_constant0, 'tup': (to, clamp), 'lst': [mul_1, _tensor_constant1, None], 'n': 3}
    